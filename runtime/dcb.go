package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
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
// A definition takes one of two forms.
//
// Over aggregate streams (Uses set, S = DCBStates): the command decides from
// the states of the aggregates listed in Uses, each stream's state folded by
// its aggregate's own Evolve exactly as the stream's actor holds it (from
// its newest usable snapshot, sealed ones included, and the journal; the
// same fold as State). Decide reads them with the handles' typed accessors
// (AggregateState.Of); DCBResult.States holds them after the appended
// events. The Query names the streams, one item each and no types
// (AggregateState.Items); Initial, Evolve and FromStates stay nil. This is
// the form for tags owned by aggregates: no fold is written twice, and the
// states come from the actors with no journal read (when an owner holds no
// state, as a cluster member without the aggregate registered, the streams
// are folded from the journal with the same aggregates' Evolve).
//
// Raw (Uses nil): the state S comes from FromStates when it is set (the
// states the tags' actors hold, untyped), otherwise from folding the
// query's events with Evolve: the form for tags no aggregate owns. Folds are
// cached per Name and Query and continue from where they stopped, but a
// command whose tags vary a lot mostly folds its tags' whole history.
//
// Every event type a Query names must be registered with RegisterEvent:
// RegisterDCB checks the types of Query's answer for the zero command, and
// Execute checks every command's query, so a misspelt type is an error
// naming it rather than a query that silently matches nothing.
type DCB[C, S any] struct {
	// Name identifies the command type in errors, spans and metrics.
	// Required.
	Name string
	// Query returns the events a command depends on: items of registered
	// event type names (any of) and tags (all of). Every item must name at
	// least one tag. With Uses, each item names one stream of a used
	// aggregate and no types. Required.
	Query func(command C) journal.Query
	// Uses lists the aggregates (handles returned by runtime.Uses) whose
	// states the command decides from; S must then be DCBStates, and
	// Initial, Evolve and FromStates nil. Optional: nil is the raw form.
	Uses []AggregateUse
	// Tags returns further tags the decided events may carry beyond the
	// query's (for example a fresh "transfer:<id>" tag); they are reserved
	// too. Optional.
	Tags func(command C) []journal.Tag
	// Initial returns the state before any event. Optional: nil means the
	// zero S. Raw form only.
	Initial func(command C) S
	// Evolve applies one matching event to the state, in the journal's
	// order, and returns the new state. The runtime keeps folded states
	// between commands with equal Name and Query, so Evolve and Initial may
	// use only what the command's Query is made from. Required in the raw
	// form; nil with Uses.
	Evolve func(command C, state S, event DCBEvent) S
	// FromStates, when set, builds the state from the aggregate states the
	// tags' stream actors hold (keyed by tag; nil for a tag whose group has
	// no aggregate) instead of folding the query's events: no journal read.
	// Returning false falls back to folding. Optional; raw form only.
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
	rt   *Runtime
	def  DCB[C, S]
	aggs *dcbAggregates // nil in the raw form
	x    *tagconsistency.Executor
}

// DCBResult is the outcome of an executed DCB command.
type DCBResult struct {
	// Records are the events the command appended (none if it decided
	// none), as stored: positions, per-tag versions, hash links.
	Records []journal.Record
	// Duplicate reports that the idempotency key had already been executed:
	// Records are the first execution's records and nothing was decided.
	Duplicate bool
	// States, for a command with Uses that decided (Duplicate false), are
	// the states of its used aggregates' streams after the decision: the
	// states it decided from, each evolved by its aggregate's Evolve with
	// the appended events that carry its tag, which is what the streams'
	// actors hold once Execute returns (the versions are in Records). Read
	// them with AggregateState.Of or Lookup. Empty for a duplicate, in the
	// raw form (whose folded S the executor keeps for the next command, so
	// it cannot be handed out), and when an aggregate's Evolve panicked on
	// the appended events (they are stored all the same; the stream's actor
	// reports the panic).
	States DCBStates
}

