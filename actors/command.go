package actors

import (
	"github.com/scribe-es/scribe/journal"
)

// Command is one command for a stream's aggregate.
type Command struct {
	// Payload is passed to the aggregate's Decide.
	Payload any
	// Metadata is copied onto every event the command produces (the actor sets
	// Partition, CreatedAt when zero, and the trace context). A non-empty
	// IdempotencyKey makes the command execute at most once per stream: a
	// repeat returns the first result (Duplicate set).
	Metadata journal.Metadata
}

// Result is the outcome of a command that was decided and, if it produced
// events, durably appended.
type Result struct {
	// Records are the command's own stored events (none when Decide returned none).
	Records []journal.Record
	// Version is the stream's version after the command's events.
	Version uint64
	// State is the aggregate state after the command's events. For a duplicate
	// it is the actor's current state.
	State any
	// Duplicate reports that the idempotency key was already executed: Records
	// are the events stored the first time.
	Duplicate bool
}
