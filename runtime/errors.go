package runtime

import (
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/usercode"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Errors of the runtime, matched with errors.Is; IsRetryable tells which a
// retry can overcome.
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
	ErrForeignTags = actors.ErrForeignTags
	// ErrPanic: the command's user code panicked (see PanicError).
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
	ErrOverloaded = actors.ErrOverloaded
	// ErrLeaseLost: the runtime cannot prove it holds its node session
	// (paused past the session timeout, database unreachable, another live
	// process with its NodeID); nothing was decided, written or answered
	// from a cache. Retryable.
	ErrLeaseLost = actors.ErrLeaseLost
	// ErrShutdown: Shutdown has started.
	ErrShutdown = actors.ErrShutdown
	// ErrConflict: a DCB append found events that reached its tags bypassing
	// their actors (*ConflictError). Never retried: the actors
	// re-read their streams; the caller decides whether to execute again.
	ErrConflict = tagconsistency.ErrConflict
	// ErrReservationTimeout: a tag stayed busy past Config.ReservationTimeout
	// (*ReservationTimeoutError names it).
	ErrReservationTimeout = tagconsistency.ErrReservationTimeout
	// ErrInvalidCommand: a DCB command or its decision is malformed, as the
	// message says; nothing was written.
	ErrInvalidCommand = tagconsistency.ErrInvalidCommand
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

// PanicError (ErrPanic) carries the value, phase and stack of a panic in an
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
	return fmt.Sprintf("runtime: another live process opened node ID %q, so this process stopped serving for good and will not claim the ID back: "+
		"two live processes must never share a node ID; give every process its own Config.NodeID that stays the same across its restarts "+
		"(the pod name of a StatefulSet, or the host name plus a per-process name when one host runs several), then restart this process", e.node)
}

// Is matches journal.ErrNodeSuperseded and ErrLeaseLost.
func (e *twinNodeError) Is(target error) bool {
	return target == journal.ErrNodeSuperseded || target == ErrLeaseLost
}

// Unwrap returns the error the runtime saw.
func (e *twinNodeError) Unwrap() error { return e.cause }

// ConflictError details ErrConflict, ReservationTimeoutError
// ErrReservationTimeout (naming the tag).
type (
	ConflictError           = tagconsistency.ConflictError
	ReservationTimeoutError = tagconsistency.ReservationTimeoutError
)
