package runtime

import (
	"errors"

	"github.com/scribe-es/scribe/actors"
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
	// ErrPanic matches the error of a command whose aggregate code panicked
	// (an *actors.PanicError carrying the panic value).
	ErrPanic = actors.ErrPanic
)

// PanicError is the error of a command whose aggregate code panicked: it
// carries the panic value and stack. Only that command failed; the stream's
// actor rebuilt its state from the journal before serving the others.
type PanicError = actors.PanicError
