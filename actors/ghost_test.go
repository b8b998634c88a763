package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// countingSessions counts the stream leases a host acquires.
type countingSessions struct {
	*memory.Journal
	acquires atomic.Int32
}

func (c *countingSessions) Acquire(ctx context.Context, node journal.NodeSession, s journal.StreamID, wait time.Duration) (journal.Lease, error) {
	c.acquires.Add(1)
	return c.Journal.Acquire(ctx, node, s, wait)
}

// probeGate holds the first gated calls of TagSummary (an actor's read of
// its stream's version without a lease) until the test releases each: it
// reports the call's number on entered, then waits for release.
type probeGate struct {
	*memory.Journal
	gated   int32
	calls   atomic.Int32
	entered chan int32
	release chan struct{}
}

func newProbeGate(mem *memory.Journal, gated int32) *probeGate {
	return &probeGate{Journal: mem, gated: gated, entered: make(chan int32, gated), release: make(chan struct{})}
}

func (p *probeGate) TagSummary(ctx context.Context, s journal.StreamID) (journal.TagSummary, error) {
	if n := p.calls.Add(1); n <= p.gated {
		p.entered <- n
		select {
		case <-p.release:
		case <-ctx.Done():
			return journal.TagSummary{}, ctx.Err()
		}
	}
	return p.Journal.TagSummary(ctx, s)
}

func (p *probeGate) waitEntered(t *testing.T, want int32) {
	t.Helper()
	select {
	case n := <-p.entered:
		require.Equal(t, want, n)
	case <-time.After(5 * time.Second):
		t.Fatalf("read %d of the stream's version did not start", want)
	}
}

func awaitResult(t *testing.T, ch <-chan execOutcome) execOutcome {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Execute did not return")
		return execOutcome{}
	}
}

func goExec(h *actors.Host, s journal.StreamID, cmd any) <-chan execOutcome {
	return executeAsync(h, s, actors.Command{Payload: cmd})
}

// Commands for streams without events that append nothing take no lease and
// leave no actor behind: the actor is gone when Execute returns.
func TestUnknownStreamsTakeNoLeaseAndKeepNoActor(t *testing.T) {
	t.Parallel()
	f := newFixture()
	sess := &countingSessions{Journal: f.mem}
	h := f.host(t, func(c *actors.Config) { c.Sessions = sess })
	const n = 500
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := stream(fmt.Sprintf("never-%d", i))
			var cmd any = noop{}
			if i%2 == 1 {
				cmd = addUpTo{N: 5, Limit: 1} // a domain error: appends nothing
			}
			res, err := h.Execute(context.Background(), s, actors.Command{Payload: cmd})
			if i%2 == 1 {
				if !errors.Is(err, errTooBig) {
					t.Errorf("stream %s: got %v, want errTooBig", s, err)
				}
				return
			}
			if err != nil || res.Version != 0 || res.State != 0 {
				t.Errorf("stream %s: got %+v, %v; want version 0, state 0", s, res, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 0, h.ActiveActors(), "no actor outlives the commands of streams without events")
	require.Equal(t, int32(0), sess.acquires.Load(), "no lease for streams without events")
}

// A command that creates the stream, sent while a ghost actor reads the
// stream's version, takes the lease and appends.
func TestCreateQueuedBehindGhostTakesTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture()
	sess := &countingSessions{Journal: f.mem}
	gate := newProbeGate(f.mem, 1)
	h := f.host(t, func(c *actors.Config) { c.Sessions = sess; c.Journal = gate })
	s := stream("created")
	get := goExec(h, s, noop{})
	gate.waitEntered(t, 1)
	create := goExec(h, s, add{5})
	require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)
	close(gate.release)

	r := awaitResult(t, get)
	require.NoError(t, r.err)
	require.Equal(t, uint64(0), r.res.Version, "the read sent before the stream was created answers version 0")
	r = awaitResult(t, create)
	require.NoError(t, r.err)
	require.Equal(t, uint64(1), r.res.Version)
	require.Equal(t, 5, r.res.State)
	require.Equal(t, int32(1), sess.acquires.Load(), "the command that appends takes the lease")

	// The stream has its event and is served as any stream with events.
	require.Equal(t, 7, exec(t, h, s, add{2}).State)
	sum, err := f.mem.TagSummary(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, uint64(2), sum.Version)
}

// A command that creates the stream while a ghost actor of it stops (it no
// longer takes requests) waits for it and starts a fresh actor that takes
// the lease.
func TestCreateWhileGhostStopsTakesTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture()
	sess := &countingSessions{Journal: f.mem}
	gate := newProbeGate(f.mem, 2)
	h := f.host(t, func(c *actors.Config) { c.Sessions = sess; c.Journal = gate })
	s := stream("stopping")
	first := goExec(h, s, noop{})
	gate.waitEntered(t, 1)
	second := goExec(h, s, noop{}) // sent after the first read began
	require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)
	gate.release <- struct{}{}
	// The second command needs a read of its own; meanwhile the ghost takes
	// no new requests: it is stopping.
	gate.waitEntered(t, 2)
	require.Equal(t, 1, h.ActiveActors())
	require.Empty(t, h.Streams(), "the ghost is stopping")
	create := goExec(h, s, add{3})
	gate.release <- struct{}{}

	for _, ch := range []<-chan execOutcome{first, second} {
		r := awaitResult(t, ch)
		require.NoError(t, r.err)
		require.Equal(t, uint64(0), r.res.Version)
	}
	r := awaitResult(t, create)
	require.NoError(t, r.err)
	require.Equal(t, uint64(1), r.res.Version)
	require.Equal(t, 3, r.res.State)
	require.Equal(t, int32(1), sess.acquires.Load())
}

// A stream that gets its first event from another node between two requests
// is never answered from the emptiness seen by the first.
func TestGhostNeverHidesAnotherNodesWrite(t *testing.T) {
	t.Parallel()
	f := newFixture()
	short := func(c *actors.Config) { c.OpenTimeout = 100 * time.Millisecond }
	a := f.host(t, short)
	b := f.host(t, short, func(c *actors.Config) { c.NodeID = "node-b" })
	s := stream("elsewhere")
	require.Equal(t, uint64(0), exec(t, a, s, noop{}).Version)
	// Node a holds no lease, so node b writes at once.
	require.Equal(t, uint64(1), exec(t, b, s, add{4}).Version)
	require.True(t, b.Passivate(s))
	require.Eventually(t, func() bool { return b.ActiveActors() == 0 }, 5*time.Second, time.Millisecond)
	res := exec(t, a, s, noop{})
	require.Equal(t, uint64(1), res.Version)
	require.Equal(t, 4, res.State)
}

// A reservation on a stream without events still takes the lease.
func TestReserveOnEmptyStreamTakesTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture()
	sess := &countingSessions{Journal: f.mem}
	h := f.host(t, func(c *actors.Config) { c.Sessions = sess })
	s := stream("reserved")
	res, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, uint64(0), res.Version)
	require.Equal(t, s, res.Lease.Stream)
	require.NoError(t, res.Grantor.Cancel(context.Background(), nil))
	require.Equal(t, int32(1), sess.acquires.Load())
}
