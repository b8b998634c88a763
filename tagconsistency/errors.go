package tagconsistency

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// Sentinel errors of the executor; match them with errors.Is.
var (
	// ErrConflict: the DCB append was rejected because events reached a
	// reserved tag, or matched the command's query, without passing through
	// the tags' owners (something bypassed the actors). The executor never
	// retries it: the owners reload and the caller decides whether to run the
	// command again. A ConflictError also matches
	// journal.ErrAppendConditionFailed or journal.ErrVersionMismatch,
	// whichever the journal reported.
	ErrConflict = errors.New("tagconsistency: conflict")
	// ErrReservationTimeout: a tag stayed busy longer than its owner's
	// reservation timeout (TagOwners.Reserve). A ReservationTimeoutError
	// names the tag. It is the one reservation-timeout error: owners return
	// it, and the executor adds the command's name.
	ErrReservationTimeout = errors.New("tagconsistency: reservation timeout")
	// ErrReservationLost is returned by Grantor.Confirm or Cancel when the
	// reservation is no longer held: it outlived the owner's hold limit and
	// was cancelled, or the owner stopped (lease lost).
	ErrReservationLost = errors.New("tagconsistency: reservation no longer held")
	// ErrInvalidCommand: the command is malformed (nothing was reserved or
	// written), or its decision is (nothing was written).
	ErrInvalidCommand = errors.New("tagconsistency: invalid command")
)

// ConflictError details ErrConflict: the command, the reserved streams and
// the journal's error.
type ConflictError struct {
	Command string
	Streams []journal.StreamID
	Err     error // wraps journal.ErrAppendConditionFailed or journal.ErrVersionMismatch
}

func (e *ConflictError) Error() string {
	names := make([]string, len(e.Streams))
	for i, s := range e.Streams {
		names[i] = s.String()
	}
	return fmt.Sprintf("tagconsistency: conflict in command %q on %s: events were appended without passing through the tags' owners (%v); the owners reload from the journal, run the command again if it still applies",
		e.Command, strings.Join(names, ", "), e.Err)
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the journal's error.
func (e *ConflictError) Unwrap() error { return e.Err }

// ReservationTimeoutError details ErrReservationTimeout: the tag that stayed
// busy and how long the command waited for it.
type ReservationTimeoutError struct {
	// Command is the DCB command's name; empty when an owner reports it.
	Command string
	Stream  journal.StreamID
	Waited  time.Duration
}

func (e *ReservationTimeoutError) Error() string {
	if e.Command == "" {
		return fmt.Sprintf("tagconsistency: reserving tag %s waited %s, past the reservation timeout; the tag is busy: retry later or raise runtime.Config.ReservationTimeout",
			e.Stream, e.Waited.Round(time.Millisecond))
	}
	return fmt.Sprintf("tagconsistency: command %q waited %s to reserve tag %s, past the reservation timeout; the tag is busy: retry later, raise runtime.Config.ReservationTimeout or reduce contention on it",
		e.Command, e.Waited.Round(time.Millisecond), e.Stream)
}

// Is matches ErrReservationTimeout.
func (e *ReservationTimeoutError) Is(target error) bool { return target == ErrReservationTimeout }
