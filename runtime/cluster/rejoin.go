package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/backoff"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/internal/membership"
	"github.com/scribe-es/scribe/tagconsistency"
)

// MetricRejoins is the counter of the times a member left its cluster
// (its node session was lost, or the others dropped it from their
// topology) and joined it again with a new membership.
const MetricRejoins = "scribe.cluster.rejoins"

// Bounds of the rejoin loop.
const (
	// maxRejoinBackoff caps the pause between two failed attempts to join
	// again (the port still bound, the provider unreachable).
	maxRejoinBackoff = 2 * time.Second
	// rejoinLogInterval rate-limits the warnings about failed attempts.
	rejoinLogInterval = 5 * time.Second
)

// member is a Runtime's membership in a cluster across the member's
// incarnations. It serves through one clusterNode at a time (an actor
// system, its remoting and provider, under one protoactor-go member ID).
// When that membership ends because the node session was lost (the process
// was paused or cut off from the database past the session timeout) or the
// others dropped it from their topology, the member is out: it leaves, stops
// every stream actor of the old membership, waits until the host holds a
// valid node session again, and joins with a fresh clusterNode (a new
// member ID: the others block the old one for good). While it is out every
// call fails with an error matching actors.ErrLeaseLost. Only a twin node
// ID (journal.ErrNodeSuperseded) keeps it out for good, with
// runtime.ErrNodeFenced.
type member struct {
	node membership.Node
	cfg  Config
	log  *slog.Logger

	cur atomic.Pointer[clusterNode] // the membership serving now
	// out is nil while cur serves; otherwise the error every call fails with.
	out     atomic.Pointer[error]
	fenced  chan struct{} // closed when the member is out for good
	rejoins metric.Int64Counter

	ctx      context.Context // ends with Shutdown: cancels a join in progress
	cancel   context.CancelFunc
	done     chan struct{} // closed when supervise returned
	stopOnce sync.Once
}

// newMember joins the cluster for the first time and starts watching the
// membership.
func newMember(ctx context.Context, node membership.Node, cfg Config) (*member, error) {
	c, err := startCluster(ctx, node, cfg)
	if err != nil {
		return nil, err
	}
	mp := node.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	rejoins, err := mp.Meter(otelx.InstrumentationName).Int64Counter(MetricRejoins,
		metric.WithDescription("Times a cluster member left its cluster (node session lost, or dropped from the topology) and joined it again."),
		metric.WithUnit("{rejoin}"))
	if err != nil {
		c.shutdown(actors.ErrShutdown)
		return nil, fmt.Errorf("cluster: creating metric %s: %w", MetricRejoins, err)
	}
	m := &member{
		node:    node,
		cfg:     c.cfg,
		log:     c.log,
		fenced:  make(chan struct{}),
		rejoins: rejoins,
		done:    make(chan struct{}),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.cur.Store(c)
	go m.supervise()
	return m, nil
}

// supervise waits for the current membership to end and replaces it, until
// Shutdown or a twin node ID.
func (m *member) supervise() {
	defer close(m.done)
	for {
		c := m.cur.Load()
		select {
		case <-m.ctx.Done():
			return
		case <-c.fenced:
		}
		reason := c.fenceError()
		if errors.Is(reason, journal.ErrNodeSuperseded) {
			m.fenceForGood(c, reason)
			return
		}
		left := time.Now()
		out := fmt.Errorf("%w: cluster member %s (node %q) is rejoining cluster %q: %w", actors.ErrLeaseLost, c.self(), m.node.NodeID, m.cfg.Name, reason)
		m.out.Store(&out)
		m.log.Warn("member left the cluster; rejoining", "cluster", m.cfg.Name, "address", c.self(), "node", m.node.NodeID,
			"incarnation", c.generation, "reason", reason)
		c.shutdown(fmt.Errorf("%w: this member left cluster %q while the request it had sent to another member was in flight; whether it took effect is unknown (execute it again with the same idempotency key to find out): %w",
			actors.ErrLeaseLost, m.cfg.Name, journal.ErrOutcomeUnknown))
		next := m.rejoin(c)
		if next == nil {
			return
		}
		m.cur.Store(next)
		m.out.Store(nil)
		m.rejoins.Add(context.Background(), 1)
		m.log.Info("member rejoined the cluster", "cluster", m.cfg.Name, "address", next.self(), "node", m.node.NodeID,
			"incarnation", next.generation, "previous_incarnation", c.generation, "out_for", time.Since(left).Round(time.Millisecond))
	}
}

// fenceForGood keeps the member out: another live process runs with its
// node ID, and rejoining would take that process's leases.
func (m *member) fenceForGood(c *clusterNode, reason error) {
	err := fmt.Errorf("%w; this member left cluster %q for good and will not rejoin: give every process its own node ID, then restart this one", reason, m.cfg.Name)
	m.out.Store(&err)
	close(m.fenced)
	m.log.Error("member fenced for good: another live process runs with its node ID", "cluster", m.cfg.Name, "address", c.self(), "node", m.node.NodeID, "reason", reason)
	c.shutdown(err)
}

// rejoin discards the stream actors of the ended membership, waits for a
// valid node session and joins the cluster again, retrying with a back-off.
// It returns nil after Shutdown or when a twin node ID appeared.
func (m *member) rejoin(old *clusterNode) *clusterNode {
	m.discardActors()
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: maxRejoinBackoff, Jitter: 0.5}
	var failures int
	var logged time.Time
	for {
		if m.ctx.Err() != nil {
			return nil
		}
		err := m.node.Host.Ready()
		switch {
		case errors.Is(err, journal.ErrNodeSuperseded):
			m.fenceForGood(old, fmt.Errorf("%w: %w", runtime.ErrNodeFenced, err))
			return nil
		case err != nil:
			// The host is reopening its node session (the database may
			// still be away): join only with a session known valid.
			if !m.pause(fenceCheckInterval) {
				return nil
			}
			continue
		}
		// Actors of the old membership may have started after the first
		// pass (a request that was already past the checks): stop them too.
		m.discardActors()
		next, err := startCluster(m.ctx, m.node, m.cfg)
		if err == nil {
			return next
		}
		failures++
		if now := time.Now(); now.Sub(logged) >= rejoinLogInterval {
			logged = now
			m.log.Warn("rejoining the cluster failed; retrying", "cluster", m.cfg.Name, "node", m.node.NodeID, "failures", failures, "error", err)
		}
		if !m.pause(retry.Next()) {
			return nil
		}
	}
}

