package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/backoff"
)

func TestNextDoublesUpToMaxAndResets(t *testing.T) {
	t.Parallel()
	b := backoff.Backoff{Min: 10 * time.Millisecond, Max: 70 * time.Millisecond}
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{10 * ms, 20 * ms, 40 * ms, 70 * ms, 70 * ms, 70 * ms}, got)
	b.Reset()
	require.Equal(t, 10*ms, b.Next())

	// Max below Min: every pause is Min.
	low := backoff.Backoff{Min: 5 * ms, Max: ms}
	require.Equal(t, 5*ms, low.Next())
	require.Equal(t, 5*ms, low.Next())
}

func TestJitterStaysWithinItsShare(t *testing.T) {
	t.Parallel()
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: 0.5}
	seen := map[time.Duration]bool{}
	for i := range 200 {
		want := min(100*time.Millisecond<<min(i, 2), 400*time.Millisecond)
		d := b.Next()
		require.LessOrEqual(t, d, want, "the cap holds with jitter")
		require.GreaterOrEqual(t, d, want/2)
		seen[d] = true
	}
	require.Greater(t, len(seen), 10, "pauses are spread")
}

func TestSleepHonoursCancellation(t *testing.T) {
	t.Parallel()
	require.True(t, backoff.Sleep(context.Background(), time.Millisecond))
	require.True(t, backoff.Sleep(context.Background(), 0))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	start := time.Now()
	go func() { done <- backoff.Sleep(ctx, time.Hour) }()
	cancel()
	select {
	case live := <-done:
		require.False(t, live)
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep did not return when its context was cancelled")
	}
	require.Less(t, time.Since(start), 10*time.Second)
	require.False(t, backoff.Sleep(ctx, 0), "an ended context is reported at once")

	b := backoff.Backoff{Min: time.Hour, Max: time.Hour}
	require.False(t, b.Wait(ctx))
}
