package actors

import (
	"context"

	"github.com/scribe-es/scribe/journal"
)

// Model is what a stream actor needs from the aggregate that owns its stream:
// the decider's pure functions and the codecs for events and state. Package
// runtime builds a Model from a typed aggregate registration.
//
// A Model is shared by every actor of its aggregate, so all methods must be safe
// for concurrent use; Decide and Evolve must be pure (Evolve returns a new state
// and never mutates its input: the actor keeps the confirmed state while it
// decides a batch against a working copy). A panic in any method is recovered
// by the actor and reported as a *usercode.PanicError (runtime.PanicError).
type Model interface {
	// Name is the aggregate's name (the tag group of its streams).
	Name() string
	// Initial returns the state of an empty stream.
	Initial() any
	// Decide returns the events a command produces against state, or a
	// domain error (returned to the caller as is).
	Decide(state any, command any) ([]any, error)
	// Evolve applies one event to state and returns the new state.
	Evolve(state any, event any) any
	// EncodeEvent turns an event decided on stream into a journal event:
	// Type, SchemaVersion, Data and any extra Tags. The actor sets ID, adds
	// the stream's own tag and fills Metadata. It may do I/O bounded by ctx
	// (the command's context), for example fetch the data key that seals
	// the event's personal fields (package erasure).
	EncodeEvent(ctx context.Context, stream journal.StreamID, event any) (journal.Event, error)
	// DecodeEvent turns a stored record back into the event value Evolve
	// takes, upcasting older schema versions and opening sealed personal
	// fields. It may do I/O bounded by ctx (a key store lookup). It must
	// not keep rec once it returns (the value it returns may share rec's
	// Data): recovery passes every record of a replay in one variable.
	DecodeEvent(ctx context.Context, rec *journal.Record) (any, error)
	// StateSchemaVersion stamps snapshots; a snapshot with another schema
	// version is ignored and the stream is replayed instead.
	StateSchemaVersion() int
	// EncodeState and DecodeState serialize the state for snapshots.
	EncodeState(state any) ([]byte, error)
	DecodeState(data []byte) (any, error)
}

// Resolver maps a tag group to the Model of the aggregate registered for it,
// or nil when no aggregate owns that group: such a stream's actor only keeps
// the stream's version and serves DCB reservations (commands fail with
// ErrNoAggregate). It must be safe for concurrent use.
type Resolver func(group string) Model
