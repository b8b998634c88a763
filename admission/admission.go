package admission

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ErrOverloaded is returned by Acquire for a request that was not admitted:
// the queue was full, or it waited MaxWait without a free slot. Nothing was
// done for it.
var ErrOverloaded = errors.New("admission: overloaded; nothing was done: retry after a back-off")

// Config tunes a Limiter. Zero fields take the defaults.
type Config struct {
	// InitialLimit, MinLimit and MaxLimit bound the requests served at
	// once. Defaults 32, 4 and 1,000; MaxLimit wins over the others.
	InitialLimit, MinLimit, MaxLimit int
	// TargetLatency is the latency the limit aims at: an answer slower than
	// it shrinks the limit by a tenth, a faster one grows it (by one per
	// limit's worth of answers). Default 100 ms.
	TargetLatency time.Duration
	// MaxWait is how long a request may wait for a slot; MaxQueue how many
	// may wait at once. Defaults 50 ms and 256.
	MaxWait  time.Duration
	MaxQueue int
	// RetryAfter is the delay Middleware's 503 answers advise. Default 1 s.
	RetryAfter time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxLimit <= 0 {
		c.MaxLimit = 1000
	}
	if c.MinLimit <= 0 {
		c.MinLimit = min(4, c.MaxLimit)
	}
	c.MinLimit = min(c.MinLimit, c.MaxLimit)
	if c.InitialLimit <= 0 {
		c.InitialLimit = 32
	}
	c.InitialLimit = min(max(c.InitialLimit, c.MinLimit), c.MaxLimit)
	if c.TargetLatency <= 0 {
		c.TargetLatency = 100 * time.Millisecond
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 50 * time.Millisecond
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = 256
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = time.Second
	}
	return c
}

// Limiter is an adaptive concurrency limit with a LIFO wait list. Safe for
// concurrent use.
type Limiter struct {
	cfg Config

	mu       sync.Mutex
	limit    float64
	inflight int
	waiters  []*waiter // a stack: the newest is served first
	stats    Stats
}

type waiter struct {
	ready    chan struct{} // closed when a slot was handed to it
	admitted bool
}

// Stats counts what a Limiter did since it was made.
type Stats struct {
	// Admitted at once or after a wait; Shed because the queue was full,
	// TimedOut after MaxWait, Canceled because the caller left while
	// waiting.
	Admitted, Shed, TimedOut, Canceled uint64
	// Limit is the current limit, InFlight the requests being served,
	// Waiting those waiting.
	Limit, InFlight, Waiting int
}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	cfg = cfg.withDefaults()
	return &Limiter{cfg: cfg, limit: float64(cfg.InitialLimit)}
}

// Stats returns the counters and the current state.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Limit, s.InFlight, s.Waiting = int(l.limit), l.inflight, len(l.waiters)
	return s
}

// Acquire admits one request, waiting at most MaxWait for a slot (newest
// waiter first), or fails with ErrOverloaded, or with ctx's error when the
// caller left while waiting. After a nil error the caller must call release
// once, with how long the request took, when it is done.
func (l *Limiter) Acquire(ctx context.Context) (release func(latency time.Duration), err error) {
	return l.AcquireSince(ctx, time.Time{})
}

// AcquireSince is Acquire for a request that arrived at arrived (the zero
// time: now), as Arrivals stamps it: a free slot admits it whatever its
// age, but it waits for one only until MaxWait after its arrival, so a
// request already that old when it asks is answered ErrOverloaded at once.
func (l *Limiter) AcquireSince(ctx context.Context, arrived time.Time) (release func(latency time.Duration), err error) {
	l.mu.Lock()
	if len(l.waiters) == 0 && l.inflight < l.slots() {
		l.inflight++
		l.stats.Admitted++
		l.mu.Unlock()
		return l.releaser(), nil
	}
	wait := l.cfg.MaxWait
	if !arrived.IsZero() {
		wait -= time.Since(arrived)
	}
	if wait <= 0 {
		l.stats.TimedOut++
		l.mu.Unlock()
		return nil, ErrOverloaded
	}
	if len(l.waiters) >= l.cfg.MaxQueue {
		l.stats.Shed++
		l.mu.Unlock()
		return nil, ErrOverloaded
	}
	w := &waiter{ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return l.releaser(), nil
	case <-timer.C:
		err = ErrOverloaded
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.admitted { // handed a slot as it gave up: take it after all
		return l.releaser(), nil
	}
	l.remove(w)
	if err == ErrOverloaded {
		l.stats.TimedOut++
	} else {
		l.stats.Canceled++
	}
	return nil, err
}

func (l *Limiter) slots() int { return int(math.Floor(l.limit)) }

func (l *Limiter) remove(w *waiter) {
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			return
		}
	}
}

func (l *Limiter) releaser() func(time.Duration) {
	var once sync.Once
	return func(latency time.Duration) { once.Do(func() { l.release(latency) }) }
}

// release frees a slot, adapts the limit to latency, and hands free slots
// to the newest waiters.
func (l *Limiter) release(latency time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	if latency > l.cfg.TargetLatency {
		l.limit = max(float64(l.cfg.MinLimit), l.limit*0.9)
	} else {
		l.limit = min(float64(l.cfg.MaxLimit), l.limit+1/l.limit)
	}
	for len(l.waiters) > 0 && l.inflight < l.slots() {
		w := l.waiters[len(l.waiters)-1]
		l.waiters = l.waiters[:len(l.waiters)-1]
		w.admitted = true
		l.inflight++
		l.stats.Admitted++
		close(w.ready)
	}
}

// Middleware admits each request through l before next serves it; a request
// not admitted is answered 503 with Retry-After and a JSON body
// {"error": …, "code": "overloaded"} at once, and next never sees it. A
// request whose caller left while it waited gets no answer (there is no one
// to read it). skip, when set, exempts requests from the limit (health
// checks, long-lived streams). With Arrivals on the server, a request is
// judged from its arrival (AcquireSince), and its latency, which adapts the
// limit, is counted from there too.
func (l *Limiter) Middleware(next http.Handler, skip func(*http.Request) bool) http.Handler {
	retryAfter := strconv.Itoa(max(1, int(math.Ceil(l.cfg.RetryAfter.Seconds()))))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip != nil && skip(r) {
			next.ServeHTTP(w, r)
			return
		}
		start := Arrived(r)
		release, err := l.AcquireSince(r.Context(), start)
		if start.IsZero() {
			start = time.Now()
		}
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			w.Header().Set("Retry-After", retryAfter)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"the server is at its concurrency limit; nothing was done: retry after the Retry-After delay","code":"overloaded"}` + "\n"))
			return
		}
		defer func() { release(time.Since(start)) }()
		next.ServeHTTP(w, r)
	})
}
