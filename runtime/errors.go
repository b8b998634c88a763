package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/usercode"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Errors of the runtime, matched with errors.Is; IsRetryable tells which a
// retry can overcome.
//
// The runtime's sentinels are its own: a service matches runtime.ErrX and
// never needs package actors or tagconsistency. Those engines keep their
// own sentinels (ErrOverloaded of actors, ErrConflict of tagconsistency,
// ...), which they and the cluster's wire use among themselves; every
// exported call of the runtime passes what it returns through one
// translation (engineErrors, translate) at its boundary, so an engine's error
// also matches the runtime sentinel of the same meaning while staying in
// the chain (its text, its own sentinel and typed details are kept). The
// two typed details, ConflictError and ReservationTimeoutError, are the
// runtime's too; errors.As finds them on every path where the engine gave
// its typed error (a local DCB command; details do not cross cluster
// members). Two sentinels are defined below every engine and kept there:
// ErrConfiguration (journal's: journals, engines and the runtime all
// report it) and ErrPanic with PanicError (internal/usercode, which every
// package that runs user code shares).
var (
	// ErrConfiguration (journal.ErrConfiguration): New cannot start on the
	// journal as configured (database unreachable or unknown, credentials
	// refused, schema not migrated or from a newer incompatible build). Not
	// retryable: the message says what to fix.
	ErrConfiguration = journal.ErrConfiguration
	// ErrRegistration matches every error of the Register functions and
	// Uses; the message names what is wrong.
	ErrRegistration = errors.New("runtime: invalid registration")
	// ErrUnknownAggregate: the target names no registered aggregate.
	ErrUnknownAggregate = errors.New("runtime: unknown aggregate")
	// ErrUnknownEvent: an event's Go type or stored type name is unregistered.
	ErrUnknownEvent = errors.New("runtime: unknown event type")
	// ErrForeignTags: an aggregate's events carry tags besides their stream's
	// (see Tagged); nothing was appended. Append them with a DCB command.
	ErrForeignTags = errors.New("runtime: an aggregate's event carries tags of other streams")
	// ErrPanic (internal/usercode's): the command's user code panicked (see
	// PanicError).
	ErrPanic = usercode.ErrPanic
	// ErrIdempotencyKeyReused: the key was already executed with another
	// command (type or content) on the stream, or by the DCB command; nothing
	// was executed (see KeyReusedError). Not retryable: use a new key for a
	// new command, the same key only to retry the identical command.
	ErrIdempotencyKeyReused = errors.New("runtime: idempotency key reused for a different command")
	// ErrOverloaded: refused at once, undecided, as the stream's queue or the
	// runtime's pending commands are full (Config.MaxQueue, MaxPending), the
	// deadline is too near to be met, or the stream sheds by queueing delay
	// (QueueDelayTarget). Retry after a back-off.
	ErrOverloaded = errors.New("runtime: overloaded")
	// ErrLeaseLost: the runtime cannot prove it holds its node session
	// (paused past the session timeout, database unreachable, another live
	// process with its NodeID); nothing was decided, written or answered
	// from a cache. Retryable.
	ErrLeaseLost = errors.New("runtime: the node's lease could not be confirmed valid")
	// ErrShutdown: Shutdown has started.
	ErrShutdown = errors.New("runtime: shut down")
	// ErrConflict: a DCB append found events that reached its tags bypassing
	// their actors (*ConflictError). Never retried: the actors
	// re-read their streams; the caller decides whether to execute again.
	ErrConflict = errors.New("runtime: DCB conflict")
	// ErrReservationTimeout: a tag stayed busy past Config.ReservationTimeout
	// (*ReservationTimeoutError names it).
	ErrReservationTimeout = errors.New("runtime: reservation timeout")
	// ErrInvalidCommand: a DCB command or its decision is malformed, as the
	// message says; nothing was written.
	ErrInvalidCommand = errors.New("runtime: invalid DCB command")
	// ErrNodeUnavailable (cluster): the member hosting the stream cannot be
	// reached, left or no longer hosts it. Retryable (with the same
	// idempotency key if the error matches journal.ErrOutcomeUnknown): the
	// stream moves to another member (once its lease expires, if it died).
	ErrNodeUnavailable = errors.New("runtime: cluster member unavailable")
	// ErrNodeFenced (cluster): this member left the cluster for good, as
	// another live process runs with its NodeID (the error also matches
	// journal.ErrNodeSuperseded and ErrLeaseLost), and executes nothing more.
	// Send commands to another member; restart this one with its own NodeID.
	ErrNodeFenced = errors.New("runtime: cluster member fenced")
	// ErrUnknownCommand: a command crossing members has a type missing from
	// the caller's or the host's cluster Commands; or a command reached an
	// AggregateOf by an untyped path and is not of its command type; or
	// Seed ran in cluster mode. Nothing was decided.
	ErrUnknownCommand = errors.New("runtime: unknown command type")
	// ErrNoKeyStore: Erase without Config.KeyStore.
	ErrNoKeyStore = errors.New("runtime: no key store configured")
)

