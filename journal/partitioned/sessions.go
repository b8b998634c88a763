package partitioned

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// nodeKey identifies a node session the router handed out.
type nodeKey struct {
	nodeID      string
	incarnation uint64
}

// nodeTable holds, for each node session the router handed out, the
// member sessions it stands for (indexed like Router.order).
type nodeTable struct {
	mu   sync.Mutex
	sets map[nodeKey][]journal.NodeSession
}

func (t *nodeTable) init() { t.sets = make(map[nodeKey][]journal.NodeSession) }

func (t *nodeTable) get(n journal.NodeSession) ([]journal.NodeSession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sets[nodeKey{n.NodeID, n.Incarnation}]
	return s, ok
}

// combined is the node session the router hands out for one member session
// per member: the first member's incarnation (it increases with every
// OpenNode, as each member's does) and the earliest expiry.
func combined(nodeID string, timeout time.Duration, set []journal.NodeSession) journal.NodeSession {
	out := journal.NodeSession{NodeID: nodeID, Incarnation: set[0].Incarnation, Timeout: timeout, ExpiresAt: set[0].ExpiresAt}
	for _, s := range set[1:] {
		if s.ExpiresAt.Before(out.ExpiresAt) {
			out.ExpiresAt = s.ExpiresAt
		}
	}
	return out
}

func (r *Router) unknownNode(n journal.NodeSession) error {
	r.nodes.mu.Lock()
	newer := uint64(0)
	for k := range r.nodes.sets {
		if k.nodeID == n.NodeID && k.incarnation > n.Incarnation {
			newer = max(newer, k.incarnation)
		}
	}
	r.nodes.mu.Unlock()
	if newer > 0 {
		return fmt.Errorf("%w (%w): partitioned: node %q incarnation %d was superseded by incarnation %d; this process must stop writing", journal.ErrInvalidSession, journal.ErrNodeSuperseded, n.NodeID, n.Incarnation, newer)
	}
	return fmt.Errorf("%w: partitioned: node %q incarnation %d was not opened by this router or was closed; open a node session with OpenNode", journal.ErrInvalidSession, n.NodeID, n.Incarnation)
}

// OpenNode opens a node session on every member (a new incarnation in each)
// and returns one session standing for all of them. When a member fails,
// the sessions already opened are closed and the error names the member.
func (r *Router) OpenNode(ctx context.Context, nodeID string, timeout time.Duration) (journal.NodeSession, error) {
	set := make([]journal.NodeSession, len(r.order))
	for i, m := range r.order {
		s, err := m.Sessions.OpenNode(ctx, nodeID, timeout)
		if err != nil {
			for j := range i {
				_ = r.order[j].Sessions.CloseNode(context.WithoutCancel(ctx), set[j])
			}
			return journal.NodeSession{}, fmt.Errorf("partitioned: opening node %q on member %q: %w", nodeID, m.Name, err)
		}
		set[i] = s
	}
	n := combined(nodeID, timeout, set)
	r.nodes.mu.Lock()
	// Superseded incarnations stay known (their RenewNode then fails with
	// the members' ErrNodeSuperseded) but only the one before this: older
	// ones are answered by unknownNode, superseded too.
	prev := uint64(0)
	for k := range r.nodes.sets {
		if k.nodeID == nodeID && k.incarnation < n.Incarnation {
			prev = max(prev, k.incarnation)
		}
	}
	for k := range r.nodes.sets {
		if k.nodeID == nodeID && k.incarnation < prev {
			delete(r.nodes.sets, k)
		}
	}
	r.nodes.sets[nodeKey{nodeID, n.Incarnation}] = set
	r.nodes.mu.Unlock()
	return n, nil
}

