package memory

import (
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
	"slices"
	"time"
)

// checkLocked applies the append's fence: its leases as of now, its expected
// stream versions and its condition.
func (m *Journal) checkLocked(partition string, opts journal.AppendOptions, now time.Time) error {
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
func (m *Journal) duplicateLocked(events []journal.Event) (journal.AppendResult, bool, error) {
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
		return journal.AppendResult{}, false, nil
	case fresh >= 0:
		return journal.AppendResult{}, true, fmt.Errorf("%w: event %s (index %d) is already stored but event %s (index %d) is not; an append is idempotent only as a whole: retry it unchanged, or give new events new IDs",
			journal.ErrDuplicateMismatch, events[stored].ID, stored, events[fresh].ID, fresh)
	}
	out := make([]journal.Record, len(events))
	for i := range events {
		r := m.records.at(m.byID[events[i].ID])
		if !backend.SameContent(&events[i], &r.Event) {
			return journal.AppendResult{}, true, fmt.Errorf("%w: event %s (index %d) is already stored with different content (stored type %q); an event ID names one event: give a different event a new ID",
				journal.ErrDuplicateMismatch, events[i].ID, i, r.Type)
		}
		out[i] = cloneRecord(r)
	}
	return journal.AppendResult{Records: out, Duplicate: true}, true, nil
}

func (m *Journal) checkLeaseLocked(l journal.Lease, now time.Time) error {
	var st backend.LeaseState
	if cur := m.leases[l.Stream.Normalize()]; cur != nil {
		st = backend.LeaseState{Acquired: true, NodeID: cur.nodeID, Incarnation: cur.incarnation, Epoch: cur.epoch, Released: !cur.held}
	}
	return backend.CheckLease(l, st, m.nodeStateLocked(l.NodeID, now))
}

// nodeStateLocked returns node nodeID's session as the fence rule sees it.
func (m *Journal) nodeStateLocked(nodeID string, now time.Time) backend.NodeState {
	n := m.nodes[nodeID]
	if n == nil {
		return backend.NodeState{}
	}
	return backend.NodeState{Found: true, Incarnation: n.incarnation, Closed: n.closed, Live: now.Before(n.expiresAt), ExpiresAt: n.expiresAt}
}

// checkNodeLocked reports whether incarnation inc of node nodeID is the live
// session, as a *SessionError on stream.
func (m *Journal) checkNodeLocked(stream journal.StreamID, nodeID string, inc uint64, now time.Time) error {
	return backend.CheckNode(stream, nodeID, inc, m.nodeStateLocked(nodeID, now))
}

func (m *Journal) checkExpectLocked(partition string, expect map[journal.Tag]uint64) error {
	if len(expect) == 0 {
		return nil
	}
	tags := make([]journal.Tag, 0, len(expect))
	for t := range expect {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	for _, t := range tags {
		id := journal.StreamID{Partition: partition, Tag: t}
		var actual uint64
		if s := m.streams[id]; s != nil {
			actual = uint64(len(s.records))
		}
		if err := backend.CheckExpected(id, expect[t], actual); err != nil {
			return err
		}
	}
	return nil
}

func (m *Journal) checkConditionLocked(c *journal.AppendCondition) error {
	cur := m.queryCursorLocked(c.FailIfEventsMatch, m.firstAfterLocked(c.After), m.records.len(), false)
	for {
		idx, ok := cur.next()
		if !ok {
			return nil
		}
		r := m.records.at(idx)
		if c.FailIfEventsMatch.Matches(r) {
			return fmt.Errorf("%w: event %s (type %q) at position %s matches the condition's query and lies after position %s; read again and decide on the new state",
				journal.ErrAppendConditionFailed, r.ID, r.Type, r.Position, c.After)
		}
	}
}
