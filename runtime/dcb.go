package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// DCB defines a Dynamic Consistency Boundary command type C: it decides from
// the events of several tags, folded into a state S, and appends its events
// atomically. Its functions must be pure and safe for concurrent use.
//
// Execute reserves the command's tags at their actors in sorted order (no
// deadlock; a busy tag queues the command), folds, decides, appends fenced by
// the actors' leases and versions, and hands the events to the actors, which
// stay consistent: a valid command succeeds at its first attempt, with no
// retry loop. Before it reserves, a command waits, holding nothing, until no
// other DCB command of the runtime holds any of its tags
// (tagconsistency.Gate), so it never holds one tag while it queues for the
// next behind this process's own commands.
//
// With Uses (S = DCBStates), for tags owned by aggregates, Decide reads the
// streams' states as their actors hold them, with no journal read (where an
// actor holds none, as on a member without the aggregate, they are folded
// as State does).
// Raw (Uses nil), for tags no aggregate owns, S comes from FromStates if set,
// else from folding the query's events with Evolve, cached per Name and
// Query and resumed where it stopped: a command whose tags vary a lot mostly
// folds their whole history. For such commands (a transfer between any two
// of many accounts) register an aggregate for the tags' group and use Uses:
// its actors keep each tag's state, so a command costs about one append
// however long the history (benchmarks: -mode actor-states against actor).
type DCB[C, S any] struct {
	// Name names the command type in errors, spans and metrics. Required.
	Name string
	// Query returns the events a command depends on: items of event types
	// (any of) and tags (all of, at least one); with Uses, one stream of a
	// used aggregate per item and no types (AggregateState.Items). Required.
	Query func(command C) journal.Query
	// Uses lists the handles (runtime.Uses on this runtime) of the
	// aggregates decided from, with S = DCBStates; nil is the raw form.
	Uses []AggregateUse
	// Tags returns further tags its events may carry (a fresh
	// "transfer:<id>", say), reserved too. Optional.
	Tags func(command C) []journal.Tag
	// Raw form only: Initial returns the state before any event (nil: the
	// zero S); Evolve, required, applies one matching event in journal
	// order; FromStates, if set, builds the state from the aggregate states
	// the tags' actors hold (by tag; nil for a tag of no aggregate), false
	// falling back to folding. Folded states are kept between commands of
	// equal Name and Query: Initial and Evolve may use only what Query uses.
	Initial    func(command C) S
	Evolve     func(command C, state S, event DCBEvent) S
	FromStates func(command C, states map[journal.Tag]any) (S, bool)
	// Decide returns the events to append (registered event values carrying
	// their tags through Tagged), none, or a domain error that Execute
	// returns as is. It must not mutate state. Required.
	Decide func(command C, state S) ([]any, error)
}

// DCBEvent is an event matching a DCB command's query, as Evolve sees it.
// The query finds events stored under the older names of its types too
// (Runtime.StoredQuery); a stored event that upcasts to several values
// calls Evolve once per value that matches the query, in order, with the
// same Record; a retired one calls it for none.
type DCBEvent struct {
	// Value is the event as its registered Go type, upcast; Record as
	// stored (its Type the stored name), Evolve's only during the call;
	// Erased, the stored event's personal fields read as zero values
	// because their subject was erased (nil: none).
	Value  any
	Record *journal.Record
	Erased []string
}

// DCBCommand is a registered DCB command type, safe for concurrent use.
type DCBCommand[C, S any] struct {
	rt   *Runtime
	def  DCB[C, S]
	aggs *dcbAggregates // nil in the raw form
	x    *tagconsistency.Executor
}

// DCBResult is the outcome of an executed DCB command.
type DCBResult struct {
	// Records are the appended events as stored (none if Decide returned
	// none); Duplicate reports a repeat of an executed idempotency key:
	// Records are the first execution's, and nothing was decided.
	Records   []journal.Record
	Duplicate bool
	// States, with Uses, are the used streams' states after the appended
	// events, as their actors hold them. Empty for a duplicate, in the raw
	// form, and when an aggregate's Evolve panicked on the appended events
	// (stored all the same; the stream's actor reports it).
	States DCBStates
}

// RegisterDCB registers a DCB command type and returns its handle. The event
// types it decides and its Query names must be registered first: it checks
// the zero command's Query (ErrRegistration) and Execute every query, so a
// misspelt type is an error, not a query silently matching nothing. The
// aggregates owning the tags it writes must handle its events in Evolve:
// their actors adopt them.
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
		Gate:           rt.dcbGate,
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

// Execute runs command once and returns the records it appended (with Uses,
// also the states after them). Context and options work as for
// Runtime.Execute. Errors:
//   - Decide's domain error, as is; ErrConflict; ErrReservationTimeout;
//   - ErrInvalidCommand or ErrUnknownEvent for a faulty definition (a query
//     naming an unregistered event type matches both); ErrShutdown;
//   - ErrPanic from Evolve, FromStates or Decide, or ctx's error when ctx
//     ended before the append: nothing was written;
//   - possibly journal.ErrOutcomeUnknown when ctx ended during the append:
//     execute again with the same idempotency key to find out.
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
	initial, evolve := def.Initial, def.Evolve
	var fromStates func(C, map[journal.Tag]tagconsistency.Held) (S, bool)
	if def.FromStates != nil {
		fromStates = func(c C, held map[journal.Tag]tagconsistency.Held) (S, bool) {
			states := make(map[journal.Tag]any, len(held))
			for t, h := range held {
				states[t] = h.State
			}
			return def.FromStates(c, states)
		}
	}
	if d.aggs != nil {
		initial, evolve, fromStates = aggregateForm[C, S](d.aggs, d.aggs.streamTags(query, extra))
	}
	cmd := tagconsistency.Command[S]{
		Name:  def.Name,
		Query: d.rt.StoredQuery(query),
		Evolve: func(s S, r journal.Record) S {
			var buf [1]upcastValue
			values, erased, err := reg.decodeValues(ctx, &r, buf[:0])
			if err != nil {
				panic(decodeFailure{err})
			}
			for _, v := range values {
				if matchesQueried(query, v.typ, r.Tags) {
					s = evolve(command, s, DCBEvent{Value: v.value, Record: &r, Erased: erased})
				}
			}
			return s
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
		cmd.FromStates = func(held map[journal.Tag]tagconsistency.Held) (S, bool) { return fromStates(command, held) }
	}
	res, err := tagconsistency.Execute(ctx, d.x, cmd, tagconsistency.Options{IdempotencyKey: md.IdempotencyKey, Metadata: md})
	if err != nil {
		err = translate(err)
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
