package runtime

import (
	"fmt"
	"maps"
	"reflect"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// A DCB command over aggregate tags decides from the aggregates' own states.
//
// Go generics cannot give a definition one type parameter per aggregate it
// reads, so the states travel in one untyped container, DCBStates, and each
// aggregate contributes a typed handle, AggregateState[S], obtained once per
// runtime with Uses. The handle checks at Uses that S is the aggregate's
// registered state type; its accessors (Of, Lookup) then return S values
// with no type assertion in user code. A definition with DCB.Uses set has
// DCBStates as its state type and no Initial, Evolve or FromStates: the
// runtime builds the states.

// AggregateUse is a DCB.Uses entry; only AggregateState implements it.
type AggregateUse interface {
	usedAggregate() usedAggregate
}

// usedAggregate is what the runtime needs of an aggregate listed in Uses.
type usedAggregate struct {
	rt    *Runtime
	name  string
	model actors.Model
}

// AggregateState is a registered aggregate's typed handle for DCB commands:
// list it in DCB.Uses, name its streams in Query (Items), read their states
// (Of, Lookup). Safe for concurrent use, it belongs to the runtime Uses was
// called on; the zero value is unusable.
type AggregateState[S any] struct {
	rt   *Runtime
	name string
}

// Uses returns the handle of the aggregate registered as name. It fails with
// ErrRegistration if there is none or its state type is not S.
func Uses[S any](rt *Runtime, name string) (AggregateState[S], error) {
	m := rt.reg.model(name)
	if m == nil {
		return AggregateState[S]{}, regErr("Uses[%s](%q): no aggregate %q is registered; call runtime.RegisterAggregate first", reflect.TypeFor[S](), name, name)
	}
	if _, ok := m.(*aggregateModel[S]); !ok {
		actual := "another type"
		if st, ok := m.(stateTyped); ok {
			actual = st.stateGoType().String()
		}
		return AggregateState[S]{}, regErr("Uses[%s](%q): the state type of aggregate %q is %s; use it as the type argument", reflect.TypeFor[S](), name, name, actual)
	}
	return AggregateState[S]{rt: rt, name: name}, nil
}

// stateTyped is implemented by every aggregateModel: the Go type of its state.
type stateTyped interface{ stateGoType() reflect.Type }

func (m *aggregateModel[S]) stateGoType() reflect.Type { return m.stateType }

func (a AggregateState[S]) usedAggregate() usedAggregate {
	var m actors.Model
	if a.rt != nil {
		m = a.rt.reg.model(a.name)
	}
	return usedAggregate{rt: a.rt, name: a.name, model: m}
}

// Name returns the aggregate's name, the tag group of its streams.
func (a AggregateState[S]) Name() string { return a.name }

// Tag returns the tag of the aggregate's stream id ("<name>:<id>").
func (a AggregateState[S]) Tag(id string) journal.Tag { return journal.NewTag(a.name, id) }

// Items returns one query item per id naming that stream's tag and no
// types: how a DCB command with Uses names the streams it decides from.
func (a AggregateState[S]) Items(ids ...string) []journal.QueryItem {
	out := make([]journal.QueryItem, len(ids))
	for i, id := range ids {
		out[i] = journal.QueryItem{Tags: []journal.Tag{a.Tag(id)}}
	}
	return out
}

// Lookup returns the state of stream id held by states and whether the
// stream exists: the command reserved it and it has events. A reserved
// stream without events gives its Initial state and false (Of gives the
// same state; Version tells the two cases apart as 0), as does a stream
// the command did not reserve.
func (a AggregateState[S]) Lookup(states DCBStates, id string) (S, bool) {
	s, held := a.held(states, id)
	return s, held && states.v[a.Tag(id)] > 0
}

// Version returns the version of stream id the states were decided at: 0
// when the stream has no events or the command did not reserve it.
func (a AggregateState[S]) Version(states DCBStates, id string) uint64 {
	return states.v[a.Tag(id)]
}

// held returns the state of stream id held by states, and whether they
// hold it, as they do for every used stream the command reserved.
func (a AggregateState[S]) held(states DCBStates, id string) (S, bool) {
	v, ok := states.m[a.Tag(id)]
	if !ok {
		var zero S
		return zero, false
	}
	s, ok := v.(S) // Uses and the runtime guarantee S is the stored type
	return s, ok
}

// Of returns the state of stream id held by states: in Decide, the state
// decided from (Initial for a stream without events). If the command did not
// reserve the stream, Of panics naming it, which in Decide fails the command
// with ErrPanic, writing nothing; use Lookup where a state may be missing.
func (a AggregateState[S]) Of(states DCBStates, id string) S {
	s, ok := a.held(states, id)
	if !ok {
		panic(fmt.Sprintf("runtime: no state of stream %s: the DCB command did not reserve it; name it in the command's Query (AggregateState.Items)", a.Tag(id)))
	}
	return s
}

// DCBStates are the states of the used streams a DCB command reserved, read
// with AggregateState.Of and Lookup. Shared with the streams' actors, they
// must be treated as read-only, like Evolve's input. The zero value is empty.
type DCBStates struct {
	m map[journal.Tag]any
	v map[journal.Tag]uint64 // each stream's version; absent: 0
}

// dcbAggregates is the aggregate form of a registered DCB definition.
type dcbAggregates struct {
	byGroup map[string]actors.Model
	names   []string // for error messages, in Uses order
}

// newDCBAggregates checks the Uses of the definition named command.
func newDCBAggregates(rt *Runtime, command string, uses []AggregateUse) (*dcbAggregates, error) {
	a := &dcbAggregates{byGroup: make(map[string]actors.Model, len(uses))}
	for i, u := range uses {
		if u == nil {
			return nil, regErr("DCB command %q: Uses[%d] is nil; list handles returned by runtime.Uses", command, i)
		}
		ua := u.usedAggregate()
		switch {
		case ua.rt == nil:
			return nil, regErr("DCB command %q: Uses[%d] is a zero AggregateState; obtain handles with runtime.Uses", command, i)
		case ua.rt != rt:
			return nil, regErr("DCB command %q: the handle of aggregate %q belongs to another runtime; call runtime.Uses on this one", command, ua.name)
		case ua.model == nil:
			return nil, regErr("DCB command %q: aggregate %q is not registered", command, ua.name)
		}
		if _, dup := a.byGroup[ua.name]; dup {
			return nil, regErr("DCB command %q lists aggregate %q twice in Uses", command, ua.name)
		}
		a.byGroup[ua.name] = ua.model
		a.names = append(a.names, ua.name)
	}
	return a, nil
}

// checkQuery reports whether q has the form a command with Uses decides
// from: items that each name one stream of a used aggregate and no types.
// The states cover every event of those streams, so a type filter or a tag
// of another group would be read by nothing.
func (a *dcbAggregates) checkQuery(command string, q journal.Query) error {
	for i, it := range q.Items {
		if len(it.Types) > 0 || len(it.Tags) != 1 {
			return fmt.Errorf("%w: command %q decides from aggregates %v: query item %d must name one of their streams and no types (got tags %v, types %v); use AggregateState.Items", ErrInvalidCommand, command, a.names, i, it.Tags, it.Types)
		}
		if g := it.Tags[0].Group(); a.byGroup[g] == nil {
			return fmt.Errorf("%w: command %q decides from the states of aggregates %v: query item %d names tag %q of group %q, which is not among them; add its aggregate to Uses, or list a tag the command only writes in Tags", ErrInvalidCommand, command, a.names, i, it.Tags[0], g)
		}
	}
	return nil
}

// streamTags returns the tags of q and extra that belong to used aggregates.
func (a *dcbAggregates) streamTags(q journal.Query, extra []journal.Tag) []journal.Tag {
	var out []journal.Tag
	add := func(t journal.Tag) {
		if a.byGroup[t.Group()] != nil {
			out = append(out, t)
		}
	}
	for _, it := range q.Items {
		for _, t := range it.Tags {
			add(t)
		}
	}
	for _, t := range extra {
		add(t)
	}
	return out
}

// initial returns every stream's aggregate Initial.
func (a *dcbAggregates) initial(tags []journal.Tag) DCBStates {
	m := make(map[journal.Tag]any, len(tags))
	for _, t := range tags {
		m[t] = a.byGroup[t.Group()].Initial()
	}
	return DCBStates{m: m, v: make(map[journal.Tag]uint64, len(tags))}
}

// evolve applies one event value of rec to the state of each held stream
// rec carries, with that stream's aggregate Evolve, and sets the stream's
// version to rec's there (a split record's values share it). It modifies
// s's maps, which belong to the fold that built them.
func (a *dcbAggregates) evolve(s DCBStates, ev any, rec *journal.Record) DCBStates {
	for _, l := range rec.Links {
		if st, ok := s.m[l.Tag]; ok {
			s.m[l.Tag] = a.byGroup[l.Tag.Group()].Evolve(st, ev)
			s.v[l.Tag] = l.Version
		}
	}
	return s
}

// fromStates takes the states of tags from the stream actors' reservations.
// It reports false when an owner holds no state (a member of the cluster
// without the aggregate registered): the executor then folds the streams.
func (a *dcbAggregates) fromStates(tags []journal.Tag, held map[journal.Tag]tagconsistency.Held) (DCBStates, bool) {
	m := make(map[journal.Tag]any, len(tags))
	v := make(map[journal.Tag]uint64, len(tags))
	for _, t := range tags {
		h := held[t]
		if h.State == nil {
			return DCBStates{}, false
		}
		m[t], v[t] = h.State, h.Version
	}
	return DCBStates{m: m, v: v}, true
}

// afterDecision returns decided evolved with the events the command
// appended (values[i] is the decided value of records[i]), or no states when
// an aggregate's Evolve panicked on them. decided is not modified.
func (a *dcbAggregates) afterDecision(decided DCBStates, values []any, records []journal.Record) (out DCBStates) {
	defer func() {
		if recover() != nil {
			out = DCBStates{}
		}
	}()
	s := DCBStates{m: maps.Clone(decided.m), v: maps.Clone(decided.v)}
	if s.v == nil {
		s.v = map[journal.Tag]uint64{}
	}
	for i := range records {
		s = a.evolve(s, values[i], &records[i])
	}
	return s
}

// registerAggregateForm checks a definition with Uses.
func registerAggregateForm[C, S any](rt *Runtime, def DCB[C, S]) (*dcbAggregates, error) {
	if reflect.TypeFor[S]() != reflect.TypeFor[DCBStates]() {
		return nil, regErr("DCB command %q lists aggregates in Uses, so its state type must be runtime.DCBStates, not %s", def.Name, reflect.TypeFor[S]())
	}
	if def.Initial != nil || def.Evolve != nil || def.FromStates != nil {
		return nil, regErr("DCB command %q lists aggregates in Uses: leave Initial, Evolve and FromStates nil, the runtime folds the states with the aggregates' own Evolve", def.Name)
	}
	return newDCBAggregates(rt, def.Name, def.Uses)
}

// aggregateForm returns the state functions of one execution of a command
// with Uses whose used aggregates' streams are tags. S is DCBStates
// (registerAggregateForm checked it), so the functions convert to the
// definition's types. The states come from the tags' actors (fromStates);
// when an owner holds none, the executor folds the streams from the
// journal with the same aggregates' Evolve (initial, evolve): the query
// names each stream whole (checkQuery), so that fold is the aggregate's.
func aggregateForm[C, S any](a *dcbAggregates, tags []journal.Tag) (initial func(C) S, evolve func(C, S, DCBEvent) S, fromStates func(C, map[journal.Tag]tagconsistency.Held) (S, bool)) {
	i := func(C) DCBStates { return a.initial(tags) }
	e := func(_ C, s DCBStates, ev DCBEvent) DCBStates { return a.evolve(s, ev.Value, ev.Record) }
	f := func(_ C, held map[journal.Tag]tagconsistency.Held) (DCBStates, bool) { return a.fromStates(tags, held) }
	return any(i).(func(C) S), any(e).(func(C, S, DCBEvent) S), any(f).(func(C, map[journal.Tag]tagconsistency.Held) (S, bool))
}
