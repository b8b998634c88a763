package main

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// defaultMaxInFlight is the default of -max-inflight: requests served at once.
const defaultMaxInFlight = 1024

// retryableLogInterval is how often, at most, the bank logs a summary of the
// requests it answered 503 (an outage or overload must not flood the log).
const retryableLogInterval = 5 * time.Second

// rateLimitedLog summarises frequent warnings: the first one is logged at
// once, later ones are counted and logged as one line per interval with the
// count and the last cause. Safe for concurrent use.
type rateLimitedLog struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	last    time.Time // when the last line was written
	pending int       // notes since then
	lastOp  string
	lastErr error
}

func newRateLimitedLog(log *slog.Logger, interval time.Duration, now func() time.Time) *rateLimitedLog {
	return &rateLimitedLog{log: log, interval: interval, now: now}
}

// note records one request not served for a transient reason.
func (l *rateLimitedLog) note(op string, err error) {
	l.mu.Lock()
	now := l.now()
	l.pending++
	l.lastOp, l.lastErr = op, err
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.mu.Unlock()
		return
	}
	n, e, o := l.pending, l.lastErr, l.lastOp
	l.pending, l.last = 0, now
	l.mu.Unlock()
	if e == nil {
		e = errors.New("unknown")
	}
	l.log.Warn("requests not served (transient: answered 503 with Retry-After)", "count", n, "interval", l.interval.String(), "last_op", o, "last_err", e.Error())
}
