package tagconsistency

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// DefaultGatePatience is the patience of a Gate made with NewGate(0).
const DefaultGatePatience = 100 * time.Millisecond

// Gate admits the DCB commands of one process to their tags' owners so that
// none of them holds a reservation while it waits for another. Without a gate
// a command reserves its tags one after the other, in sorted order, and holds
// the first while it queues for the next; every command queued behind that
// first tag then waits for the second as well, and chains of such waits made
// the slowest of 64 concurrent transfers wait more than ten times the median.
//
// A command waits at the gate holding nothing until no command that passed
// the gate holds any of its streams; it then takes them all at once, reserves
// them at their owners (in sorted order, as without a gate: the owners'
// reservations and the journal's fencing stay what makes commands
// consistent, and commands of other processes meet there) and frees them when
// its reservations ended. Waiters whose streams are free are admitted oldest
// first; a waiter that has waited longer than the gate's patience claims its
// streams, so that no younger waiter takes one of them before it: a command
// whose tags are busy is passed over for at most about the patience, never
// starved.
//
// The gate adds no deadlock: a command waits at it holding neither gate
// entries nor reservations, and after it only at owners, in sorted order.
// Share one Gate between every Executor of a process (Scribe's runtime does);
// executors with separate gates, or none, still exclude each other at the
// owners. Entering and leaving cost well under a microsecond of the gate's
// lock however many commands wait (BenchmarkGateBesideParkedWaiters): a
// command is queued at each of its streams, and only the queues of the
// streams a command frees are looked at. Safe for concurrent use.
type Gate struct {
	patience time.Duration
	maxWait  time.Duration    // 0: none
	now      func() time.Time // time.Now; tests replace it

	mu      sync.Mutex
	busy    map[journal.StreamID]struct{}      // streams held by admitted commands
	queues  map[journal.StreamID][]*gateWaiter // each stream's waiters, oldest first
	waiting int                                // waiters in the queues
	seq     uint64                             // the next waiter's age rank
}

// gateWaiter is one command waiting at the gate.
type gateWaiter struct {
	streams []journal.StreamID
	seq     uint64 // lower: arrived earlier
	since   time.Time
	ready   chan struct{} // closed when admitted
	// admitted is set, under the gate's mutex, when the waiter took its
	// streams.
	admitted bool
}

// GateConfig configures a Gate.
type GateConfig struct {
	// Patience is how long a waiting command may be passed over by younger
	// commands whose streams were free before it claims its own. 0 means
	// DefaultGatePatience.
	Patience time.Duration
	// MaxWait bounds a command's wait at the gate: past it the command
	// fails with a ReservationTimeoutError (ErrReservationTimeout) naming a
	// stream that stayed busy, as a wait at an owner past the owner's
	// reservation timeout does. 0: only the caller's context bounds it.
	// Scribe's runtime sets its ReservationTimeout.
	MaxWait time.Duration
}

// NewGate returns a gate configured by cfg. A negative duration is a mistake
// and fails.
func NewGate(cfg GateConfig) (*Gate, error) {
	if cfg.Patience < 0 {
		return nil, fmt.Errorf("tagconsistency: GateConfig.Patience is negative (%s); use 0 for the default (%s) or a positive duration", cfg.Patience, DefaultGatePatience)
	}
	if cfg.MaxWait < 0 {
		return nil, fmt.Errorf("tagconsistency: GateConfig.MaxWait is negative (%s); use 0 for no bound but the caller's context, or a positive duration", cfg.MaxWait)
	}
	if cfg.Patience == 0 {
		cfg.Patience = DefaultGatePatience
	}
	return &Gate{patience: cfg.Patience, maxWait: cfg.MaxWait, now: time.Now,
		busy: make(map[journal.StreamID]struct{}), queues: make(map[journal.StreamID][]*gateWaiter)}, nil
}

