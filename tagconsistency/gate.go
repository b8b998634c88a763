package tagconsistency

import (
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
// the slowest of 64 concurrent transfers wait 10 times the median.
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
// owners. Safe for concurrent use.
type Gate struct {
	patience time.Duration
	maxWait  time.Duration    // 0: none
	now      func() time.Time // time.Now; tests replace it

	mu      sync.Mutex
	busy    map[journal.StreamID]struct{} // streams held by admitted commands
	waiters []*gateWaiter                 // oldest first
}

// gateWaiter is one command waiting at the gate.
type gateWaiter struct {
	streams []journal.StreamID
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
	return &Gate{patience: cfg.Patience, maxWait: cfg.MaxWait, now: time.Now, busy: make(map[journal.StreamID]struct{})}, nil
}

// Waiting returns how many commands wait at the gate now.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiters)
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
	if len(g.waiters) == 0 && g.available(streams, nil) {
		// The common case of an idle process: no queue to join.
		g.take(streams)
		g.mu.Unlock()
		return leave, nil
	}
	w := &gateWaiter{streams: streams, since: g.now(), ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.admit()
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
		g.waiters = slices.DeleteFunc(g.waiters, func(o *gateWaiter) bool { return o == w })
		g.admit() // its claims, if it had any, no longer hold others back
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
	g.admit()
}

// take marks streams held. Caller holds g.mu.
func (g *Gate) take(streams []journal.StreamID) {
	for _, s := range streams {
		g.busy[s] = struct{}{}
	}
}

// available reports whether none of streams is held or claimed. Caller holds
// g.mu.
func (g *Gate) available(streams []journal.StreamID, claimed map[journal.StreamID]struct{}) bool {
	for _, s := range streams {
		if _, ok := g.busy[s]; ok {
			return false
		}
		if _, ok := claimed[s]; ok {
			return false
		}
	}
	return true
}

// admit lets in, oldest first, every waiter whose streams are neither held
// nor claimed by an older waiter that ran out of patience. Caller holds g.mu.
// It visits every waiter: a process keeps about as many DCB commands waiting
// as it has concurrent callers.
func (g *Gate) admit() {
	if len(g.waiters) == 0 {
		return
	}
	var claimed map[journal.StreamID]struct{}
	now := g.now()
	kept := g.waiters[:0]
	for _, w := range g.waiters {
		if g.available(w.streams, claimed) {
			g.take(w.streams)
			w.admitted = true
			close(w.ready)
			continue
		}
		if now.Sub(w.since) > g.patience {
			if claimed == nil {
				claimed = make(map[journal.StreamID]struct{})
			}
			for _, s := range w.streams {
				claimed[s] = struct{}{}
			}
		}
		kept = append(kept, w)
	}
	clear(g.waiters[len(kept):])
	g.waiters = kept
}
