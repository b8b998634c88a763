package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/throwawaypg"
)

// levelCounter counts the records at Warn and above, and passes everything on.
type levelCounter struct {
	slog.Handler
	warns *atomic.Int64
}

func (c levelCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		c.warns.Add(1)
	}
	return c.Handler.Handle(ctx, r)
}

func (c levelCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return levelCounter{c.Handler.WithAttrs(as), c.warns}
}

func (c levelCounter) WithGroup(n string) slog.Handler {
	return levelCounter{c.Handler.WithGroup(n), c.warns}
}

// TestPostgresOutage runs the bank on a Postgres of its own, stops that
// server under load and starts it again: requests answer 503 (with
// Retry-After) within 1 s of the outage, /readyz is not ready during it, the
// log gets a few summary lines instead of one per request, the service
// serves again on its own within 15 s of the database's return, and the
// balance equals exactly the acknowledged deposits (503s retried with their
// Idempotency-Key are never applied twice).
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	pg := throwawaypg.Start(t)
	var warns atomic.Int64
	log := slog.New(levelCounter{testLogger(t).Handler(), &warns})
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "outage", Logger: log, DatabaseURL: pg.URL(), Schema: "bank"})
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"olive"}`), 201, "olive", 0, 1)

	hc := &http.Client{Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()
	deposit := func(key string) (int, string) {
		req, _ := http.NewRequest("POST", ts.url+"/accounts/olive/deposit", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 512)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
			return -1, "503 without Retry-After"
		}
		return resp.StatusCode, b.String()
	}

	var (
		mu        sync.Mutex
		acked     = map[string]bool{}
		unsettled = map[string]bool{} // keys answered 503, never 200 yet
		first503  atomic.Int64        // unix nanos of the first 503 after the stop
		stopped   atomic.Int64        // unix nanos of the stop
		bad       atomic.Value
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				st, body := deposit(key)
				mu.Lock()
				switch st {
				case 200:
					acked[key] = true
				case 503:
					unsettled[key] = true
					if s := stopped.Load(); s != 0 {
						first503.CompareAndSwap(0, time.Now().UnixNano())
					}
				default:
					bad.Store(fmt.Sprintf("key %s: %d %s", key, st, body))
				}
				mu.Unlock()
				if st == 503 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 50 }, 20*time.Second, 5*time.Millisecond)

	warnsBefore := warns.Load()
	stopped.Store(time.Now().UnixNano())
	pg.Stop()
	require.Eventually(t, func() bool { return first503.Load() != 0 }, 5*time.Second, 5*time.Millisecond)
	to503 := time.Duration(first503.Load() - stopped.Load())
	require.Less(t, to503, time.Second, "503 within 1 s of the outage")
	require.Eventually(t, func() bool { return ts.request("GET", "/readyz", "").Status == 503 }, 5*time.Second, 10*time.Millisecond, "not ready during the outage")
	require.Equal(t, 200, ts.request("GET", "/healthz", "").Status, "still alive")
	time.Sleep(2 * time.Second) // an outage of a few seconds, under load
	warnsDuring := warns.Load() - warnsBefore

	pg.Start()
	back := time.Now()
	mu.Lock()
	ackedAtReturn := len(acked)
	mu.Unlock()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) > ackedAtReturn }, 15*time.Second, 10*time.Millisecond, "serves again without a restart")
	recovered := time.Since(back)
	require.Eventually(t, func() bool { return ts.request("GET", "/readyz", "").Status == 200 }, 15*time.Second, 10*time.Millisecond)
	close(stop)
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Fatalf("an answer other than 200 or 503 with Retry-After: %v", b)
	}

	// Settle every key that only got 503s: retry with the same key until a
	// definite answer. None may be applied twice.
	mu.Lock()
	defer mu.Unlock()
	for key := range unsettled {
		if acked[key] {
			continue
		}
		var st int
		for range 50 {
			if st, _ = deposit(key); st == 200 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.Equal(t, 200, st, "key %s settles once the database is back", key)
		acked[key] = true
	}
	r := ts.request("GET", "/accounts/olive", "")
	requireAccount(t, r, 200, "olive", int64(len(acked)), uint64(1+len(acked)))
	t.Logf("first 503 %s after the stop; %d warnings logged during a %s outage; served again %s after the database returned; %d deposits acknowledged, balance equal",
		to503.Round(time.Millisecond), warnsDuring, (2 * time.Second).String(), recovered.Round(time.Millisecond), len(acked))
	require.LessOrEqual(t, warnsDuring, int64(10), "a few summary lines, not one per request")
}