// Waiting returns how many commands wait at the gate now.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// enter waits until the command may take streams and takes them, or until
// ctx ends (then it returns ctx's error and takes nothing) or the gate's
// MaxWait passed (then a *ReservationTimeoutError, and nothing taken). The
// returned leave frees the streams; call it exactly once.
func (g *Gate) enter(ctx context.Context, streams []journal.StreamID) (leave func(), err error) {
	leave = func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.free(streams)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // a caller that has gone takes nothing
	}
	g.mu.Lock()
	seq, now := g.seq, g.now()
	g.seq++
	if g.admissible(streams, seq, now) {
		g.take(streams)
		g.mu.Unlock()
		return leave, nil
	}
	w := &gateWaiter{streams: streams, seq: seq, since: now, ready: make(chan struct{})}
	for _, s := range streams {
		g.queues[s] = append(g.queues[s], w)
	}
	g.waiting++
	g.mu.Unlock()

	var expired <-chan time.Time
	if g.maxWait > 0 {
		t := time.NewTimer(g.maxWait)
		defer t.Stop()
		expired = t.C
	}
	var failure error
	select {
	case <-w.ready:
		return leave, nil
	case <-ctx.Done():
		failure = ctx.Err()
	case <-expired:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.admitted {
		// Admitted as the wait ended: give the streams back.
		g.free(streams)
	} else {
		g.dequeue(w)
		g.admit(streams) // its claims, if it had any, no longer hold others back
	}
	if failure == nil {
		failure = &ReservationTimeoutError{Stream: g.busyOf(streams), Waited: g.maxWait}
	}
	return nil, failure
}

// busyOf names the first of streams another command holds, or the first
// one when none is held any more (an older waiter claimed it). Caller holds
// g.mu.
func (g *Gate) busyOf(streams []journal.StreamID) journal.StreamID {
	for _, s := range streams {
		if _, ok := g.busy[s]; ok {
			return s
		}
	}
	return streams[0]
}

// free returns streams and admits whoever they let in. Caller holds g.mu.
func (g *Gate) free(streams []journal.StreamID) {
	for _, s := range streams {
		delete(g.busy, s)
	}
	g.admit(streams)
}

// take marks streams held. Caller holds g.mu.
func (g *Gate) take(streams []journal.StreamID) {
	for _, s := range streams {
		g.busy[s] = struct{}{}
	}
}

// admissible reports whether a command of age rank seq may take streams
// now: none is held, and none is claimed by an older waiter that has run out
// of patience. Caller holds g.mu.
func (g *Gate) admissible(streams []journal.StreamID, seq uint64, now time.Time) bool {
	for _, s := range streams {
		if _, held := g.busy[s]; held {
			return false
		}
	}
	for _, s := range streams {
		for _, o := range g.queues[s] { // oldest first
			if o.seq >= seq {
				break
			}
			if now.Sub(o.since) > g.patience {
				return false
			}
		}
	}
	return true
}

// dequeue takes w out of its streams' queues. Caller holds g.mu.
func (g *Gate) dequeue(w *gateWaiter) {
	for _, s := range w.streams {
		q := slices.DeleteFunc(g.queues[s], func(o *gateWaiter) bool { return o == w })
		if len(q) == 0 {
			delete(g.queues, s)
		} else {
			g.queues[s] = q
		}
	}
	g.waiting--
}

// admit lets in, oldest first, the waiters on streams (just freed, or no
// longer claimed) that are now admissible. Only they can be: every other
// waiter still finds what blocked it. Caller holds g.mu.
func (g *Gate) admit(streams []journal.StreamID) {
	var candidates []*gateWaiter
	for _, s := range streams {
		candidates = append(candidates, g.queues[s]...)
	}
	if len(candidates) == 0 {
		return
	}
	// Oldest first; a waiter in several of the queues once.
	slices.SortFunc(candidates, func(a, b *gateWaiter) int { return cmp.Compare(a.seq, b.seq) })
	candidates = slices.Compact(candidates)
	now := g.now()
	for _, w := range candidates {
		if g.admissible(w.streams, w.seq, now) {
			g.dequeue(w)
			g.take(w.streams)
			w.admitted = true
			close(w.ready)
		}
	}
}