// discardActors stops every stream actor of the host, so the next
// membership serves only from actors that recover from the journal under
// the current incarnation. It does not wait for them: the host never
// delivers to an actor that is stopping, a request for its stream waits
// until it is gone and a new one has recovered.
func (m *member) discardActors() {
	for _, s := range m.node.Host.Streams() {
		m.node.Host.Passivate(s)
	}
}

// pause waits d; false when the member is shutting down.
func (m *member) pause(d time.Duration) bool { return backoff.Sleep(m.ctx, d) }

// serving returns the membership serving now, or the error calls fail with
// while the member is out.
func (m *member) serving() (*clusterNode, error) {
	if p := m.out.Load(); p != nil {
		return nil, *p
	}
	return m.cur.Load(), nil
}

// Execute implements membership.Member: it runs cmd on the member hosting
// stream.
func (m *member) Execute(ctx context.Context, stream journal.StreamID, cmd actors.Command) (actors.Result, error) {
	c, err := m.serving()
	if err != nil {
		return actors.Result{}, err
	}
	return c.execute(ctx, stream, cmd)
}

// Owners implements membership.Member (see clusterOwners).
func (m *member) Owners() tagconsistency.TagOwners { return memberOwners{m: m} }

// FenceError implements membership.Member.
func (m *member) FenceError() error {
	c, err := m.serving()
	if err != nil {
		return err
	}
	return c.fenceError()
}

// Fenced implements membership.Member: closed only when the member is out
// for good (a twin node ID).
func (m *member) Fenced() <-chan struct{} { return m.fenced }

// Address implements membership.Member.
func (m *member) Address() string { return m.cur.Load().self() }

// Members implements membership.Member.
func (m *member) Members() []string { return m.cur.Load().memberAddrs() }

// Owner implements membership.Member.
func (m *member) Owner(stream journal.StreamID) string { return m.cur.Load().owner(stream.String()) }

// Shutdown implements membership.Member: it stops a rejoin in progress and
// leaves the cluster.
func (m *member) Shutdown() {
	m.stopOnce.Do(func() {
		m.cancel()
		<-m.done
		m.cur.Load().shutdown(actors.ErrShutdown)
	})
}

// memberOwners reserves DCB tags through the membership serving now; a
// reservation's Grantor ends it through the membership that made it.
type memberOwners struct{ m *member }

func (o memberOwners) Reserve(ctx context.Context, stream journal.StreamID) (*tagconsistency.Reservation, error) {
	c, err := o.m.serving()
	if err != nil {
		return nil, err
	}
	return clusterOwners{c: c}.Reserve(ctx, stream)
}
