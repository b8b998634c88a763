package actors

import (
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

// streamState is what a stream actor is doing, and with it what it may do.
// An actor is in exactly one state; it changes state only through
// streamActor.to, which allows the moves written in streamState.allows.
//
// The states with I/O in flight (io) take no new work: requests wait in the
// queue until the I/O's result arrives in the mailbox. stStale, stFenced and
// stBroken are idle states that owe a recovery before the actor serves again.
type streamState uint8

const (
	// stSpawned: the actor exists; protoactor has not started it yet.
	stSpawned streamState = iota
	// stActivating: reading the stream's version, acquiring its lease and
	// recovering its state (I/O).
	stActivating
	// stGhost: the stream had no events when read, and no lease is held
	// (ghost.go).
	stGhost
	// stReady: the lease is held and the cache (state, version, idempotency
	// keys) is the journal's: the actor decides, grants and answers.
	stReady
	// stLookingUp: reading the journal for idempotency keys of the next
	// batch (I/O).
	stLookingUp
	// stAppending: one batch's append is in flight (I/O); the commands that
	// arrive meanwhile are decided on top of it (pipeline.go).
	stAppending
	// stReserved: a DCB reservation is granted and not yet confirmed or
	// cancelled; nothing is decided or granted meanwhile.
	stReserved
	// stStale: the journal may hold more than the cache (an append failed or
	// was not the one decided, a reservation ended in a failure, the store
	// may have changed): catch up before serving.
	stStale
	// stFenced: the journal refused the stream's lease (revoked by a
	// partition move, the stream taken over) and the actor dropped it:
	// acquire the stream again and catch up before serving.
	stFenced
	// stBroken: the cache was dropped (user code panicked, the store went
	// back in time): recover in full, acquiring the stream first when no
	// lease is held, before serving.
	stBroken
	// stCatchingUp: acquiring the stream again, catching up or recovering
	// in full (I/O).
	stCatchingUp
	// stFailed: the actor stops; every request fails with failErr until it
	// is drained.
	stFailed
	// stPassivating: the final snapshot and the lease's release are in
	// flight (I/O).
	stPassivating
	// stStopped: the actor asked protoactor to stop it.
	stStopped

	numStreamStates
)

// owesNothing is streamActor.owed when nothing is owed (its zero value).
const owesNothing = stSpawned

// allows reports whether an actor in state s may move to next: the one
// table of the stream actor's transitions.
func (s streamState) allows(next streamState) bool {
	var to uint32
	switch s {
	case stSpawned:
		to = 1 << stActivating
	case stActivating:
		// A late DCB confirmation (a reservation of an actor that stopped)
		// owes a catch-up: stStale.
		to = 1<<stReady | 1<<stGhost | 1<<stStale | 1<<stFailed
	case stGhost:
		// Read again, or take the lease (upgrade); a ghost holds nothing to
		// release, so it stops at once.
		to = 1<<stActivating | 1<<stFailed | 1<<stStopped
	case stReady:
		to = 1<<stLookingUp | 1<<stAppending | 1<<stReserved | 1<<stStale | 1<<stBroken | 1<<stFailed | 1<<stPassivating
	case stLookingUp:
		to = 1<<stReady | 1<<stStale | 1<<stFailed
	case stAppending, stReserved:
		to = 1<<stReady | 1<<stStale | 1<<stFenced | 1<<stBroken | 1<<stFailed
	case stStale:
		to = 1<<stCatchingUp | 1<<stFailed | 1<<stPassivating
	case stFenced:
		// No lease is held: nothing to release, no snapshot of a stream
		// this node may no longer own.
		to = 1<<stCatchingUp | 1<<stFailed | 1<<stStopped
	case stBroken:
		to = 1<<stCatchingUp | 1<<stFailed | 1<<stPassivating | 1<<stStopped
	case stCatchingUp:
		// A failed catch-up leaves the recovery owed (stStale, stBroken); a
		// lease not acquired again stops the actor (stFailed).
		to = 1<<stReady | 1<<stStale | 1<<stBroken | 1<<stFailed
	case stFailed:
		to = 1<<stPassivating | 1<<stStopped
	case stPassivating:
		to = 1 << stStopped
	}
	return to&(1<<next) != 0
}

// io reports whether the actor has I/O in flight in state s: it takes no new
// work until the I/O's result arrives.
func (s streamState) io() bool {
	switch s {
	case stSpawned, stActivating, stLookingUp, stAppending, stCatchingUp, stPassivating:
		return true
	}
	return false
}

// leased reports whether an actor in state s must hold its stream's lease:
// every state in which it decides, appends or hands out a reservation.
func (s streamState) leased() bool {
	switch s {
	case stReady, stLookingUp, stAppending, stReserved:
		return true
	}
	return false
}

// owes ranks what a state requires before the actor serves again: nothing
// (0), a catch-up (stStale), acquiring the lease and a catch-up (stFenced),
// a full recovery (stBroken).
func (s streamState) owes() int {
	switch s {
	case stStale:
		return 1
	case stFenced:
		return 2
	case stBroken:
		return 3
	}
	return 0
}

func (s streamState) String() string {
	switch s {
	case stSpawned:
		return "spawned"
	case stActivating:
		return "activating"
	case stGhost:
		return "ghost"
	case stReady:
		return "ready"
	case stLookingUp:
		return "looking up"
	case stAppending:
		return "appending"
	case stReserved:
		return "reserved"
	case stStale:
		return "stale"
	case stFenced:
		return "fenced"
	case stBroken:
		return "broken"
	case stCatchingUp:
		return "catching up"
	case stFailed:
		return "failed"
	case stPassivating:
		return "passivating"
	case stStopped:
		return "stopped"
	}
	return fmt.Sprintf("streamState(%d)", uint8(s))
}

// to moves the actor to next. A move the table does not allow, or into a
// state that needs the lease while none is held (or into stGhost while one
// is), is a bug in this package: its tests panic on it (hostHooks.strict);
// in production it is logged as an error and taken, so the actor goes on as
// the code asked. Entering stBroken drops the cache.
func (a *streamActor) to(next streamState) {
	if err := a.refusal(next); err != nil {
		if h := a.host.hooks; h != nil && h.strict {
			panic(err)
		}
		a.host.cfg.Logger.Error("stream actor: a state transition the table refuses (a bug in package actors); taking it", "stream", a.stream.String(), "error", err)
	}
	a.st = next
	if next == stBroken {
		a.dropCache()
	}
}

// refusal returns why the move to next is refused, nil when it is allowed.
func (a *streamActor) refusal(next streamState) error {
	switch {
	case !a.st.allows(next):
		return fmt.Errorf("actors: stream %s: no transition from %s to %s", a.stream, a.st, next)
	case next.leased() && !a.leaseHeld():
		return fmt.Errorf("actors: stream %s: %s without a lease (from %s)", a.stream, next, a.st)
	case next == stGhost && a.leaseHeld():
		return fmt.Errorf("actors: stream %s: ghost holding a lease (from %s)", a.stream, a.st)
	}
	return nil
}

// need records that the cache needs s (stStale or stBroken) before the
// actor serves again. An idle actor moves there at once (unless it already
// owes as much); one with I/O in flight, or a reservation granted, owes it
// when that ends (resume). A ghost holds no cache to recover: it reads the
// stream again before it serves anything sent later. An actor that stops
// serves nothing again.
func (a *streamActor) need(s streamState) {
	switch a.st {
	case stReady, stStale, stFenced, stBroken:
		if s.owes() > a.st.owes() {
			a.to(s)
		}
	case stActivating, stLookingUp, stAppending, stReserved, stCatchingUp:
		if s.owes() > a.owed.owes() {
			a.owed = s
		}
	}
}

// resume ends an I/O state, or a reservation, in outcome, or in what was
// found meanwhile when that owes more (need), or in stFailed when the actor
// failed meanwhile.
func (a *streamActor) resume(outcome streamState) {
	next := outcome
	if outcome != stGhost && a.owed.owes() > next.owes() {
		next = a.owed
	}
	a.owed = owesNothing
	if a.failErr != nil {
		if next == stBroken {
			a.to(stBroken) // the cache is dropped all the same
		}
		next = stFailed
	}
	a.to(next)
}

// dropCache forgets the cached state, version and idempotency keys: they are
// not the journal's (stBroken), and a full recovery reads them again.
func (a *streamActor) dropCache() {
	a.state, a.version, a.lastPos, a.head, a.keys, a.lookedUp = nil, 0, journal.Position{}, journal.Hash{}, nil, nil
}

// cacheTrusted reports whether the cached state is the journal's at the
// cached version: what a snapshot may be taken of.
func (a *streamActor) cacheTrusted() bool {
	switch a.st {
	case stReady, stLookingUp, stAppending, stReserved:
		return a.owed.owes() == 0
	}
	return false
}
