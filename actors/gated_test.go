package actors_test

import (
	"context"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// gated wraps the memory journal: ReadStream and Append calls wait at a gate
// the test opens one call at a time, and the wrapper counts calls in flight.
type gated struct {
	*memory.Journal
	mu          sync.Mutex
	gateReads   bool
	gateAppends bool
	release     chan struct{}
	inflight    int
	maxInflight int
	appending   int
	sizes       []int // events per gated Append, in call order
	failNext    error // the next gated Append returns it, writing nothing
	openOnce    sync.Once
}

// openGate lets every call through from now on (idempotent).
func (g *gated) openGate() { g.openOnce.Do(func() { close(g.release) }) }

func newGated(mem *memory.Journal) *gated {
	return &gated{Journal: mem, release: make(chan struct{})}
}

func (g *gated) enter() {
	g.mu.Lock()
	g.inflight++
	g.maxInflight = max(g.maxInflight, g.inflight)
	g.mu.Unlock()
}

func (g *gated) leave() {
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
}

func (g *gated) counts() (inflight, maxInflight, appending int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inflight, g.maxInflight, g.appending
}

func (g *gated) ReadStream(ctx context.Context, s journal.StreamID, from uint64, limit int) iter.Seq2[journal.Record, error] {
	g.mu.Lock()
	gate := g.gateReads
	g.mu.Unlock()
	if !gate {
		return g.Journal.ReadStream(ctx, s, from, limit)
	}
	return func(yield func(journal.Record, error) bool) {
		g.enter()
		defer g.leave()
		<-g.release
		for r, err := range g.Journal.ReadStream(ctx, s, from, limit) {
			if !yield(r, err) {
				return
			}
		}
	}
}

func (g *gated) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	g.mu.Lock()
	gate := g.gateAppends
	if gate {
		g.appending++
		g.sizes = append(g.sizes, len(events))
	}
	fail := g.failNext
	if gate {
		g.failNext = nil
	}
	g.mu.Unlock()
	if gate {
		select {
		case <-g.release:
		case <-ctx.Done():
			return journal.AppendResult{}, ctx.Err()
		}
		if fail != nil {
			return journal.AppendResult{}, fail
		}
	}
	return g.Journal.Append(ctx, events, opts)
}

func TestRecoveryConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture()
	const streams = 8
	// Streams with events: a stream without any is not replayed (ghost.go).
	first := f.host(t)
	for i := range streams {
		exec(t, first, stream(string(rune('a'+i))), add{1})
	}
	require.NoError(t, first.Shutdown(context.Background()))
	g := newGated(f.mem)
	g.gateReads = true
	h := f.host(t, func(c *actors.Config) { c.Journal = g; c.RecoveryConcurrency = 2; c.Snapshots = nil })
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			_, err := h.Execute(context.Background(), stream(string(rune('a'+i))), actors.Command{Payload: noop{}})
			if err != nil {
				t.Error(err)
			}
		})
	}
	for released := 0; released < streams; released++ {
		want := min(2, streams-released)
		require.Eventually(t, func() bool { n, _, _ := g.counts(); return n == want }, 5*time.Second, time.Millisecond)
		g.release <- struct{}{}
	}
	wg.Wait()
	_, most, _ := g.counts()
	require.Equal(t, 2, most, "at most RecoveryConcurrency streams replay at once")
}

func TestContextEndingDuringAppendIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture()
	g := newGated(f.mem)
	h := f.host(t, func(c *actors.Config) { c.Journal = g })
	s := stream("unknown")
	exec(t, h, s, add{1})
	g.mu.Lock()
	g.gateAppends = true
	g.mu.Unlock()

	cmd := actors.Command{Payload: add{5}, Metadata: journal.Metadata{IdempotencyKey: "retry-me"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.Execute(ctx, s, cmd)
		done <- err
	}()
	require.Eventually(t, func() bool { _, _, n := g.counts(); return n == 1 }, 5*time.Second, time.Millisecond)
	cancel() // the append has started: the caller cannot know its outcome
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, journal.ErrOutcomeUnknown)

	g.release <- struct{}{} // the append completes after all
	g.mu.Lock()
	g.gateAppends = false
	g.mu.Unlock()
	res, err := h.Execute(context.Background(), s, cmd)
	require.NoError(t, err)
	require.True(t, res.Duplicate, "the idempotency key tells the caller it was stored")
	require.Equal(t, 6, exec(t, h, s, noop{}).State)
}

// After a batch of several commands, the actor waits for the callers it just
// answered to send their next commands, so the writers do not split into two
// halves that alternate; after a batch of one it does not wait.
func TestCompletionLingerJoinsTheAnsweredCallersNextCommands(t *testing.T) {
	t.Parallel()
	f := newFixture()
	g := newGated(f.mem)
	h := f.host(t, func(c *actors.Config) { c.Journal = g })
	h.SetCompletionLinger(time.Hour) // only the callers' return ends a linger
	s := stream("linger")
	exec(t, h, s, add{1})
	g.mu.Lock()
	g.gateAppends = true
	g.mu.Unlock()
	appending := func(n int) func() bool { return func() bool { _, _, a := g.counts(); return a == n } }
	run := func(times int) <-chan error {
		done := make(chan error, 1)
		go func() {
			var err error
			for range times {
				if _, err = h.Execute(context.Background(), s, actors.Command{Payload: add{1}}); err != nil {
					break
				}
			}
			done <- err
		}()
		return done
	}

	a := run(1) // batch 1: A alone, held
	require.Eventually(t, appending(1), 5*time.Second, time.Millisecond)
	b, c := run(2), run(2) // B and C queue behind it, and will come back once
	require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)
	g.release <- struct{}{}
	require.NoError(t, <-a)
	// A batch of one sets no linger: B and C go at once (batch 2), held.
	require.Eventually(t, appending(2), 5*time.Second, time.Millisecond)
	d := run(1) // D queues behind batch 2
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	g.release <- struct{}{}
	// Batch 2 answered B and C: the actor waits for their next commands
	// and decides them with D as one batch.
	require.Eventually(t, appending(3), 5*time.Second, time.Millisecond)
	g.mu.Lock()
	sizes := slices.Clone(g.sizes)
	g.mu.Unlock()
	close(g.release) // every append from here on passes the gate
	require.Equal(t, []int{1, 2, 3}, sizes, "events per append")
	for _, done := range []<-chan error{b, c, d} {
		require.NoError(t, <-done)
	}
}