// RenewNode renews the node's session on every member. Each member renewed
// stays renewed; the first failure is returned (naming the member), so a
// session error of one member (expired, superseded) makes the caller reopen
// the node on all of them.
func (r *Router) RenewNode(ctx context.Context, node journal.NodeSession) (journal.NodeSession, error) {
	set, ok := r.nodes.get(node)
	if !ok {
		return journal.NodeSession{}, r.unknownNode(node)
	}
	next := make([]journal.NodeSession, len(set))
	var failure error
	for i, m := range r.order {
		s, err := m.Sessions.RenewNode(ctx, set[i])
		if err != nil {
			next[i] = set[i]
			if failure == nil {
				failure = fmt.Errorf("partitioned: renewing node %q on member %q: %w", node.NodeID, m.Name, err)
			}
			continue
		}
		next[i] = s
	}
	key := nodeKey{node.NodeID, node.Incarnation}
	r.nodes.mu.Lock()
	if _, still := r.nodes.sets[key]; still {
		r.nodes.sets[key] = next
	}
	r.nodes.mu.Unlock()
	if failure != nil {
		return journal.NodeSession{}, failure
	}
	return combined(node.NodeID, node.Timeout, next), nil
}

// CloseNode closes the node's session on every member (releasing its
// leases there); it returns the members' errors joined.
func (r *Router) CloseNode(ctx context.Context, node journal.NodeSession) error {
	key := nodeKey{node.NodeID, node.Incarnation}
	r.nodes.mu.Lock()
	set, ok := r.nodes.sets[key]
	delete(r.nodes.sets, key)
	r.nodes.mu.Unlock()
	if !ok {
		return r.unknownNode(node)
	}
	var errs []error
	for i, m := range r.order {
		if err := m.Sessions.CloseNode(ctx, set[i]); err != nil {
			errs = append(errs, fmt.Errorf("partitioned: closing node %q on member %q: %w", node.NodeID, m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Acquire takes the stream's lease in its partition's member, under the
// node's session there. The lease is that member's. When the member answers
// that the partition moved (journal.ErrPartitionMoved) to a member of this
// router (PartitionMoveError.To is its Name), the router maps the partition
// to that member from then on and acquires there: this is how a move
// reaches a node whose configuration still names the old member. It is also
// how a node whose map names a database the partition is moving back into
// finds it meanwhile: until the move's switch, that database answers with
// ErrPartitionMoved naming the member that still serves the partition.
func (r *Router) Acquire(ctx context.Context, node journal.NodeSession, stream journal.StreamID, wait time.Duration) (journal.Lease, error) {
	set, ok := r.nodes.get(node)
	if !ok {
		return journal.Lease{}, r.unknownNode(node)
	}
	for range 2 {
		m, err := r.route(stream.Partition)
		if err != nil {
			return journal.Lease{}, err
		}
		lease, err := m.Sessions.Acquire(ctx, set[m.index], stream, wait)
		if err == nil || !r.follow(stream.Partition, m, err) {
			return lease, err
		}
	}
	return journal.Lease{}, fmt.Errorf("%w: partitioned: partition %q moved twice while acquiring %s; retry", journal.ErrUnavailable, partitionName(stream.Partition), stream)
}

// Release gives the lease up in its stream's partition's member.
func (r *Router) Release(ctx context.Context, lease journal.Lease) error {
	m, err := r.route(lease.Stream.Partition)
	if err != nil {
		return err
	}
	return m.Sessions.Release(ctx, lease)
}

// follow reports whether err says that partition moved from member m to
// another member of this router, after mapping the partition there (unless
// the map changed meanwhile). A move to a database this router does not
// know is not followed: the error then names it, and the map must be fixed.
func (r *Router) follow(partition string, m *member, err error) bool {
	var moved *journal.PartitionMoveError
	if !errors.As(err, &moved) || !moved.Moved {
		return false
	}
	to, known := r.members[moved.To]
	if !known || to == m {
		return false
	}
	p := partitionName(partition)
	r.mu.Lock()
	if cur, ok := r.routes[p]; !ok || cur == m {
		r.routes[p] = to
	}
	r.mu.Unlock()
	return true
}
