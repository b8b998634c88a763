package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIdempotencyCacheReplaysAndRejectsMismatch(t *testing.T) {
	t.Parallel()
	c := newIdempotencyCache(10, time.Hour, time.Now, nil)
	var runs atomic.Int32
	exec := func() response { runs.Add(1); return response{status: 200, body: []byte("first")} }

	resp, out, err := c.do(context.Background(), "k", "fp1", exec)
	require.NoError(t, err)
	require.Equal(t, idemExecuted, out)
	require.Equal(t, "first", string(resp.body))

	resp, out, err = c.do(context.Background(), "k", "fp1", func() response { runs.Add(1); return response{status: 200, body: []byte("second")} })
	require.NoError(t, err)
	require.Equal(t, idemReplayed, out)
	require.Equal(t, "first", string(resp.body))

	_, out, err = c.do(context.Background(), "k", "fp2", exec)
	require.NoError(t, err)
	require.Equal(t, idemMismatch, out)
	require.EqualValues(t, 1, runs.Load())
}

func TestIdempotencyCacheDoesNotKeepServerErrors(t *testing.T) {
	t.Parallel()
	c := newIdempotencyCache(10, time.Hour, time.Now, nil)
	_, out, err := c.do(context.Background(), "k", "fp", func() response { return response{status: 503} })
	require.NoError(t, err)
	require.Equal(t, idemExecuted, out)
	require.Zero(t, c.len())
	resp, out, err := c.do(context.Background(), "k", "fp", func() response { return response{status: 409, body: []byte("no money")} })
	require.NoError(t, err)
	require.Equal(t, idemExecuted, out, "a 5xx is not kept: the retry runs")
	require.Equal(t, 409, resp.status)
	_, out, _ = c.do(context.Background(), "k", "fp", func() response { return response{status: 200} })
	require.Equal(t, idemReplayed, out, "a 4xx is kept")
}

func TestIdempotencyCacheConcurrentSameKeyRunsOnce(t *testing.T) {
	t.Parallel()
	c := newIdempotencyCache(10, time.Hour, time.Now, nil)
	release := make(chan struct{})
	var runs atomic.Int32
	var wg sync.WaitGroup
	results := make([]response, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _, err := c.do(context.Background(), "k", "fp", func() response {
				runs.Add(1)
				<-release
				return response{status: 200, body: []byte("only")}
			})
			require.NoError(t, err)
			results[i] = resp
		}()
	}
	// Let the goroutines pile up on the key, then finish the first execution.
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, runs.Load())
	for _, r := range results {
		require.Equal(t, "only", string(r.body))
	}
}

func TestIdempotencyCacheWaiterHonoursContext(t *testing.T) {
	t.Parallel()
	c := newIdempotencyCache(10, time.Hour, time.Now, nil)
	started := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_, _, _ = c.do(context.Background(), "k", "fp", func() response { close(started); <-release; return response{status: 200} })
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := c.do(ctx, "k", "fp", func() response { t.Error("must not run"); return response{} })
	require.ErrorIs(t, err, context.Canceled)
	close(release)
}

func TestIdempotencyCacheBoundAndTTL(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newIdempotencyCache(3, time.Minute, clock, nil)
	for _, k := range []string{"a", "b", "c", "d"} {
		_, _, _ = c.do(context.Background(), k, "fp", func() response { return response{status: 200, body: []byte(k)} })
	}
	require.Equal(t, 3, c.len())
	_, out, _ := c.do(context.Background(), "a", "fp", func() response { return response{status: 200, body: []byte("a2")} })
	require.Equal(t, idemExecuted, out, "the oldest entry was evicted")
	_, out, _ = c.do(context.Background(), "d", "fp", func() response { return response{status: 200} })
	require.Equal(t, idemReplayed, out)

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	_, out, _ = c.do(context.Background(), "d", "other", func() response { return response{status: 200} })
	require.Equal(t, idemExecuted, out, "an expired entry is forgotten")
}

// TestIdempotencyCacheRevalidatesAfterStoreEpoch: once the store epoch moved
// (the database may have gone back in time), a kept 2xx is not replayed but
// executed again (the runtime then answers from the store), while a kept 4xx
// (nothing was written) is still replayed.
func TestIdempotencyCacheRevalidatesAfterStoreEpoch(t *testing.T) {
	t.Parallel()
	var epoch atomic.Uint64
	c := newIdempotencyCache(10, time.Hour, time.Now, epoch.Load)
	ok := func(body string) func() response {
		return func() response { return response{status: 200, body: []byte(body)} }
	}
	_, out, err := c.do(context.Background(), "paid", "fp", ok("first"))
	require.NoError(t, err)
	require.Equal(t, idemExecuted, out)
	_, out, _ = c.do(context.Background(), "refused", "fp", func() response { return response{status: 409, body: []byte("no money")} })
	require.Equal(t, idemExecuted, out)

	resp, out, _ := c.do(context.Background(), "paid", "fp", ok("second"))
	require.Equal(t, idemReplayed, out, "same epoch: replayed")
	require.Equal(t, "first", string(resp.body))

	epoch.Add(1)
	resp, out, _ = c.do(context.Background(), "paid", "fp", ok("again"))
	require.Equal(t, idemExecuted, out, "a 2xx taken under an older epoch is executed again")
	require.Equal(t, "again", string(resp.body))
	resp, out, _ = c.do(context.Background(), "paid", "fp", ok("third"))
	require.Equal(t, idemReplayed, out, "and kept under the new epoch")
	require.Equal(t, "again", string(resp.body))
	resp, out, _ = c.do(context.Background(), "refused", "fp", ok("would pay"))
	require.Equal(t, idemReplayed, out, "a 4xx wrote nothing: still replayed")
	require.Equal(t, 409, resp.status)
	_, out, _ = c.do(context.Background(), "paid", "other", ok("x"))
	require.Equal(t, idemMismatch, out, "a different request with the key is still refused")
}
