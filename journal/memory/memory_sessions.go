package memory

import (
	"context"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
	"time"
)

// OpenNode implements Sessions. The session expires timeout after now by the
// configured clock unless renewed.
func (m *Journal) OpenNode(ctx context.Context, nodeID string, timeout time.Duration) (journal.NodeSession, error) {
	if err := backend.ValidateNodeSession(nodeID, timeout); err != nil {
		return journal.NodeSession{}, fmt.Errorf("journal: OpenNode: %w", err)
	}
	if err := m.lock(ctx); err != nil {
		return journal.NodeSession{}, err
	}
	defer m.mu.Unlock()
	n := m.nodes[nodeID]
	if n == nil {
		n = &memNode{}
		m.nodes[nodeID] = n
	}
	n.incarnation++
	n.timeout = timeout
	n.expiresAt = m.now().Add(timeout)
	n.closed = false
	// The previous incarnation's leases are now free for anyone.
	m.leasesChangedLocked()
	return journal.NodeSession{NodeID: nodeID, Incarnation: n.incarnation, Timeout: timeout, ExpiresAt: n.expiresAt}, nil
}

// nodeErrLocked reports why node is not the live session of its node ID.
func (m *Journal) nodeErrLocked(node journal.NodeSession, now time.Time) error {
	n := m.nodes[node.NodeID]
	switch {
	case n == nil:
		return fmt.Errorf("%w: node %q has no session; open one with OpenNode", journal.ErrInvalidSession, node.NodeID)
	case n.incarnation != node.Incarnation:
		return fmt.Errorf("%w (%w): node %q incarnation %d was superseded by incarnation %d; this process must stop writing", journal.ErrInvalidSession, journal.ErrNodeSuperseded, node.NodeID, node.Incarnation, n.incarnation)
	case n.closed:
		return fmt.Errorf("%w: node %q incarnation %d was closed; open a new node session", journal.ErrInvalidSession, node.NodeID, node.Incarnation)
	case !now.Before(n.expiresAt):
		return fmt.Errorf("%w: node %q incarnation %d expired at %s; open a new node session and renew it well before its timeout", journal.ErrSessionExpired, node.NodeID, node.Incarnation, n.expiresAt.Format(time.RFC3339Nano))
	}
	return nil
}

// RenewNode implements Sessions.
func (m *Journal) RenewNode(ctx context.Context, node journal.NodeSession) (journal.NodeSession, error) {
	if err := m.lock(ctx); err != nil {
		return journal.NodeSession{}, err
	}
	defer m.mu.Unlock()
	now := m.now()
	if err := m.nodeErrLocked(node, now); err != nil {
		return journal.NodeSession{}, err
	}
	n := m.nodes[node.NodeID]
	n.expiresAt = now.Add(n.timeout)
	node.Timeout = n.timeout
	node.ExpiresAt = n.expiresAt
	return node, nil
}

// CloseNode implements Sessions. Closing a session that is already closed or
// superseded is not an error; an unknown node ID is (ErrInvalidSession).
func (m *Journal) CloseNode(ctx context.Context, node journal.NodeSession) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	n := m.nodes[node.NodeID]
	if n == nil || node.Incarnation == 0 || node.Incarnation > n.incarnation {
		return fmt.Errorf("%w: CloseNode: node %q incarnation %d was never opened", journal.ErrInvalidSession, node.NodeID, node.Incarnation)
	}
	if n.incarnation == node.Incarnation {
		n.closed = true
	}
	for _, l := range m.leases {
		if l.held && l.nodeID == node.NodeID && l.incarnation == node.Incarnation {
			l.held = false
		}
	}
	m.leasesChangedLocked()
	return nil
}

func (m *Journal) leasesChangedLocked() {
	close(m.leaseChanged)
	m.leaseChanged = make(chan struct{})
}

// Acquire implements Sessions. While a live node holds the stream it waits,
// woken by releases and closed or superseded sessions and re-checking the
// holder's expiry by the configured clock every few milliseconds; after wait
// it fails with an error wrapping ErrOpenTimeout that names the holder.
func (m *Journal) Acquire(ctx context.Context, node journal.NodeSession, stream journal.StreamID, wait time.Duration) (journal.Lease, error) {
	stream = stream.Normalize()
	if stream.Tag == "" {
		return journal.Lease{}, fmt.Errorf("journal: Acquire: the stream's tag is empty; name the stream to lease")
	}
	deadline := time.Now().Add(wait)
	for {
		if err := m.lock(ctx); err != nil {
			return journal.Lease{}, err
		}
		now := m.now()
		if err := m.checkNodeLocked(stream, node.NodeID, node.Incarnation, now); err != nil {
			m.mu.Unlock()
			return journal.Lease{}, err
		}
		l := m.leases[stream]
		if l == nil {
			l = &memLease{}
			m.leases[stream] = l
		}
		self := l.nodeID == node.NodeID && l.incarnation == node.Incarnation
		if !l.held || self || m.checkNodeLocked(stream, l.nodeID, l.incarnation, now) != nil {
			l.held = true
			l.nodeID = node.NodeID
			l.incarnation = node.Incarnation
			// Epochs come from one counter for all streams, so a stream's
			// epochs only grow, also across an entry deleted by Release of
			// an empty stream: no earlier lease of it can match.
			m.epochs++
			l.epoch = m.epochs
			lease := journal.Lease{Stream: stream, NodeID: node.NodeID, Incarnation: node.Incarnation, Epoch: l.epoch}
			m.mu.Unlock()
			return lease, nil
		}
		holder, holderInc := l.nodeID, l.incarnation
		changed := m.leaseChanged
		done := m.done
		m.mu.Unlock()

		remaining := time.Until(deadline)
		if remaining <= 0 {
			return journal.Lease{}, fmt.Errorf("%w: stream %s is held by node %q incarnation %d, whose session is live; waited %s. Retry later, or raise the open timeout",
				journal.ErrOpenTimeout, stream, holder, holderInc, max(wait, 0))
		}
		timer := time.NewTimer(min(remaining, memLeasePoll))
		select {
		case <-changed:
		case <-done:
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Release implements Sessions.
func (m *Journal) Release(ctx context.Context, lease journal.Lease) error {
	stream := lease.Stream.Normalize()
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	l := m.leases[stream]
	if l != nil && l.held && l.epoch == lease.Epoch && l.nodeID == lease.NodeID && l.incarnation == lease.Incarnation {
		l.held = false
		if s := m.streams[stream]; s == nil || len(s.records) == 0 {
			// A stream without events keeps nothing (a command for an
			// account that does not exist leaves no trace). The next lease
			// starts at epoch 1 again; no old lease can pass for it, since
			// appends also check the holder's node ID and incarnation.
			delete(m.leases, stream)
		}
		m.leasesChangedLocked()
	}
	return nil
}
