package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

// queueDelayFixture starts a host on a gated journal (MaxBatch 1, so the
// stream appends one command within any target: a shedding stream admits one
// waiting command), with a queue-delay clock the test skews, and one event on
// stream s; every append from then on waits at the gate.
func queueDelayFixture(t *testing.T, name string, mutate func(*actors.Config)) (*actors.Host, *gated, journal.StreamID, func(time.Duration)) {
	t.Helper()
	f := newFixture()
	g := newGated(f.mem)
	h := f.host(t, func(c *actors.Config) {
		c.Journal = g
		c.MaxBatch = 1
		c.QueueDelayTarget = time.Second // far above any real wait here: only the skewed clock exceeds it
		c.QueueDelayInterval = 10 * time.Second
		if mutate != nil {
			mutate(c)
		}
	})
	skew := h.SkewQueueDelayClock()
	h.SetCompletionLinger(time.Nanosecond)
	s := stream(name)
	for range 3 { // enough appends for the stream to estimate their cost
		exec(t, h, s, add{1})
	}
	g.mu.Lock()
	g.gateAppends = true
	g.mu.Unlock()
	t.Cleanup(g.openGate)
	return h, g, s, skew
}

// standingQueue drives the stream into a standing queue: every batch sent
// for longer than the interval had a command that waited far beyond the
// target (the clock is skewed hours ahead while they wait). It returns with
// the append of the last of those batches held at the gate and nothing
// queued, and the outcomes of the three commands it executed. With giveUp,
// a fourth caller gives up waiting meanwhile.
func standingQueue(t *testing.T, h *actors.Host, g *gated, s journal.StreamID, skew func(time.Duration), giveUp bool) []<-chan execOutcome {
	t.Helper()
	a := executeAsync(h, s, actors.Command{Payload: add{1}})
	require.Eventually(t, appendsStarted(g, 1), 5*time.Second, time.Millisecond)
	b1 := executeAsync(h, s, actors.Command{Payload: add{1}})
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	b2 := executeAsync(h, s, actors.Command{Payload: add{1}})
	require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)
	skew(time.Hour) // b1 and b2 have now waited an hour
	g.release <- struct{}{}
	require.Eventually(t, appendsStarted(g, 2), 5*time.Second, time.Millisecond) // b1 sent: above the target
	if giveUp {
		// A caller gives up waiting: the evidence that the waits are too
		// long for the callers, without which nothing is shed.
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() { _, err := h.Execute(ctx, s, actors.Command{Payload: add{100}}); gone <- err }()
		require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, recv(t, gone, "the abandoned command's answer"), context.Canceled)
		require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	}
	skew(2 * time.Hour) // a whole interval later
	g.release <- struct{}{}
	require.Eventually(t, appendsStarted(g, 3), 5*time.Second, time.Millisecond) // b2 sent: still above
	return []<-chan execOutcome{a, b1, b2}
}

