package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
)

// TestCorrelationIDIsBounded: X-Correlation-Id is stored on every event a
// request causes; over 256 bytes, or with bytes that are not printable ASCII,
// it is refused with a 400 that states the limit, and nothing is done.
func TestCorrelationIDIsBounded(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, kind)
			requireAccount(t, ts.request("POST", "/accounts", `{"id":"carol"}`), 201, "carol", 0, 1)
			for _, bad := range []string{strings.Repeat("c", journal.MaxMetadataIDLength+1), strings.Repeat("c", 3200), "a\tb"} {
				r := ts.request("POST", "/accounts/carol/deposit", `{"amount":1}`, "X-Correlation-Id", bad)
				requireError(t, r, 400, bank.CodeInvalidRequest)
				require.Contains(t, string(r.Body), "X-Correlation-Id")
			}
			require.Contains(t, string(ts.request("POST", "/accounts/carol/deposit", `{"amount":1}`, "X-Correlation-Id", strings.Repeat("c", 300)).Body), "256")
			ok := strings.Repeat("c", journal.MaxMetadataIDLength)
			requireAccount(t, ts.request("POST", "/accounts/carol/deposit", `{"amount":1}`, "X-Correlation-Id", ok), 200, "carol", 1, 2)
		})
	}
}

// TestOversizedHeadersCostNothing: 100 requests carrying 900 KB correlation
// IDs and 100 carrying 64 KB ones are all refused (431: headers over the
// server's 16 KiB limit) and the process keeps none of them: the live heap
// grows by less than 50 MB (the headers alone are 96 MB). Not parallel, so
// no other test's allocations count.
func TestOversizedHeadersCostNothing(t *testing.T) {
	ts := startTestServer(t, "memory")
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"dave"}`), 201, "dave", 0, 1)
	heap := func() uint64 {
		goruntime.GC()
		var m goruntime.MemStats
		goruntime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	statuses := map[int]int{}
	for _, size := range []int{900 << 10, 64 << 10} {
		value := strings.Repeat("x", size)
		for range 100 {
			req, err := http.NewRequest("POST", ts.url+"/accounts/dave/deposit", strings.NewReader(`{"amount":1}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Correlation-Id", value)
			resp, err := ts.client.Do(req)
			if err != nil {
				// The server may close the connection while a 900 KB header is
				// still being written; then the client never reads the 431.
				statuses[0]++
				continue
			}
			resp.Body.Close()
			statuses[resp.StatusCode]++
		}
	}
	after := heap()
	t.Logf("responses by status (0: connection closed by the server mid-request): %v; live heap %d MB → %d MB", statuses, before>>20, after>>20)
	for status, n := range statuses {
		require.True(t, status == 0 || (status >= 400 && status < 500), "%d requests answered %d", n, status)
	}
	require.Less(t, int64(after)-int64(before), int64(50<<20), "the oversized headers were not kept")
	requireAccount(t, ts.request("GET", "/accounts/dave", ""), 200, "dave", 0, 1)
}

// blockingService holds deposits until release is closed.
type blockingService struct {
	Service
	entered chan struct{}
	release chan struct{}
}

func (b *blockingService) Deposit(ctx context.Context, id string, amount int64, _ CommandOptions) (AccountView, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return AccountView{}, ctx.Err()
	}
	return AccountView{ID: id, Balance: amount, Version: 1}, nil
}

// TestInFlightLimit: with MaxInFlight requests being served, the next one is
// answered 503 overloaded with Retry-After after its short wait for a slot
// (admission.Config.MaxWait), before any work; health checks are never
// refused.
func TestInFlightLimit(t *testing.T) {
	t.Parallel()
	svc := &blockingService{entered: make(chan struct{}, 2), release: make(chan struct{})}
	var ready atomic.Bool
	ready.Store(true)
	h, err := newAPI(apiConfig{Service: svc, Ready: &ready, MaxInFlight: 2})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	deposit := func() (*http.Response, error) {
		return http.Post(srv.URL+"/accounts/erin/deposit", "application/json", strings.NewReader(`{"amount":1}`))
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := deposit()
			if err == nil {
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode)
			}
		})
	}
	<-svc.entered
	<-svc.entered
	resp, err := deposit()
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err = http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, path)
	}
	close(svc.release)
	wg.Wait()
}