// RegisterDCB registers a DCB command type and returns the handle that
// executes it. The events it decides and the event types its Query names
// must be registered with RegisterEvent first: a Query that names an
// unregistered type for the zero command fails registration with
// ErrRegistration naming the type. The aggregates owning the tags it writes
// (if any) must handle those events in their Evolve, since their actors
// adopt them. With Uses, S must be DCBStates and the handles must come from
// runtime.Uses on rt.
func RegisterDCB[C, S any](rt *Runtime, def DCB[C, S]) (*DCBCommand[C, S], error) {
	if def.Name == "" {
		return nil, regErr("DCB command has no Name; name it for errors, spans and metrics")
	}
	var aggs *dcbAggregates
	if len(def.Uses) > 0 {
		var err error
		if aggs, err = registerAggregateForm(rt, def); err != nil {
			return nil, err
		}
	} else if def.Evolve == nil {
		return nil, regErr("DCB command %q: Query, Evolve and Decide are all required (or Uses instead of Evolve, to decide from aggregates' states)", def.Name)
	}
	if def.Query == nil || def.Decide == nil {
		return nil, regErr("DCB command %q: Query and Decide are both required", def.Name)
	}
	if err := checkDCBQuery(rt, def.Name, def.Query, aggs); err != nil {
		return nil, err
	}
	x, err := tagconsistency.New(tagconsistency.Config{
		Journal:        rt.cfg.Journal,
		Owners:         rt.tagOwners(),
		EndTimeout:     rt.cfg.RequestTimeout,
		TracerProvider: rt.cfg.TracerProvider,
		MeterProvider:  rt.cfg.MeterProvider,
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: DCB command %q: %w", def.Name, err)
	}
	return &DCBCommand[C, S]{rt: rt, def: def, aggs: aggs, x: x}, nil
}

// decodeFailure carries an event decoding error out of Evolve (which cannot
// return one) as a panic value the executor recovers.
type decodeFailure struct{ err error }

// Execute runs command once and returns its appended records (and, with
// Uses, the states after the decision), or:
//   - the domain error of Decide, as is;
//   - a *ConflictError (ErrConflict) when events bypassed the tags' actors;
//   - a *ReservationTimeoutError (ErrReservationTimeout) naming a busy tag;
//   - ErrInvalidCommand or ErrUnknownEvent for a faulty definition (a query
//     naming an unregistered event type matches both), ErrPanic
//     (a *PanicError naming the command, with the value) when its
//     Evolve, FromStates or Decide panicked (nothing was written), ErrShutdown
//     after Shutdown;
//   - ctx's error when ctx ended before the append (nothing was written).
//
// Options: WithIdempotencyKey makes the execution idempotent per DCB command
// name and partition (a repeat of the same command returns the first records
// with Duplicate set, also after restarts; the event IDs are derived from the
// key; the key with another command fails with ErrIdempotencyKeyReused);
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
	if md.IdempotencyKey != "" && md.CommandHash == "" {
		md.CommandHash = commandHash(d.rt.cfg.Codec, command)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.rt.cfg.RequestTimeout)
		defer cancel()
	}
	def, reg := d.def, d.rt.reg
	query := def.Query(command)
	if err := d.rt.checkQueryTypes(def.Name, query); err != nil {
		return DCBResult{}, err
	}
	if d.aggs != nil {
		if err := d.aggs.checkQuery(def.Name, query); err != nil {
			return DCBResult{}, err
		}
	}
	var (
		encodeErr error
		decided   S     // the state Decide ran on (it runs once)
		values    []any // the events it decided
	)
	var extra []journal.Tag
	if def.Tags != nil {
		extra = def.Tags(command)
	}
	initial, evolve, fromStates := def.Initial, def.Evolve, def.FromStates
	if d.aggs != nil {
		initial, evolve, fromStates = aggregateForm[C, S](d.aggs, d.aggs.streamTags(query, extra))
	}
	cmd := tagconsistency.Command[S]{
		Name:  def.Name,
		Query: query,
		Evolve: func(s S, r journal.Record) S {
			ev, erased, err := reg.decodeEvent(ctx, &r)
			if err != nil {
				panic(decodeFailure{err})
			}
			return evolve(command, s, DCBEvent{Value: ev, Record: &r, Erased: erased})
		},
		Decide: func(s S) ([]journal.Event, error) {
			evs, err := def.Decide(command, s)
			if err != nil {
				return nil, err
			}
			decided, values = s, evs
			out := make([]journal.Event, len(evs))
			for i, ev := range evs {
				if out[i], encodeErr = reg.encodeEvent(ctx, md.Partition, "", ev); encodeErr != nil {
					return nil, encodeErr
				}
			}
			return out, nil
		},
	}
	cmd.Tags = extra
	if initial != nil {
		cmd.Initial = func() S { return initial(command) }
	}
	if fromStates != nil {
		cmd.FromStates = func(states map[journal.Tag]any) (S, bool) { return fromStates(command, states) }
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
	if res.Duplicate && len(res.Records) > 0 {
		// The one reused-key rule, as for aggregate commands: the same key
		// with the same command answers the first result; with another
		// command it is refused.
		if stored := res.Records[0].Metadata.CommandHash; stored != "" && md.CommandHash != "" && stored != md.CommandHash {
			return DCBResult{}, &KeyReusedError{Command: def.Name, Key: md.IdempotencyKey}
		}
	}
	out := DCBResult{Records: res.Records, Duplicate: res.Duplicate}
	if d.aggs != nil && !res.Duplicate && len(values) == len(res.Records) {
		out.States = d.aggs.afterDecision(any(decided).(DCBStates), values, res.Records)
	}
	return out, nil
}
