package tagconsistency

import (
	"context"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func gateStreams(tags ...string) []journal.StreamID {
	out := make([]journal.StreamID, len(tags))
	for i, t := range tags {
		out[i] = journal.StreamID{Partition: journal.DefaultPartition, Tag: journal.NewTag("g", t)}
	}
	return out
}

// gateEntry is an enter running on its own goroutine.
type gateEntry struct {
	done  chan struct{}
	leave func()
	err   error
}

func enterAsync(ctx context.Context, g *Gate, streams []journal.StreamID) *gateEntry {
	e := &gateEntry{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.leave, e.err = g.enter(ctx, streams)
	}()
	return e
}

// admitted reports whether the entry returned, without waiting.
func (e *gateEntry) admitted() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// wait waits for the entry to return; a gate that never admits it fails the
// test after a bound far above any scheduling delay.
func (e *gateEntry) wait(t *testing.T) {
	t.Helper()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the command was never admitted")
	}
}

// waitQueued waits until n commands wait at g.
func waitQueued(t *testing.T, g *Gate, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return g.Waiting() == n }, 10*time.Second, time.Millisecond)
}

func newTestGate(t *testing.T, patience time.Duration) (*Gate, *atomic.Int64) {
	t.Helper()
	g, err := NewGate(GateConfig{Patience: patience})
	require.NoError(t, err)
	var clock atomic.Int64 // nanoseconds since the epoch of the test clock
	g.now = func() time.Time { return time.Unix(0, clock.Load()) }
	return g, &clock
}

func TestNewGateRefusesNegativeDurations(t *testing.T) {
	t.Parallel()
	_, err := NewGate(GateConfig{Patience: -time.Second})
	require.ErrorContains(t, err, "Patience is negative")
	_, err = NewGate(GateConfig{MaxWait: -time.Second})
	require.ErrorContains(t, err, "MaxWait is negative")
	g, err := NewGate(GateConfig{})
	require.NoError(t, err)
	require.Equal(t, DefaultGatePatience, g.patience)
}

func TestGateAdmitsDisjointCommandsAndQueuesOverlappingOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, _ := newTestGate(t, time.Hour)
	leaveAB, err := g.enter(ctx, gateStreams("a", "b"))
	require.NoError(t, err)
	leaveC, err := g.enter(ctx, gateStreams("c"))
	require.NoError(t, err, "a command on other streams passes at once")

	bd := enterAsync(ctx, g, gateStreams("b", "d"))
	waitQueued(t, g, 1)
	require.False(t, bd.admitted(), "b is held")
	leaveC()
	require.False(t, bd.admitted(), "leaving c frees nothing b,d needs")
	leaveAB()
	bd.wait(t)
	require.NoError(t, bd.err)
	require.Zero(t, g.Waiting())
	bd.leave()
	require.Empty(t, g.busy, "every stream is free again")
	require.Empty(t, g.queues)
}

// TestGateWaiterHoldsNothing is the gate's point: a command waiting for a
// busy stream does not keep its free streams from others.
func TestGateWaiterHoldsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, _ := newTestGate(t, time.Hour)
	leaveB, err := g.enter(ctx, gateStreams("b"))
	require.NoError(t, err)
	ab := enterAsync(ctx, g, gateStreams("a", "b"))
	waitQueued(t, g, 1)

	ac := enterAsync(ctx, g, gateStreams("a", "c"))
	ac.wait(t) // a is free: the waiter for a,b holds no part of it
	require.NoError(t, ac.err)
	require.False(t, ab.admitted())

	leaveB()
	require.False(t, ab.admitted(), "a is still held by a,c")
	ac.leave()
	ab.wait(t)
	require.NoError(t, ab.err)
	ab.leave()
}

// TestGatePatienceEndsThePassingOver: once a waiter has waited longer than
// the patience, younger commands no longer take its streams before it.
func TestGatePatienceEndsThePassingOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, clock := newTestGate(t, 50*time.Millisecond)
	leaveB, err := g.enter(ctx, gateStreams("b"))
	require.NoError(t, err)
	ab := enterAsync(ctx, g, gateStreams("a", "b"))
	waitQueued(t, g, 1)

	// Within its patience it is passed over on a.
	a1 := enterAsync(ctx, g, gateStreams("a"))
	a1.wait(t)
	a1.leave()

	clock.Add(int64(51 * time.Millisecond))
	a2 := enterAsync(ctx, g, gateStreams("a"))
	waitQueued(t, g, 2)
	require.False(t, a2.admitted(), "a is claimed by the older waiter")

	leaveB()
	ab.wait(t)
	require.NoError(t, ab.err)
	require.False(t, a2.admitted(), "a is held by a,b now")
	ab.leave()
	a2.wait(t)
	require.NoError(t, a2.err)
	a2.leave()
}

