package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Errors of DCB commands, matched with errors.Is.
var (
	// ErrConflict: a DCB command's append found events that reached one of
	// its tags without passing through the tags' stream actors (something
	// bypassed the runtime). It is never retried: the actors re-read their
	// streams, and the caller decides whether to execute the command again.
	ErrConflict = tagconsistency.ErrConflict
	// ErrReservationTimeout: a tag stayed busy longer than
	// Config.ReservationTimeout. The error names the tag.
	ErrReservationTimeout = tagconsistency.ErrReservationTimeout
	// ErrInvalidCommand: a DCB command or its decision is malformed (see the
	// message); nothing was written.
	ErrInvalidCommand = tagconsistency.ErrInvalidCommand
)

// ConflictError details ErrConflict: the command, its tags and the journal's
// error (journal.ErrAppendConditionFailed or journal.ErrVersionMismatch).
type ConflictError = tagconsistency.ConflictError

// ReservationTimeoutError details ErrReservationTimeout: the busy tag.
type ReservationTimeoutError = tagconsistency.ReservationTimeoutError

// DCB defines a Dynamic Consistency Boundary command type C: a command that
// decides from the events of several tags, folded into a state S, and
// appends its events atomically across those tags. All functions must be
// pure and safe for concurrent use.
//
// Executing a DCB command reserves every tag its query names at that tag's
// stream actor, in sorted tag order (so concurrent commands never deadlock,
// and a busy tag queues the command instead of failing it), folds the
// matching events, decides, appends once fenced by the actors' leases and
// versions, and hands the new events to the actors, which keep serving their
// aggregate commands consistently. A valid command therefore succeeds at its
// first attempt: there is no retry loop anywhere.
//
// The state comes from FromStates when it is set (the aggregate states the
// tags' actors already hold: no journal read, the fastest path), otherwise
// from folding the query's events. Folds are cached per Name and Query and
// continue from where they stopped, but a command whose tags vary a lot (a
// transfer between any two of many accounts) mostly folds its tags' whole
// history: prefer FromStates for tags owned by aggregates.
type DCB[C, S any] struct {
	// Name identifies the command type in errors, spans and metrics.
	// Required.
	Name string
	// Query returns the events a command depends on: items of registered
	// event type names (any of) and tags (all of). Every item must name at
	// least one tag. Required.
	Query func(command C) journal.Query
	// Tags returns further tags the decided events may carry beyond the
	// query's (for example a fresh "transfer:<id>" tag); they are reserved
	// too. Optional.
	Tags func(command C) []journal.Tag
	// Initial returns the state before any event. Optional: nil means the
	// zero S.
	Initial func(command C) S
	// Evolve applies one matching event to the state, in the journal's
	// order, and returns the new state. The runtime keeps folded states
	// between commands with equal Name and Query, so Evolve and Initial may
	// use only what the command's Query is made from. Required.
	Evolve func(command C, state S, event DCBEvent) S
	// FromStates, when set, builds the state from the aggregate states the
	// tags' stream actors hold (keyed by tag; nil for a tag whose group has
	// no aggregate) instead of folding the query's events: no journal read.
	// Returning false falls back to folding. Optional.
	FromStates func(command C, states map[journal.Tag]any) (S, bool)
	// Decide returns the events to append (values of registered event
	// types, carrying their tags through the Tagged interface), none, or a
	// domain error that Execute returns as is. It must not mutate state.
	// Required.
	Decide func(command C, state S) ([]any, error)
}

// DCBEvent is one event matching a DCB command's query, as its Evolve sees it.
type DCBEvent struct {
	// Value is the event as its registered Go type, upcast to the current
	// schema version.
	Value any
	// Record is the event as stored: tags, position, per-tag versions,
	// metadata. Owned by the callee for the duration of the call.
	Record *journal.Record
	// Erased names the personal fields of Value that read as zero values
	// because their subject was erased (nil when none).
	Erased []string
}

// DCBCommand is a DCB definition registered with a Runtime. Its Execute is
// safe for concurrent use.
type DCBCommand[C, S any] struct {
	rt  *Runtime
	def DCB[C, S]
	x   *tagconsistency.Executor
}

// DCBResult is the outcome of an executed DCB command.
type DCBResult struct {
	// Records are the events the command appended (none if it decided
	// none), as stored: positions, per-tag versions, hash links.
	Records []journal.Record
	// Duplicate reports that the idempotency key had already been executed:
	// Records are the first execution's records and nothing was decided.
	Duplicate bool
}

