package admission

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// A request past MaxWait since its arrival is shed at once when no slot is
// free, without waiting; with a slot free it is admitted whatever its age.
func TestAcquireSinceArrival(t *testing.T) {
	l := New(Config{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxWait: time.Hour, TargetLatency: time.Hour})
	old := time.Now().Add(-2 * time.Hour)
	release, err := l.AcquireSince(context.Background(), old)
	if err != nil {
		t.Fatalf("a free slot admits an old request: %v", err)
	}
	// No slot: an old request is refused at once (a MaxWait of an hour
	// would otherwise hold this call for an hour).
	if _, err := l.AcquireSince(context.Background(), old); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("an old request with no free slot: %v, want ErrOverloaded", err)
	}
	if s := l.Stats(); s.TimedOut != 1 || s.Waiting != 0 {
		t.Fatalf("stats %+v: want one timed out and none waiting", s)
	}
	// A fresh one waits for the slot and gets it when it frees.
	got := make(chan error, 1)
	go func() {
		r, err := l.AcquireSince(context.Background(), time.Now())
		if err == nil {
			r(0)
		}
		got <- err
	}()
	waitWaiting(t, l, 1)
	release(0)
	if err := <-got; err != nil {
		t.Fatalf("a fresh request waits for the slot: %v", err)
	}
}

// arrivalServer serves handler behind Arrivals' hooks on a loopback port.
func arrivalServer(t *testing.T, handler http.Handler) string {
	t.Helper()
	var arrivals Arrivals
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ConnContext: arrivals.ConnContext, ConnState: arrivals.ConnState}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// send writes one GET on c and reads its status line and body.
func send(t *testing.T, c net.Conn, rd *bufio.Reader) (int, string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

// Arrivals stamps a connection's first request at its acceptance and a
// kept-alive connection's next request when it is read, not when its
// connection was accepted or its previous request answered. (The handler
// answers the stamp; both sides read one clock.)
func TestArrivalsStampAcceptanceThenEachRequest(t *testing.T) {
	addr := arrivalServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := Arrived(r)
		if at.IsZero() {
			http.Error(w, "no arrival", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, at.UnixNano())
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	arrived := func(label string) time.Time {
		t.Helper()
		code, body := send(t, c, rd)
		var ns int64
		if _, err := fmt.Sscan(body, &ns); code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %q", label, code, body)
		}
		return time.Unix(0, ns)
	}
	time.Sleep(300 * time.Millisecond) // accepted, nothing sent yet
	sent := time.Now()
	if at := arrived("first request"); !at.Before(sent) {
		t.Fatalf("the first request arrived at %v, not before it was sent (%v): its connection's acceptance is its arrival", at, sent)
	}
	answered := time.Now()
	time.Sleep(100 * time.Millisecond) // idle between requests
	if at := arrived("second request"); !at.After(answered) {
		t.Fatalf("the kept-alive connection's second request arrived at %v, before the first was answered (%v): it was stamped before it was sent", at, answered)
	}
}

// Behind Arrivals, Middleware answers 503 at once a request that arrived
// more than MaxWait ago while no slot is free, and its handler never runs.
// (Judged from its handler's start instead, it would wait for the slot,
// which frees well within MaxWait, and be served.)
func TestMiddlewareShedsByArrival(t *testing.T) {
	l := New(Config{InitialLimit: 1, MinLimit: 1, MaxLimit: 1, MaxWait: 200 * time.Millisecond, TargetLatency: time.Hour})
	entered, unblock := make(chan struct{}, 4), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(unblock) }) })
	served := 0
	var mu sync.Mutex
	addr := arrivalServer(t, l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		entered <- struct{}{}
		<-unblock
	}), nil))
	// The first request holds the only slot.
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(400 * time.Millisecond) // older than MaxWait before it is sent
	go func() {
		time.Sleep(50 * time.Millisecond)
		once.Do(func() { close(unblock) }) // the slot frees
	}()
	code, _ := send(t, c, bufio.NewReader(c))
	if code != http.StatusServiceUnavailable {
		t.Fatalf("an old request with no free slot got %d, want 503", code)
	}
	if s := l.Stats(); s.TimedOut != 1 || s.Waiting != 0 {
		t.Fatalf("stats %+v: want it timed out on arrival, nothing waiting", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if served != 1 {
		t.Fatalf("the handler ran %d times, want once (the holder)", served)
	}
}
