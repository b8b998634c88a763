package actors

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// wantTransitions is the stream actor's life as the package promises it, one
// line per state; TestStreamStateTable walks every pair against it.
var wantTransitions = map[streamState][]streamState{
	stSpawned:     {stActivating},
	stActivating:  {stReady, stGhost, stStale, stFailed},
	stGhost:       {stActivating, stFailed, stStopped},
	stReady:       {stLookingUp, stAppending, stReserved, stStale, stBroken, stFailed, stPassivating},
	stLookingUp:   {stReady, stStale, stFailed},
	stAppending:   {stReady, stStale, stFenced, stBroken, stFailed},
	stReserved:    {stReady, stStale, stFenced, stBroken, stFailed},
	stStale:       {stCatchingUp, stFailed, stPassivating},
	stFenced:      {stCatchingUp, stFailed, stStopped},
	stBroken:      {stCatchingUp, stFailed, stPassivating, stStopped},
	stCatchingUp:  {stReady, stStale, stBroken, stFailed},
	stFailed:      {stPassivating, stStopped},
	stPassivating: {stStopped},
	stStopped:     nil,
}

func strictActor(st streamState, leased bool) *streamActor {
	h := &Host{hooks: &hostHooks{strict: true}}
	h.cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &streamActor{host: h, stream: journal.Stream(journal.NewTag("counter", "s")), st: st, version: 7, state: 7}
	if leased {
		a.lease = journal.Lease{Stream: a.stream, NodeID: "n", Incarnation: 1, Epoch: 3}
	}
	return a
}

// moved reports whether a.to(next) was taken; it fails the test when a
// refused move did not panic.
func moved(a *streamActor, next streamState) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	a.to(next)
	return true
}

func TestStreamStateTable(t *testing.T) {
	t.Parallel()
	require.Len(t, wantTransitions, int(numStreamStates), "every state has a line")
	for from := range numStreamStates {
		for next := range numStreamStates {
			t.Run(fmt.Sprintf("%s to %s", from, next), func(t *testing.T) {
				want := slices.Contains(wantTransitions[from], next)
				require.Equal(t, want, from.allows(next))
				// Hold the lease the target needs, and none for a ghost.
				a := strictActor(from, next != stGhost)
				if !want {
					require.False(t, moved(a, next), "refused, so to panics in tests")
					require.Equal(t, from, a.st, "a refused move is not taken")
					return
				}
				require.True(t, moved(a, next))
				require.Equal(t, next, a.st)
			})
		}
	}
}

// Every state is reached from a new actor, and every state but stStopped
// leads to stStopped: no actor is stranded.
func TestStreamStateTableConnects(t *testing.T) {
	t.Parallel()
	reach := func(from streamState) map[streamState]bool {
		seen := map[streamState]bool{from: true}
		todo := []streamState{from}
		for len(todo) > 0 {
			s := todo[0]
			todo = todo[1:]
			for next := range numStreamStates {
				if s.allows(next) && !seen[next] {
					seen[next] = true
					todo = append(todo, next)
				}
			}
		}
		return seen
	}
	require.Len(t, reach(stSpawned), int(numStreamStates))
	for s := range numStreamStates {
		require.True(t, reach(s)[stStopped], "%s cannot stop", s)
	}
}

// The lease is part of the table: no state that decides, appends or grants
// is entered without one (a reservation never carries a dropped lease), and
// a ghost holds none.
func TestStreamStateNeedsLease(t *testing.T) {
	t.Parallel()
	for _, next := range []streamState{stReady, stLookingUp, stAppending, stReserved} {
		for from := range numStreamStates {
			if from.allows(next) {
				require.False(t, moved(strictActor(from, false), next), "%s to %s without a lease", from, next)
			}
		}
	}
	require.False(t, moved(strictActor(stActivating, true), stGhost), "a ghost holding a lease")
	// A reserved stream whose reservation was cancelled for a revoked lease
	// is fenced: it may not grant again before it acquired the stream.
	a := strictActor(stReserved, true)
	a.reserved = &heldReservation{id: 1}
	require.Equal(t, stFenced, a.leaseInvalid(&journal.SessionError{Stream: a.stream, Err: journal.ErrInvalidSession}, fromReservation))
	require.False(t, a.leaseHeld())
	a.resume(stFenced)
	require.Equal(t, stFenced, a.st)
	require.False(t, moved(a, stReserved))
}

// need and resume: what is found while I/O is in flight is owed when it
// ends; an idle actor pays it at once; the worst need wins.
func TestStreamStateOwed(t *testing.T) {
	t.Parallel()
	a := strictActor(stAppending, true)
	a.need(stStale)
	a.need(stBroken)
	a.need(stStale)
	require.Equal(t, stAppending, a.st, "I/O in flight: owed, not taken")
	require.False(t, a.cacheTrusted(), "nothing is snapshotted from a cache owed a recovery")
	a.resume(stReady)
	require.Equal(t, stBroken, a.st)
	require.Zero(t, a.version, "a broken cache is dropped")
	require.Nil(t, a.state)

	a = strictActor(stReady, true)
	require.True(t, a.cacheTrusted())
	a.need(stStale)
	require.Equal(t, stStale, a.st)
	a.need(stStale)
	require.Equal(t, stStale, a.st)

	// A ghost owes nothing: it reads its stream again before it serves
	// anything sent later.
	a = strictActor(stGhost, false)
	a.need(stBroken)
	require.Equal(t, stGhost, a.st)

	// An actor that failed while its I/O was in flight fails when it ends,
	// and still drops a cache it found broken.
	a = strictActor(stAppending, true)
	a.need(stBroken)
	a.failErr = fmt.Errorf("test: failed")
	a.resume(stReady)
	require.Equal(t, stFailed, a.st)
	require.Zero(t, a.version)
}

// A revocation of the actor's own append is answered by acquiring the stream
// again, once; a second one before it wrote again stops the actor. A DCB
// command's revocation may name another stream's lease, so it never stops
// the actor.
func TestStreamLeaseRevocations(t *testing.T) {
	t.Parallel()
	revoked := &journal.SessionError{Err: journal.ErrInvalidSession, Detail: "test"}
	a := strictActor(stAppending, true)
	a.entry = &entry{}
	a.drainSeen = true // no host to drain through
	require.Equal(t, stFenced, a.leaseInvalid(revoked, fromAppend))
	a.resume(stFenced)
	a.lease = journal.Lease{Stream: a.stream, NodeID: "n", Incarnation: 1, Epoch: 4}
	a.st = stAppending
	require.Equal(t, stFailed, a.leaseInvalid(revoked, fromAppend))
	require.ErrorIs(t, a.failErr, journal.ErrSessionExpired)
	require.False(t, a.leaseHeld())

	a = strictActor(stReserved, true)
	a.revocations = 2
	require.Equal(t, stFenced, a.leaseInvalid(revoked, fromReservation))
}
