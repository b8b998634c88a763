package actors

import (
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

var (
	// ErrShutdown is returned for requests made after Host.Shutdown started.
	ErrShutdown = errors.New("actors: host is shut down; create a new runtime to execute commands")
	// ErrNoAggregate is returned for a command on a stream whose tag group has
	// no registered aggregate.
	ErrNoAggregate = errors.New("actors: no aggregate is registered for the stream's tag group")
	// ErrPanic matches every *PanicError.
	ErrPanic = errors.New("actors: user code panicked")
	// ErrReservationTimeout matches every *ReservationTimeoutError.
	ErrReservationTimeout = errors.New("actors: reservation timed out")
	// ErrReservationLost is returned by Confirm or Cancel when the reservation
	// is no longer held: it outlived the reservation timeout and was cancelled
	// by the actor, or the actor stopped (session lost).
	ErrReservationLost = errors.New("actors: reservation no longer held")
	// ErrLeaseLost is returned for a request that arrived while this host
	// could not prove that it still holds its node session: the last
	// successful renewal was sent longer ago than the session timeout minus a
	// safety margin (the process was paused, or the database could not be
	// reached), or another live process opened the same node ID (then the
	// error also matches journal.ErrNodeSuperseded). The request was not
	// decided and nothing was written; nothing was answered from the cache.
	// Retryable: the host renews (or another node takes the stream over).
	ErrLeaseLost = errors.New("actors: the node's lease could not be confirmed valid")
	// ErrOverloaded is returned at once, before anything is queued, when a
	// stream's queue (Config.MaxQueue) or the host's pending requests
	// (Config.MaxPending) are full, when a command's deadline leaves less
	// time than the stream's recent appends take, or when the stream sheds
	// by queueing delay (Config.QueueDelayTarget). Nothing was decided or
	// written. Retryable after a back-off.
	ErrOverloaded = errors.New("actors: overloaded")
	// ErrForeignTags is returned for an aggregate command whose decided
	// events carry tags besides the stream's own. The owners of those tags
	// (their stream actors) would not be reserved, so the append would bypass
	// them and make them fail their next command with a version mismatch.
	// Events with several tags are appended through DCB commands, which
	// reserve every tag's owner. Nothing of the command was appended.
	ErrForeignTags = errors.New("actors: an aggregate's event carries tags of other streams")
)

// PanicError reports that user code panicked: an aggregate's Decide, Evolve
// or codec, or a DCB command's Initial, FromStates, Evolve or Decide. Only the
// command that triggered it fails and nothing of it was written; an
// aggregate's actor rebuilds its state from the journal before it serves
// again, a DCB command's reservations are cancelled. It is the one panic
// error of the engine (package tagconsistency returns it too).
type PanicError struct {
	// Stream is the aggregate's stream; zero for a DCB command.
	Stream journal.StreamID
	// Command is the DCB command's name; empty for an aggregate command.
	Command string
	// Phase names the user function: "decide", "evolve", "encode",
	// "decode", and for DCB commands also "initial" and "fromstates".
	Phase string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("user code panicked in %s of DCB command %q: %v (fix the command's %s function; nothing was written)", e.Phase, e.Command, e.Value, e.Phase)
	}
	return fmt.Sprintf("actors: user code panicked in %s on stream %s: %v (fix the aggregate's %s function; the command was not applied)", e.Phase, e.Stream, e.Value, e.Phase)
}

// Is matches ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// ReservationTimeoutError reports a DCB reservation that waited longer than
// its timeout for the stream's actor, naming the tag.
type ReservationTimeoutError struct {
	Stream journal.StreamID
	Tag    journal.Tag
}

func (e *ReservationTimeoutError) Error() string {
	return fmt.Sprintf("actors: reservation of tag %q (stream %s) timed out waiting for the stream's actor; the tag is busy: retry later or raise the reservation timeout", e.Tag, e.Stream)
}

// Is matches ErrReservationTimeout.
func (e *ReservationTimeoutError) Is(target error) bool { return target == ErrReservationTimeout }

// sessionLost wraps cause so that errors.Is matches both journal.ErrSessionExpired
// and cause.
func sessionLost(stream journal.StreamID, cause error) error {
	if errors.Is(cause, journal.ErrSessionExpired) {
		return fmt.Errorf("actors: stream %s lost its lease, the actor stopped: %w", stream, cause)
	}
	return fmt.Errorf("actors: stream %s lost its lease, the actor stopped: %w (%w)", stream, journal.ErrSessionExpired, cause)
}

// isSessionError reports a fencing failure.
func isSessionError(err error) bool {
	return errors.Is(err, journal.ErrSessionExpired) || errors.Is(err, journal.ErrInvalidSession)
}
