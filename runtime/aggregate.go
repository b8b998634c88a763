package runtime

import (
	"context"
	"fmt"
	"reflect"

	"github.com/scribe-es/scribe/journal"
)

// Aggregate defines an event-sourced aggregate with state S as a decider:
// pure functions called one command at a time by the actor of each of its
// streams, tagged "<Name>:<id>".
type Aggregate[S any] struct {
	// Name, the tag group of its streams, is non-empty, without ':'.
	Name string
	// Initial returns an empty stream's state; Decide the events (registered
	// event values) a command produces in a state, or an error that Execute
	// returns as is; Evolve a state with one event applied. Decide and
	// Evolve must not mutate the state they get (Evolve copies maps and
	// slices): the actor keeps the confirmed state while it decides a batch.
	Initial func() S
	Decide  func(state S, command any) ([]any, error)
	Evolve  func(state S, event any) S
	// SchemaVersion (0 means 1) stamps snapshots of S; snapshots of another
	// version are ignored (replay). Snapshots also record S's shape (its
	// fields' names, JSON tags and types, recursively): one of another shape
	// is ignored too, so a forgotten bump cannot load a wrong state. Bump it
	// when S keeps its shape but its meaning changes (a fold that counts
	// differently).
	SchemaVersion int
}

// RegisterAggregate registers an aggregate under its unique Name. Its events
// must be registered before commands produce them.
func RegisterAggregate[S any](rt *Runtime, a Aggregate[S]) error {
	if err := validGroup(a.Name); err != nil {
		return err
	}
	if a.Initial == nil || a.Decide == nil || a.Evolve == nil {
		return regErr("aggregate %q: Initial, Decide and Evolve are all required", a.Name)
	}
	if a.SchemaVersion < 0 {
		return regErr("aggregate %q: SchemaVersion %d is negative", a.Name, a.SchemaVersion)
	}
	if a.SchemaVersion == 0 {
		a.SchemaVersion = 1
	}
	r := rt.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.aggregates[a.Name]; dup {
		return regErr("aggregate %q is already registered", a.Name)
	}
	r.aggregates[a.Name] = &aggregateModel[S]{def: a, reg: r, stateType: reflect.TypeFor[S](), fingerprint: typeFingerprint(reflect.TypeFor[S]())}
	return nil
}

// aggregateModel adapts a typed Aggregate to actors.Model.
type aggregateModel[S any] struct {
	def         Aggregate[S]
	reg         *registry
	stateType   reflect.Type
	fingerprint string
}

func asState[S any](v any) S {
	s, _ := v.(S)
	return s
}

func (m *aggregateModel[S]) Name() string            { return m.def.Name }
func (m *aggregateModel[S]) Initial() any            { return m.def.Initial() }
func (m *aggregateModel[S]) StateSchemaVersion() int { return m.def.SchemaVersion }

func (m *aggregateModel[S]) Decide(state any, command any) ([]any, error) {
	if s, ok := command.(seedCommand); ok {
		return s.events, nil
	}
	return m.def.Decide(asState[S](state), command)
}

func (m *aggregateModel[S]) Evolve(state any, event any) any {
	if evs, ok := event.(upcastEvents); ok {
		s := asState[S](state)
		for _, ev := range evs {
			s = m.def.Evolve(s, ev)
		}
		return s
	}
	return m.def.Evolve(asState[S](state), event)
}

// upcastEvents is what DecodeEvent gives the actor for a stored event that
// upcasts to no value (a retired type) or several (a split): Evolve folds
// them one by one, in order, so the actor's one value per record holds them
// all. It never reaches the aggregate's own Evolve.
type upcastEvents []any

func (m *aggregateModel[S]) EncodeEvent(ctx context.Context, stream journal.StreamID, ev any) (journal.Event, error) {
	return m.reg.encodeEvent(ctx, stream.Partition, stream.Tag, ev)
}

// DecodeEvent decodes rec, upcast; erased personal fields fold as zero
// values. A record that upcasts to one value gives it; to none or several,
// an upcastEvents that Evolve folds one by one.
func (m *aggregateModel[S]) DecodeEvent(ctx context.Context, rec *journal.Record) (any, error) {
	var buf [1]upcastValue
	values, _, err := m.reg.decodeValues(ctx, rec, buf[:0])
	if err != nil {
		return nil, err
	}
	if len(values) == 1 {
		return values[0].value, nil
	}
	evs := make(upcastEvents, len(values))
	for i, v := range values {
		evs[i] = v.value
	}
	return evs, nil
}

func (m *aggregateModel[S]) EncodeState(state any) ([]byte, error) {
	b, err := m.reg.codec.Marshal(asState[S](state))
	if err != nil {
		return nil, fmt.Errorf("runtime: encoding the state of aggregate %q: %w", m.def.Name, err)
	}
	return b, nil
}

func (m *aggregateModel[S]) DecodeState(data []byte) (any, error) {
	var s S
	if err := m.reg.codec.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("runtime: decoding a snapshot of aggregate %q: %w", m.def.Name, err)
	}
	return s, nil
}

// StateFingerprint is the shape of S (actors.StateFingerprinter): snapshots
// record it, and one saved with another shape is ignored and the stream
// replayed, so a state type changed without a new SchemaVersion never loads
// an old snapshot into the new shape.
func (m *aggregateModel[S]) StateFingerprint() string { return m.fingerprint }
