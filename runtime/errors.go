package runtime

import (
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

var (
	// ErrShutdown is returned by Execute after Shutdown started.
	ErrShutdown = actors.ErrShutdown
	// ErrUnknownAggregate is returned by Execute for a target whose aggregate
	// is not registered.
	ErrUnknownAggregate = errors.New("runtime: unknown aggregate")
	// ErrUnknownEvent is returned when an aggregate decides an event whose Go
	// type is not registered, or a stored event's type name is unknown.
	ErrUnknownEvent = errors.New("runtime: unknown event type")
	// ErrRegistration matches every error of the Register functions.
	ErrRegistration = errors.New("runtime: invalid registration")
	// ErrPanic matches the error of a command whose user code panicked (a
	// *PanicError carrying the panic value), aggregate or DCB command.
	ErrPanic = actors.ErrPanic
	// ErrLeaseLost is returned when this runtime cannot prove it still holds
	// its node session (paused past the session timeout, the database
	// unreachable, or another live process with the same NodeID): nothing
	// was decided, written or answered from a cache. Retryable.
	ErrLeaseLost = actors.ErrLeaseLost
	// ErrOverloaded is returned at once when a stream's queue or the
	// runtime's pending commands are full (Config.MaxQueue,
	// Config.MaxPending), when the command's deadline is too near to be
	// met, or when the stream sheds by queueing delay
	// (Config.QueueDelayTarget): nothing was decided. Retryable after a
	// back-off.
	ErrOverloaded = actors.ErrOverloaded
	// ErrConfiguration is journal.ErrConfiguration: New could not start on
	// the journal as configured (the database unreachable at start, the
	// credentials refused, the database unknown, the schema not migrated or
	// migrated by a newer incompatible build). Not retryable: the error says
	// what to fix. The rule: a store that cannot be reached when New starts
	// is a configuration error (fail fast); once New has returned, the same
	// failure is an outage (journal.ErrUnavailable, retryable).
	ErrConfiguration = journal.ErrConfiguration
	// ErrForeignTags is returned for an aggregate command whose events carry
	// tags besides the stream's own (a Tagged event type): those tags' owners
	// would be bypassed. Append such events through a DCB command
	// (RegisterDCB), which reserves every tag's owner. Nothing was appended.
	ErrForeignTags = actors.ErrForeignTags
)

// PanicError is the error of a command whose user code panicked (an
// aggregate's, with Stream set, or a DCB command's, with Command set): it
// carries the panic value, the phase and the stack. Only that command failed
// and nothing of it was written; an aggregate's actor rebuilt its state from
// the journal before serving the others.
type PanicError = actors.PanicError

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
