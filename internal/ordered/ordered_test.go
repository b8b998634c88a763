package ordered_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/internal/ordered"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEachDeliversInOrder: results come back in the pieces' order although
// later pieces finish first (piece i waits for piece i+1 to have started).
func TestEachDeliversInOrder(t *testing.T) {
	const n = 50
	started := make([]chan struct{}, n+1)
	for i := range started {
		started[i] = make(chan struct{})
	}
	close(started[n])
	var got []int
	err := ordered.Each(context.Background(), n, n, func(ctx context.Context, i int) int {
		close(started[i])
		<-started[i+1]
		return i * i
	}, func(i, v int) error {
		require.Equal(t, i*i, v)
		got = append(got, i)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, got, n)
	for i, v := range got {
		require.Equal(t, i, v)
	}
}

// TestEachStopsAtTheFirstError: done's error ends the run, no later piece is
// handed back, and every goroutine has ended when Each returns (goleak).
func TestEachStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var handed atomic.Int64
	err := ordered.Each(context.Background(), 1000, 4, func(ctx context.Context, i int) int { return i },
		func(i, v int) error {
			handed.Add(1)
			if i == 10 {
				return boom
			}
			return nil
		})
	require.ErrorIs(t, err, boom)
	require.EqualValues(t, 11, handed.Load())
}

// TestEachHonoursCancellation: a context cancelled during the run ends it with
// the context's error (each piece waits for the cancellation, so the 1,000
// pieces cannot all be fed and handed back: every step after it picks at
// random between going on and stopping).
func TestEachHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := ordered.Each(ctx, 1000, 2, func(ctx context.Context, i int) int {
		cancel()
		<-ctx.Done()
		return i
	}, func(int, int) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
}

// TestEachWithNothing: no piece, no call, no error.
func TestEachWithNothing(t *testing.T) {
	require.NoError(t, ordered.Each(context.Background(), 0, 4, func(context.Context, int) int { panic("no piece") },
		func(int, int) error { panic("no piece") }))
}
