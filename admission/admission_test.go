package admission

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// hold acquires a slot and returns its release (failing the test when it
// is not admitted).
func hold(t *testing.T, l *Limiter) func(time.Duration) {
	t.Helper()
	release, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return release
}

// waitWaiting waits until n requests wait (they queue in goroutines).
func waitWaiting(t *testing.T, l *Limiter, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests wait, want %d", l.Stats().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The limit holds: past it requests wait, and when a slot frees the newest
// waiter gets it (LIFO), the older ones later.
func TestLimitAndLIFO(t *testing.T) {
	l := New(Config{InitialLimit: 2, MinLimit: 2, MaxLimit: 2, MaxWait: time.Minute, TargetLatency: time.Hour})
	r1, r2 := hold(t, l), hold(t, l)
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			release, err := l.Acquire(context.Background())
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			release(0)
		})
		waitWaiting(t, l, i+1) // waiters arrive in the order 0, 1, 2
	}
	r1(0) // one slot: the newest waiter (2) takes it and gives it back, then 1, then 0
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	if len(got) != 3 || got[0] != 2 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("served in order %v, want [2 1 0] (newest first)", got)
	}
	r2(0)
	if s := l.Stats(); s.InFlight != 0 || s.Admitted != 5 {
		t.Fatalf("stats %+v", s)
	}
}

// A full queue sheds at once; a waiter past MaxWait is shed; a waiter
// whose caller left is dropped, and none of them counts as in flight.
func TestShedding(t *testing.T) {
	l := New(Config{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxQueue: 1, MaxWait: 20 * time.Millisecond, TargetLatency: time.Hour})
	release := hold(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() { _, err := l.Acquire(ctx); errs <- err }()
	waitWaiting(t, l, 1)
	if _, err := l.Acquire(context.Background()); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a full queue must shed at once, got %v", err)
	}
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose caller left: %v", err)
	}
	start := time.Now()
	if _, err := l.Acquire(context.Background()); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a waiter past MaxWait must be shed, got %v", err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Fatalf("shed after %s, before MaxWait", waited)
	}
	release(0)
	s := l.Stats()
	if s.Shed != 1 || s.Canceled != 1 || s.TimedOut != 1 || s.InFlight != 0 || s.Waiting != 0 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := l.Acquire(context.Background()); err != nil {
		t.Fatalf("a free slot admits at once: %v", err)
	}
}

// Slow answers shrink the limit (by a tenth each, to MinLimit); fast ones
// grow it back (by one per limit's worth, to MaxLimit).
func TestLimitAdapts(t *testing.T) {
	l := New(Config{InitialLimit: 100, MinLimit: 10, MaxLimit: 120, TargetLatency: 10 * time.Millisecond})
	for range 5 {
		hold(t, l)(50 * time.Millisecond)
	}
	if got := l.Stats().Limit; got != 59 { // 100 × 0.9⁵ = 59.05
		t.Fatalf("limit after 5 slow answers: %d, want 59", got)
	}
	for range 100 {
		hold(t, l)(50 * time.Millisecond)
	}
	if got := l.Stats().Limit; got != 10 {
		t.Fatalf("limit after many slow answers: %d, want the minimum 10", got)
	}
	for range 2000 {
		hold(t, l)(time.Millisecond)
	}
	if got := l.Stats().Limit; got != 64 { // additive: about sqrt(2·2000+10²) = 64.03
		t.Fatalf("limit after 2000 fast answers: %d, want 64", got)
	}
	for range 10000 {
		hold(t, l)(time.Millisecond)
	}
	if got := l.Stats().Limit; got != 120 {
		t.Fatalf("limit after many fast answers: %d, want the maximum 120", got)
	}
}

// The middleware answers what it does not admit with 503, Retry-After and
// a JSON body, before the handler runs; exempt requests pass the limit.
func TestMiddleware(t *testing.T) {
	l := New(Config{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxQueue: 1, MaxWait: 10 * time.Millisecond, RetryAfter: 2 * time.Second, TargetLatency: time.Hour})
	entered, unblock := make(chan struct{}), make(chan struct{})
	var served int
	var mu sync.Mutex
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-unblock
		}
		w.WriteHeader(http.StatusOK)
	}), func(r *http.Request) bool { return r.URL.Path == "/healthz" })
	srv := httptest.NewServer(h)
	defer srv.Close()
	done := make(chan *http.Response, 1)
	go func() { resp, _ := http.Get(srv.URL + "/slow"); done <- resp }()
	<-entered
	resp, err := http.Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("not admitted: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, err = http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("an exempt request: %d", resp.StatusCode)
	}
	close(unblock)
	if r := <-done; r == nil || r.StatusCode != http.StatusOK {
		t.Fatalf("the admitted request: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if served != 2 { // /slow and /healthz: the refused request never reached the handler
		t.Fatalf("the handler served %d requests, want 2", served)
	}
}