func TestGateContextEndsTheWait(t *testing.T) {
	t.Parallel()
	g, clock := newTestGate(t, 50*time.Millisecond)
	leaveB, err := g.enter(context.Background(), gateStreams("b"))
	require.NoError(t, err)

	// A waiter out of patience claims a; when its caller leaves, so does
	// its claim.
	ctx, cancel := context.WithCancel(context.Background())
	ab := enterAsync(ctx, g, gateStreams("a", "b"))
	waitQueued(t, g, 1)
	clock.Add(int64(time.Second))
	a := enterAsync(context.Background(), g, gateStreams("a"))
	waitQueued(t, g, 2)
	require.False(t, a.admitted())

	cancel()
	ab.wait(t)
	require.ErrorIs(t, ab.err, context.Canceled)
	require.Nil(t, ab.leave)
	a.wait(t)
	require.NoError(t, a.err)
	a.leave()
	leaveB()
	require.Zero(t, g.Waiting())
	require.Empty(t, g.busy)
	require.Empty(t, g.queues)
}

// TestGateExcludesUnderRace runs many commands over few streams, some of
// whose callers leave while they wait: no two admitted commands ever share a
// stream, every other command is admitted, and the gate ends empty.
func TestGateExcludesUnderRace(t *testing.T) {
	t.Parallel()
	g, err := NewGate(GateConfig{Patience: time.Millisecond})
	require.NoError(t, err)
	const streams, workers, each = 6, 16, 200
	var holders [streams]atomic.Int32
	var admitted, cancelled atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range each {
				i, j := rng.IntN(streams), rng.IntN(streams)
				set := gateStreams(fmt.Sprint(i))
				if j != i {
					set = append(set, gateStreams(fmt.Sprint(j))...)
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(8) == 0 {
					cancel() // a caller that is already gone
				}
				leave, err := g.enter(ctx, set)
				cancel()
				if err != nil {
					require.ErrorIs(t, err, context.Canceled)
					cancelled.Add(1)
					continue
				}
				admitted.Add(1)
				for _, k := range []int{i, j} {
					if holders[k].Add(1) != 1 {
						t.Errorf("stream %d admitted twice", k)
					}
					if j == i {
						break
					}
				}
				goruntime.Gosched() // let another admitted command overlap, were there one
				for _, k := range []int{i, j} {
					holders[k].Add(-1)
					if j == i {
						break
					}
				}
				leave()
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, workers*each, admitted.Load()+cancelled.Load())
	require.Positive(t, admitted.Load())
	require.Zero(t, g.Waiting())
	require.Empty(t, g.busy)
	require.Empty(t, g.queues)
}

// TestGateMaxWaitEndsTheWaitLikeAReservationTimeout: past MaxWait a waiter
// fails with the reservation timeout naming the stream that stayed busy,
// and leaves nothing behind.
func TestGateMaxWaitEndsTheWaitLikeAReservationTimeout(t *testing.T) {
	t.Parallel()
	g, err := NewGate(GateConfig{MaxWait: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()
	leaveB, err := g.enter(ctx, gateStreams("b"))
	require.NoError(t, err)
	_, err = g.enter(ctx, gateStreams("a", "b"))
	require.ErrorIs(t, err, ErrReservationTimeout)
	var te *ReservationTimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, gateStreams("b")[0], te.Stream)
	require.Equal(t, 50*time.Millisecond, te.Waited)
	require.Zero(t, g.Waiting())
	leaveB()
	require.Empty(t, g.busy)
	require.Empty(t, g.queues)
	leave, err := g.enter(ctx, gateStreams("a", "b"))
	require.NoError(t, err, "free streams pass at once")
	leave()
}

// BenchmarkGateBesideParkedWaiters measures one command entering and leaving
// the gate on free streams while n other commands wait for streams another
// command holds: the cost should not grow with n.
//
//	go test -run '^$' -bench GateBesideParkedWaiters ./tagconsistency
func BenchmarkGateBesideParkedWaiters(b *testing.B) {
	for _, n := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			g, err := NewGate(GateConfig{})
			require.NoError(b, err)
			ctx, cancel := context.WithCancel(context.Background())
			held := gateStreams("held")
			leaveHeld, err := g.enter(ctx, held)
			require.NoError(b, err)
			var parked sync.WaitGroup
			for i := range n {
				parked.Go(func() { _, _ = g.enter(ctx, append(gateStreams(fmt.Sprint("p", i)), held...)) })
			}
			require.Eventually(b, func() bool { return g.Waiting() == n }, time.Minute, time.Millisecond)
			free := gateStreams("x", "y")
			b.ResetTimer()
			for range b.N {
				leave, err := g.enter(ctx, free)
				if err != nil {
					b.Fatal(err)
				}
				leave()
			}
			b.StopTimer()
			cancel()
			parked.Wait()
			leaveHeld()
		})
	}
}
