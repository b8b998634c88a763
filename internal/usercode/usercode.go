package usercode

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/scribe-es/scribe/journal"
)

// ErrPanic matches every *PanicError.
var ErrPanic = errors.New("scribe: user code panicked")

// PanicError reports that user code panicked: an aggregate's Decide, Evolve
// or codec, or a DCB command's Initial, FromStates, Evolve or Decide. Only
// the command that triggered it fails and nothing of it was written; an
// aggregate's actor rebuilds its state from the journal before it serves
// again, a DCB command's reservations are cancelled.
type PanicError struct {
	// Stream is the aggregate's stream; zero for a DCB command.
	Stream journal.StreamID
	// Command is the DCB command's name; empty for an aggregate command.
	Command string
	// Phase names the user function: "decide", "evolve", "encode",
	// "decode", and for DCB commands also "initial" and "fromstates".
	Phase string
	// Value is what the code panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("user code panicked in %s of DCB command %q: %v (fix the command's %s function; nothing was written)", e.Phase, e.Command, e.Value, e.Phase)
	}
	return fmt.Sprintf("user code panicked in %s on stream %s: %v (fix the aggregate's %s function; the command was not applied)", e.Phase, e.Stream, e.Value, e.Phase)
}

// Is matches ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Run runs fn, turning a panic into a *PanicError naming the stream (an
// aggregate's) or the command (a DCB command's) and the phase.
func Run(stream journal.StreamID, command, phase string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Stream: stream, Command: command, Phase: phase, Value: v, Stack: debug.Stack()}
		}
	}()
	return fn()
}
