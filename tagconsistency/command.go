package tagconsistency

import (
	"github.com/scribe-es/scribe/journal"
)

// Command is one DCB command: it decides from the events matching Query, folded
// into a state of type S, and returns the events to append. A Command value is
// usually built per invocation (a function of the command's arguments), and its
// functions must be pure: they may run on any goroutine, must not block, and
// must not keep the records they are given.
type Command[S any] struct {
	// Name identifies the command in errors, spans and metrics ("Enrol").
	// Required.
	Name string
	// Query selects the events the decision depends on. Every item must name
	// at least one tag: the executor reserves every tag named by any item, and
	// a tag-less item could match events that no reserved owner serializes.
	// All events of the query live in Query.Partition.
	Query journal.Query
	// Tags lists further tags the decided events may carry beyond those of
	// Query; they are reserved too. An event carrying a tag that is neither in
	// Query nor in Tags fails the command with ErrInvalidCommand.
	Tags []journal.Tag
	// Initial returns the state before any event. Nil means the zero S.
	Initial func() S
	// Evolve folds one matching record into the state, in ascending position
	// order, and returns the new state. It may modify and return its input.
	// The executor keeps folded states between executions of commands with
	// the same Name and Query (see Config.FoldCacheSize), so Evolve (and
	// Initial) must depend on nothing but their arguments and what Name and
	// Query determine. Required.
	Evolve func(S, journal.Record) S
	// FromStates, when set, builds the state from the owners' cached states
	// (Reservation.State and Version of every reserved stream, keyed by
	// tag) instead of folding the query's events; returning false falls back
	// to folding. Use it when the tags' aggregates already hold what the
	// decision needs: no journal read at all. The append condition then
	// covers everything after the newest Reservation.LastPosition, so the
	// owners must report it. Optional.
	FromStates func(held map[journal.Tag]Held) (S, bool)
	// Decide returns the events to append (each with its tags), none to do
	// nothing, or a domain error that Execute returns unchanged. It must not
	// modify the state. Event IDs left nil are filled in. Required.
	Decide func(S) ([]journal.Event, error)
}

// Options carry the per-execution context of a command. All fields are optional.
type Options struct {
	// IdempotencyKey, when set, makes the execution idempotent: the IDs of the
	// events (those Decide leaves nil) are derived from the partition, the
	// command name and the key, and when an execution with the same key was
	// already stored its records are returned (Result.Duplicate) without
	// deciding again. The key is also stored in each event's metadata.
	IdempotencyKey string
	// Metadata gives defaults for the metadata of every event: each field that
	// an event leaves empty is taken from here. The W3C trace context of the
	// execution span is filled in when the event has none.
	Metadata journal.Metadata
}

// Result reports a successful execution.
type Result struct {
	// Records are the appended records, in append order (none when Decide
	// returned no events).
	Records []journal.Record
	// Duplicate is true when the idempotency key had already been executed:
	// Records are the first execution's and nothing was written.
	Duplicate bool
}

// Held is what a command's FromStates gets of one reserved stream: the
// owner's confirmed state and the stream's version it is at (0: the stream
// has no events).
type Held struct {
	State   any
	Version uint64
}
