package journal

import (
	"fmt"
	"slices"
	"time"
)

// checkLocked applies the append's fence: its leases as of now, its expected
// stream versions and its condition.
func (m *Memory) checkLocked(partition string, opts AppendOptions, now time.Time) error {
	for _, l := range opts.Leases {
		if err := m.checkLeaseLocked(l, now); err != nil {
			return err
		}
	}
	if err := m.checkExpectLocked(partition, opts.Expect); err != nil {
		return err
	}
	if c := opts.Condition; c != nil {
		return m.checkConditionLocked(c)
	}
	return nil
}

// duplicateLocked resolves idempotency. done is true when the append is fully
// answered: every ID stored (the originals, or ErrDuplicateMismatch when one
// differs), or some but not all stored (ErrDuplicateMismatch).
func (m *Memory) duplicateLocked(events []Event) (AppendResult, bool, error) {
	stored, fresh := -1, -1
	for i := range events {
		if _, ok := m.byID[events[i].ID]; ok {
			if stored < 0 {
				stored = i
			}
		} else if fresh < 0 {
			fresh = i
		}
	}
	switch {
	case stored < 0:
		return AppendResult{}, false, nil
	case fresh >= 0:
		return AppendResult{}, true, fmt.Errorf("%w: event %s (index %d) is already stored but event %s (index %d) is not; an append is idempotent only as a whole: retry it unchanged, or give new events new IDs",
			ErrDuplicateMismatch, events[stored].ID, stored, events[fresh].ID, fresh)
	}
	out := make([]Record, len(events))
	for i := range events {
		r := m.records.at(m.byID[events[i].ID])
		if !SameContent(&events[i], &r.Event) {
			return AppendResult{}, true, fmt.Errorf("%w: event %s (index %d) is already stored with different content (stored type %q); an event ID names one event: give a different event a new ID",
				ErrDuplicateMismatch, events[i].ID, i, r.Type)
		}
		out[i] = cloneRecord(r)
	}
	return AppendResult{Records: out, Duplicate: true}, true, nil
}

func (m *Memory) checkLeaseLocked(l Lease, now time.Time) error {
	var st LeaseState
	if cur := m.leases[l.Stream.Normalize()]; cur != nil {
		st = LeaseState{Acquired: true, NodeID: cur.nodeID, Incarnation: cur.incarnation, Epoch: cur.epoch, Released: !cur.held}
	}
	return CheckLease(l, st, m.nodeStateLocked(l.NodeID, now))
}

// nodeStateLocked returns node nodeID's session as the fence rule sees it.
func (m *Memory) nodeStateLocked(nodeID string, now time.Time) NodeState {
	n := m.nodes[nodeID]
	if n == nil {
		return NodeState{}
	}
	return NodeState{Found: true, Incarnation: n.incarnation, Closed: n.closed, Live: now.Before(n.expiresAt), ExpiresAt: n.expiresAt}
}

// checkNodeLocked reports whether incarnation inc of node nodeID is the live
// session, as a *SessionError on stream.
func (m *Memory) checkNodeLocked(stream StreamID, nodeID string, inc uint64, now time.Time) error {
	return checkNode(stream, nodeID, inc, m.nodeStateLocked(nodeID, now))
}

func (m *Memory) checkExpectLocked(partition string, expect map[Tag]uint64) error {
	if len(expect) == 0 {
		return nil
	}
	tags := make([]Tag, 0, len(expect))
	for t := range expect {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	for _, t := range tags {
		id := StreamID{Partition: partition, Tag: t}
		var actual uint64
		if s := m.streams[id]; s != nil {
			actual = uint64(len(s.records))
		}
		if err := CheckExpected(id, expect[t], actual); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) checkConditionLocked(c *AppendCondition) error {
	cur := m.queryCursorLocked(c.FailIfEventsMatch, m.firstAfterLocked(c.After), m.records.len(), false)
	for {
		idx, ok := cur.next()
		if !ok {
			return nil
		}
		r := m.records.at(idx)
		if c.FailIfEventsMatch.Matches(r) {
			return fmt.Errorf("%w: event %s (type %q) at position %s matches the condition's query and lies after position %s; read again and decide on the new state",
				ErrAppendConditionFailed, r.ID, r.Type, r.Position, c.After)
		}
	}
}
