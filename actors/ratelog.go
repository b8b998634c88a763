package actors

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// transientLogInterval is how often, at most, one kind of transient failure
// (the store unreachable, a call cut off) is logged: an outage must not write
// one line per stream and request.
const transientLogInterval = 5 * time.Second

// transient reports an error that says nothing about the stream itself: the
// store could not be reached, or the call was cut off.
func transient(err error) bool {
	return errors.Is(err, journal.ErrUnavailable) || errors.Is(err, journal.ErrOutcomeUnknown) || errors.Is(err, ErrLeaseLost)
}

// logLimiter writes at most one record per message and interval; the next
// record of that message carries how many were suppressed. Safe for
// concurrent use.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
	skip map[string]int
}

// log writes msg at level through l unless the same msg was written less than
// transientLogInterval ago.
func (ll *logLimiter) log(l *slog.Logger, level slog.Level, msg string, args ...any) {
	ll.mu.Lock()
	if ll.last == nil {
		ll.last, ll.skip = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if t, ok := ll.last[msg]; ok && now.Sub(t) < transientLogInterval {
		ll.skip[msg]++
		ll.mu.Unlock()
		return
	}
	suppressed := ll.skip[msg]
	ll.last[msg], ll.skip[msg] = now, 0
	ll.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed_since_last", suppressed)
	}
	l.Log(context.Background(), level, msg, args...)
}
