package actors_test

import (
	"context"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

// gated wraps the memory journal: ReadStream and Append calls wait at a gate
// the test opens one call at a time, and the wrapper counts calls in flight.
type gated struct {
	*journal.Memory
	mu          sync.Mutex
	gateReads   bool
	gateAppends bool
	release     chan struct{}
	inflight    int
	maxInflight int
	appending   int
}

func newGated(mem *journal.Memory) *gated {
	return &gated{Memory: mem, release: make(chan struct{})}
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
		return g.Memory.ReadStream(ctx, s, from, limit)
	}
	return func(yield func(journal.Record, error) bool) {
		g.enter()
		defer g.leave()
		<-g.release
		for r, err := range g.Memory.ReadStream(ctx, s, from, limit) {
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
	}
	g.mu.Unlock()
	if gate {
		<-g.release
	}
	return g.Memory.Append(ctx, events, opts)
}

func TestRecoveryConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture()
	g := newGated(f.mem)
	g.gateReads = true
	h := f.host(t, func(c *actors.Config) { c.Journal = g; c.RecoveryConcurrency = 2; c.Snapshots = nil })
	const streams = 8
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
