package backend

import (
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"time"
)

// The fence rule: what every backend checks, in the same order and with the
// same errors, before it lets an append through. A backend gathers what it
// knows of the stream's lease and of the lease node's session (from memory, or
// from rows read under its locks) and asks CheckLease and CheckExpected; the
// database of a backend that has one checks the same conditions again in its
// write, so the rule here decides the error a caller sees, never whether a
// write that slipped past it lands.

// LeaseState is what a backend knows of a stream's current lease when it
// checks an append.
type LeaseState struct {
	// Acquired reports that the stream has a lease at all (it was acquired
	// and not deleted since).
	Acquired bool
	// NodeID, Incarnation and Epoch name the holder of the current lease.
	NodeID      string
	Incarnation uint64
	Epoch       uint64
	// Released reports that the holder released the lease.
	Released bool
}

// NodeState is what a backend knows of a node session when it checks an
// append.
type NodeState struct {
	// Found reports that the node ID has a session.
	Found bool
	// Incarnation is the session's current incarnation.
	Incarnation uint64
	// Closed reports that the session was closed.
	Closed bool
	// Live reports that the session has not expired by the backend's clock
	// (for Postgres: the database clock).
	Live bool
	// ExpiresAt is when the session expires or expired, for the message;
	// zero when the backend does not know it.
	ExpiresAt time.Time
}

// CheckLease is the fence rule for one lease an append carries: nil when l
// is the stream's current lease held by a live session, otherwise a
// *SessionError wrapping ErrInvalidSession (the lease is not current: never
// acquired, taken over, released, held by another node, or its node session
// was superseded or closed) or ErrSessionExpired (the lease is current but its
// node session expired). The first failing condition in that order decides.
func CheckLease(l journal.Lease, s LeaseState, n NodeState) error {
	stream := l.Stream.Normalize()
	invalid := func(format string, args ...any) error {
		return &journal.SessionError{Stream: stream, Err: journal.ErrInvalidSession, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case !s.Acquired || s.Epoch == 0:
		return invalid("the stream was never acquired; acquire it with journal.Sessions.Acquire and append with that lease")
	case s.Epoch != l.Epoch:
		return invalid("lease epoch %d is not the stream's current epoch %d: another writer acquired the stream; stop writing to it and reacquire", l.Epoch, s.Epoch)
	case s.NodeID != l.NodeID || s.Incarnation != l.Incarnation:
		return invalid("the stream is held by node %q incarnation %d, not node %q incarnation %d", s.NodeID, s.Incarnation, l.NodeID, l.Incarnation)
	case s.Released:
		return invalid("lease epoch %d was released; acquire the stream again before writing", l.Epoch)
	}
	return CheckNode(stream, l.NodeID, l.Incarnation, n)
}

// checkNode is the session half of CheckLease: nil when incarnation inc of
// node nodeID is the node's live session, otherwise a *SessionError on stream
// wrapping ErrInvalidSession (no session, superseded, closed) or
// ErrSessionExpired.
func CheckNode(stream journal.StreamID, nodeID string, inc uint64, n NodeState) error {
	switch {
	case !n.Found:
		return &journal.SessionError{Stream: stream, Node: true, Err: journal.ErrInvalidSession, Detail: fmt.Sprintf("node %q has no session; open one with OpenNode", nodeID)}
	case n.Incarnation != inc:
		return &journal.SessionError{Stream: stream, Node: true, Err: journal.ErrInvalidSession, Detail: fmt.Sprintf("node %q incarnation %d was superseded by incarnation %d; this process must stop writing", nodeID, inc, n.Incarnation)}
	case n.Closed:
		return &journal.SessionError{Stream: stream, Node: true, Err: journal.ErrInvalidSession, Detail: fmt.Sprintf("node %q incarnation %d was closed; open a new node session", nodeID, inc)}
	case !n.Live:
		at := ""
		if !n.ExpiresAt.IsZero() {
			at = " at " + n.ExpiresAt.UTC().Format(time.RFC3339Nano)
		}
		return &journal.SessionError{Stream: stream, Node: true, Err: journal.ErrSessionExpired, Detail: fmt.Sprintf("node %q incarnation %d expired%s; renew the node session well before its timeout, or open a new one", nodeID, inc, at)}
	}
	return nil
}

// CheckExpected is the fence rule for an expected version: nil when the
// stream is at expected, otherwise a *VersionMismatchError.
func CheckExpected(stream journal.StreamID, expected, actual uint64) error {
	if expected != actual {
		return &journal.VersionMismatchError{Stream: stream, Expected: expected, Actual: actual}
	}
	return nil
}