// TestReadyzReportsWhyNot: /readyz is 503 not_ready with the reason while
// the node cannot serve; /healthz stays 200 (restarting would not help).
func TestReadyzReportsWhyNot(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	ready.Store(true)
	var why atomic.Pointer[error]
	h, err := newAPI(apiConfig{Service: &blockingService{}, Ready: &ready, Readiness: func(context.Context) error {
		if p := why.Load(); p != nil {
			return *p
		}
		return nil
	}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	status, _ := get("/readyz")
	require.Equal(t, 200, status)
	down := fmt.Errorf("the database does not answer: %w", journal.ErrUnavailable)
	why.Store(&down)
	status, body := get("/readyz")
	require.Equal(t, 503, status)
	require.Contains(t, body, "not_ready")
	require.Contains(t, body, "database does not answer")
	status, _ = get("/healthz")
	require.Equal(t, 200, status, "liveness does not depend on the database")
}

// lineCounter counts log records.
type lineCounter struct {
	slog.Handler
	n atomic.Int64
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCounter) Handle(context.Context, slog.Record) error {
	c.n.Add(1)
	return nil
}

// TestTransientFailuresAreSummarised: a thousand 503s within one interval
// write one log line, not a thousand; the next interval's line carries the
// count.
func TestTransientFailuresAreSummarised(t *testing.T) {
	t.Parallel()
	counter := &lineCounter{}
	now := time.Unix(1000, 0)
	l := newRateLimitedLog(slog.New(counter), 5*time.Second, func() time.Time { return now })
	cause := fmt.Errorf("append: %w", journal.ErrUnavailable)
	for range 1000 {
		l.note("deposit", cause)
	}
	require.EqualValues(t, 1, counter.n.Load())
	now = now.Add(5 * time.Second)
	l.note("deposit", errors.New("again"))
	require.EqualValues(t, 2, counter.n.Load())
}

// TestTwinNodeIDOneServes: two bank servers started with one node ID on one
// database: the newer serves, the older answers 503 lease_lost and /readyz
// not ready, and never flaps back: no false 409s, every acknowledged deposit
// is in the balance.
func TestTwinNodeIDOneServes(t *testing.T) {
	t.Parallel()
	_, schema := pgSchema(t)
	cfg := serverConfig{Addr: "127.0.0.1:0", NodeID: "twin", Logger: testLogger(t), DatabaseURL: pgtest.URL(t), Schema: schema, SessionTimeout: 2 * time.Second}
	older := startTestServerWith(t, cfg)
	requireAccount(t, older.request("POST", "/accounts", `{"id":"frank"}`), 201, "frank", 0, 1)
	newer := startTestServerWith(t, cfg)
	require.Eventually(t, func() bool { return older.request("GET", "/readyz", "").Status == 503 }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, string(older.request("GET", "/readyz", "").Body), `another live process opened node ID \"twin\"`, "the reason names the node ID")
	acked := int64(0)
	// Several renewal periods (one every 667 ms); the timeout is long enough
	// that the newer's lease never lapses on a loaded machine.
	deadline := time.Now().Add(cfg.SessionTimeout + cfg.SessionTimeout/2)
	for time.Now().Before(deadline) {
		r := newer.request("POST", "/accounts/frank/deposit", `{"amount":1}`)
		require.Equal(t, 200, r.Status, string(r.Body))
		acked++
		r = older.request("POST", "/accounts/frank/deposit", `{"amount":1000}`)
		requireError(t, r, 503, codeLeaseLost)
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		require.Equal(t, 503, older.request("GET", "/readyz", "").Status, "the older never comes back")
		require.Equal(t, 200, newer.request("GET", "/readyz", "").Status)
	}
	requireAccount(t, newer.request("GET", "/accounts/frank", ""), 200, "frank", acked, uint64(1+acked))
}