// engineErrors pairs each engine sentinel with the runtime's of the same
// meaning (translate adds the second to an error matching the first).
var engineErrors = [...]struct{ engine, runtime error }{
	{actors.ErrOverloaded, ErrOverloaded},
	{actors.ErrLeaseLost, ErrLeaseLost},
	{actors.ErrShutdown, ErrShutdown},
	{actors.ErrForeignTags, ErrForeignTags},
	{tagconsistency.ErrConflict, ErrConflict},
	{tagconsistency.ErrReservationTimeout, ErrReservationTimeout},
	{tagconsistency.ErrInvalidCommand, ErrInvalidCommand},
}

// translate returns err as the runtime's API returns it: an error of the
// engines (actors, tagconsistency, the cluster member) also matches the
// runtime sentinel of the same meaning, and the engine's typed details
// are found as the runtime's (ConflictError, ReservationTimeoutError).
// err stays in the chain. Every exported call returning an engine's error
// passes it here once; nil costs nothing.
func translate(err error) error {
	if err == nil {
		return nil
	}
	for _, p := range engineErrors {
		if !errors.Is(err, p.engine) || errors.Is(err, p.runtime) {
			continue
		}
		switch p.runtime {
		case ErrConflict:
			var c *tagconsistency.ConflictError
			if errors.As(err, &c) {
				err = &ConflictError{Command: c.Command, Streams: c.Streams, Err: c.Err, cause: err}
				continue
			}
		case ErrReservationTimeout:
			var r *tagconsistency.ReservationTimeoutError
			if errors.As(err, &r) {
				err = &ReservationTimeoutError{Command: r.Command, Stream: r.Stream, Waited: r.Waited, cause: err}
				continue
			}
		}
		err = &engineError{err: err, is: p.runtime}
	}
	return err
}

// engineError is an engine's error as the runtime returns it: it also
// matches the runtime sentinel is; Error and the chain are the engine's.
type engineError struct {
	err error
	is  error
}

func (e *engineError) Error() string { return e.err.Error() }

// Is matches the runtime's sentinel.
func (e *engineError) Is(target error) bool { return target == e.is }

// Unwrap returns the engine's error.
func (e *engineError) Unwrap() error { return e.err }

// ConflictError details ErrConflict: the DCB command, the streams of the
// tags it had reserved, and the journal's error.
type ConflictError struct {
	Command string
	Streams []journal.StreamID
	Err     error // matches journal.ErrAppendConditionFailed or journal.ErrVersionMismatch

	cause error // the engine's error, whose text this is
}

func (e *ConflictError) Error() string { return e.cause.Error() }

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the engine's error (which wraps Err).
func (e *ConflictError) Unwrap() error { return e.cause }

// ReservationTimeoutError details ErrReservationTimeout: the tag's stream
// that stayed busy and how long the command waited for it.
type ReservationTimeoutError struct {
	// Command is the DCB command's name.
	Command string
	Stream  journal.StreamID
	Waited  time.Duration

	cause error // the engine's error, whose text this is
}

func (e *ReservationTimeoutError) Error() string { return e.cause.Error() }

// Is matches ErrReservationTimeout.
func (e *ReservationTimeoutError) Is(target error) bool { return target == ErrReservationTimeout }

// Unwrap returns the engine's error.
func (e *ReservationTimeoutError) Unwrap() error { return e.cause }

// PanicError (ErrPanic; internal/usercode's, see above) carries the value, phase and stack of a panic in an
// aggregate's (Stream set) or DCB command's (Command set) user code. Only
// that command failed, writing nothing; an aggregate's actor rebuilt its
// state from the journal before serving the others.
type PanicError = usercode.PanicError

// twinNodeError is every error of a runtime after another live process
// opened its NodeID (the journal superseded its node session while it ran):
// one sentence saying so and what to do, instead of the journal's nested
// session errors. It matches journal.ErrNodeSuperseded and ErrLeaseLost,
// and through its cause every sentinel the underlying error matched.
type twinNodeError struct {
	node  string
	cause error
}

func (e *twinNodeError) Error() string {
	return fmt.Sprintf("runtime: another live process opened node ID %q, so this one stopped serving for good: "+
		"give every process its own Config.NodeID, stable across restarts (a StatefulSet's pod name), then restart it", e.node)
}

// Is matches journal.ErrNodeSuperseded and ErrLeaseLost.
func (e *twinNodeError) Is(target error) bool {
	return target == journal.ErrNodeSuperseded || target == ErrLeaseLost
}

// Unwrap returns the error the runtime saw.
func (e *twinNodeError) Unwrap() error { return e.cause }