// RegisterDCB registers a DCB command type and returns the handle that
// executes it. The events it decides must be registered with RegisterEvent;
// the aggregates owning the tags it writes (if any) must handle those events
// in their Evolve, since their actors adopt them.
func RegisterDCB[C, S any](rt *Runtime, def DCB[C, S]) (*DCBCommand[C, S], error) {
	if def.Name == "" {
		return nil, regErr("DCB command has no Name; name it for errors, spans and metrics")
	}
	if def.Query == nil || def.Evolve == nil || def.Decide == nil {
		return nil, regErr("DCB command %q: Query, Evolve and Decide are all required", def.Name)
	}
	x, err := tagconsistency.New(tagconsistency.Config{
		Journal:        rt.cfg.Journal,
		Owners:         rt.tagOwners(),
		ReleaseTimeout: rt.cfg.RequestTimeout,
		TracerProvider: rt.cfg.TracerProvider,
		MeterProvider:  rt.cfg.MeterProvider,
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: DCB command %q: %w", def.Name, err)
	}
	return &DCBCommand[C, S]{rt: rt, def: def, x: x}, nil
}

// decodeFailure carries an event decoding error out of Evolve (which cannot
// return one) as a panic value the executor recovers.
type decodeFailure struct{ err error }

// Execute runs command once and returns its appended records, or:
//   - the domain error of Decide, as is;
//   - a *ConflictError (ErrConflict) when events bypassed the tags' actors;
//   - a *ReservationTimeoutError (ErrReservationTimeout) naming a busy tag;
//   - ErrInvalidCommand or ErrUnknownEvent for a faulty definition, ErrPanic
//     (a *PanicError naming the command, with the value) when its
//     Evolve, FromStates or Decide panicked (nothing was written), ErrShutdown
//     after Shutdown;
//   - ctx's error when ctx ended before the append (nothing was written).
//
// Options: WithIdempotencyKey makes the execution idempotent per DCB command
// name and partition (a repeat returns the first records with Duplicate set,
// also after restarts; the event IDs are derived from the key);
// WithMetadata sets the events' metadata. If ctx ends while the append is in
// flight the outcome may be unknown (journal.ErrOutcomeUnknown): execute
// again with the same idempotency key to find out. Without a deadline on
// ctx, Execute waits at most Config.RequestTimeout.
func (d *DCBCommand[C, S]) Execute(ctx context.Context, command C, opts ...ExecuteOption) (DCBResult, error) {
	var md journal.Metadata
	for _, o := range opts {
		o(&md)
	}
	if md.CreatedAt.IsZero() {
		md.CreatedAt = time.Now().UTC()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.rt.cfg.RequestTimeout)
		defer cancel()
	}
	def, reg := d.def, d.rt.reg
	var encodeErr error
	cmd := tagconsistency.Command[S]{
		Name:  def.Name,
		Query: def.Query(command),
		Evolve: func(s S, r journal.Record) S {
			ev, erased, err := reg.decodeEvent(ctx, &r)
			if err != nil {
				panic(decodeFailure{err})
			}
			return def.Evolve(command, s, DCBEvent{Value: ev, Record: &r, Erased: erased})
		},
		Decide: func(s S) ([]journal.Event, error) {
			evs, err := def.Decide(command, s)
			if err != nil {
				return nil, err
			}
			out := make([]journal.Event, len(evs))
			for i, ev := range evs {
				if out[i], encodeErr = reg.encodeEvent(ctx, md.Partition, "", ev); encodeErr != nil {
					return nil, encodeErr
				}
			}
			return out, nil
		},
	}
	if def.Tags != nil {
		cmd.Tags = def.Tags(command)
	}
	if def.Initial != nil {
		cmd.Initial = func() S { return def.Initial(command) }
	}
	if def.FromStates != nil {
		cmd.FromStates = func(states map[journal.Tag]any) (S, bool) { return def.FromStates(command, states) }
	}
	res, err := tagconsistency.Execute(ctx, d.x, cmd, tagconsistency.Options{IdempotencyKey: md.IdempotencyKey, Metadata: md})
	if err != nil {
		var pe *PanicError
		if errors.As(err, &pe) {
			if df, ok := pe.Value.(decodeFailure); ok {
				return DCBResult{}, fmt.Errorf("runtime: DCB command %q: %w", def.Name, df.err)
			}
			return DCBResult{}, err // matches ErrPanic
		}
		if encodeErr != nil && errors.Is(err, encodeErr) {
			return DCBResult{}, fmt.Errorf("runtime: DCB command %q: %w", def.Name, encodeErr)
		}
		return DCBResult{}, err
	}
	return DCBResult{Records: res.Records, Duplicate: res.Duplicate}, nil
}