// After the oldest command of every batch waited longer than the target for
// a whole interval while a caller gave up waiting, the stream refuses new commands at once with
// ErrOverloaded, without deciding them, beyond those it appends within the
// target; once a batch's oldest command waited less than the target with
// nothing refused for an interval, it accepts every command again.
func TestQueueDelayShedsNewCommandsUntilTheQueueDrains(t *testing.T) {
	t.Parallel()
	h, g, s, skew := queueDelayFixture(t, "codel", nil)
	done := standingQueue(t, h, g, s, skew, true)
	shedding, at := h.Shedding(s)
	require.True(t, shedding, "a standing queue for a whole interval makes the stream shed")
	require.Equal(t, 1, at, "it admits as many waiting commands as it appends within the target (MaxBatch 1)")

	c1 := executeAsync(h, s, actors.Command{Payload: add{1}}) // admitted: nothing waits
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	for range 3 {
		// Refused while the append in flight is still held at the gate:
		// at once, and never decided (add{100} would show in the state).
		// (A command the stream wrongly queued would wait at the gate:
		// its context ends the wait and the test fails.)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := h.Execute(ctx, s, actors.Command{Payload: add{100}})
		cancel()
		require.ErrorIs(t, err, actors.ErrOverloaded)
		require.Contains(t, err.Error(), "QueueDelayTarget")
	}
	_, _, appending := g.counts()
	require.Equal(t, 3, appending, "the refusals came back while the append was held")
	require.Equal(t, 1, h.Pending(s), "refused commands are not queued")

	skew(-time.Hour) // from now on every command waits less than the target
	g.release <- struct{}{}
	require.Eventually(t, appendsStarted(g, 4), 5*time.Second, time.Millisecond) // c1 sent
	shedding, _ = h.Shedding(s)
	require.True(t, shedding, "commands were refused less than an interval ago: the crowd may still be there")

	d := executeAsync(h, s, actors.Command{Payload: add{1}}) // admitted: nothing waits
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	skew(-time.Hour + 10*time.Second) // an interval later, still below the target
	g.release <- struct{}{}
	require.Eventually(t, appendsStarted(g, 5), 5*time.Second, time.Millisecond) // d sent
	shedding, _ = h.Shedding(s)
	require.False(t, shedding, "the queue drained and nothing was refused for an interval: the stream stopped shedding")

	g.openGate()
	var wg sync.WaitGroup
	for range 5 { // more than the shedding stream admitted: all accepted now
		wg.Go(func() {
			_, err := h.Execute(context.Background(), s, actors.Command{Payload: add{1}})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, ch := range append(done, c1, d) {
		require.NoError(t, recv(t, ch, "an answer").err)
	}
	// 3 warm-up + a, b1, b2, c1, d + 5; none of the refused add{100}.
	require.Equal(t, 13, exec(t, h, s, noop{}).State)
}

// A queue that stands above the target for less than the interval (a burst)
// sheds nothing, nor does one that no caller gave up waiting on, nor any
// queue when the shedding is disabled.
func TestQueueDelayShedsOnlyAfterAWholeIntervalAndNotWhenDisabled(t *testing.T) {
	t.Parallel()
	t.Run("burst", func(t *testing.T) {
		t.Parallel()
		h, g, s, skew := queueDelayFixture(t, "burst", nil)
		a := executeAsync(h, s, actors.Command{Payload: add{1}})
		require.Eventually(t, appendsStarted(g, 1), 5*time.Second, time.Millisecond)
		b1 := executeAsync(h, s, actors.Command{Payload: add{1}})
		require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
		b2 := executeAsync(h, s, actors.Command{Payload: add{1}})
		require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)
		skew(time.Hour)
		g.release <- struct{}{}
		require.Eventually(t, appendsStarted(g, 2), 5*time.Second, time.Millisecond)
		skew(time.Hour + 5*time.Second) // half an interval later: still a burst
		g.release <- struct{}{}
		require.Eventually(t, appendsStarted(g, 3), 5*time.Second, time.Millisecond)
		shedding, _ := h.Shedding(s)
		require.False(t, shedding)
		c := executeAsync(h, s, actors.Command{Payload: add{1}})
		require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
		more := executeAsync(h, s, actors.Command{Payload: add{1}})
		require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)
		g.openGate()
		for _, ch := range []<-chan execOutcome{a, b1, b2, c, more} {
			require.NoError(t, recv(t, ch, "an answer").err)
		}
	})
	t.Run("patient", func(t *testing.T) {
		t.Parallel()
		h, g, s, skew := queueDelayFixture(t, "patient", nil)
		done := standingQueue(t, h, g, s, skew, false)
		shedding, _ := h.Shedding(s)
		require.False(t, shedding, "long waits that no caller gave up on are not shed")
		for range 3 {
			done = append(done, executeAsync(h, s, actors.Command{Payload: add{1}}))
		}
		require.Eventually(t, func() bool { return h.Pending(s) == 3 }, 5*time.Second, time.Millisecond)
		g.openGate()
		for _, ch := range done {
			require.NoError(t, recv(t, ch, "an answer").err)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		h, g, s, skew := queueDelayFixture(t, "disabled", func(c *actors.Config) { c.DisableQueueDelayShedding = true })
		done := standingQueue(t, h, g, s, skew, true)
		shedding, _ := h.Shedding(s)
		require.False(t, shedding)
		for range 3 {
			done = append(done, executeAsync(h, s, actors.Command{Payload: add{1}}))
		}
		require.Eventually(t, func() bool { return h.Pending(s) == 3 }, 5*time.Second, time.Millisecond)
		g.openGate()
		for _, ch := range done {
			require.NoError(t, recv(t, ch, "an answer").err)
		}
	})
}

func TestQueueDelayConfigValidation(t *testing.T) {
	t.Parallel()
	f := newFixture()
	_, err := actors.NewHost(context.Background(), actors.Config{Journal: f.mem, Sessions: f.mem, NodeID: "n",
		Resolve: func(string) actors.Model { return counter{} }, Bounds: actors.Bounds{QueueDelayTarget: time.Second, QueueDelayInterval: time.Second}})
	require.ErrorContains(t, err, "QueueDelayTarget")
	_, err = actors.NewHost(context.Background(), actors.Config{Journal: f.mem, Sessions: f.mem, NodeID: "n",
		Resolve: func(string) actors.Model { return counter{} }, Bounds: actors.Bounds{QueueDelayTarget: -time.Second}})
	require.ErrorContains(t, err, "QueueDelayTarget")
}
