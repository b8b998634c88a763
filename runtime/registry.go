package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// Upcaster rewrites the JSON data of an event from one schema version to the
// next. It must be pure and safe for concurrent use.
type Upcaster func(data json.RawMessage) (json.RawMessage, error)

// Tagged is implemented by event types that carry tags. A DCB command's
// events carry exactly the tags Tags returns, each reserved at its owner; an
// aggregate's, their stream's (added) and no other, for writing behind a
// tag's owner would fail its next command (ErrForeignTags).
type Tagged interface {
	Tags() []journal.Tag
}

type eventType struct {
	name     string
	version  int
	typ      reflect.Type
	personal *PersonalData // nil: no personal data
	schema   *eventSchema  // its shape (types.go)
}

// registry holds the event types and aggregates of a Runtime.
type registry struct {
	codec      Codec
	json       jsonDecoders // decodes event data when codec is JSONCodec
	keys       *keyring     // nil without Config.KeyStore
	mu         sync.RWMutex
	byName     map[string]*eventType
	byType     map[reflect.Type]*eventType
	upcasts    map[EventVersion]*upcastStep // keyed by the stored type and version they read
	aggregates map[string]actors.Model
}

func newRegistry(c Codec, keys *keyring) *registry {
	return &registry{
		codec:      c,
		keys:       keys,
		byName:     map[string]*eventType{},
		byType:     map[reflect.Type]*eventType{},
		upcasts:    map[EventVersion]*upcastStep{},
		aggregates: map[string]actors.Model{},
	}
}

func regErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRegistration}, args...)...)
}

// RegisterEvent registers T, which must encode to a JSON object (a struct or
// a map with string keys), as the event named name at schema version
// schemaVersion (≥ 1), once per name and type: Decide returns T values and
// Evolve gets them.
func RegisterEvent[T any](rt *Runtime, name string, schemaVersion int, opts ...EventOption) error {
	typ := reflect.TypeFor[T]()
	switch {
	case name == "":
		return regErr("event name is empty; name the event type (e.g. \"AccountOpened\")")
	case len(name) > journal.MaxTypeLength:
		return regErr("event name %q is longer than %d bytes", name[:32]+"…", journal.MaxTypeLength)
	case schemaVersion < 1:
		return regErr("event %q: schema version %d; versions start at 1", name, schemaVersion)
	case typ.Kind() != reflect.Struct && !(typ.Kind() == reflect.Map && typ.Key().Kind() == reflect.String):
		return regErr("event %q: Go type %s does not encode to a JSON object; use a struct (not a pointer) or a map with string keys", name, typ)
	}
	var o eventOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.personal != nil {
		if err := validatePersonal(name, typ, o.personal, rt.cfg.KeyStore); err != nil {
			return err
		}
	}
	r := rt.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if et, ok := r.byName[name]; ok {
		if et.version != schemaVersion {
			lo, hi := min(et.version, schemaVersion), max(et.version, schemaVersion)
			return regErr("event %q is already registered at version %d: register it once, at %d, and read stored version %d with RegisterUpcaster(rt, %q, %d, fn)", name, et.version, hi, lo, name, lo)
		}
		return regErr("event %q is already registered (Go type %s)", name, et.typ)
	}
	if et, ok := r.byType[typ]; ok {
		return regErr("Go type %s is already registered as event %q", typ, et.name)
	}
	for from := range r.upcasts {
		if from.Type == name && from.SchemaVersion >= schemaVersion {
			return regErr("event %q at version %d: an upcaster reads its version %d; register the event at a newer version than every upcaster reads", name, schemaVersion, from.SchemaVersion)
		}
	}
	et := &eventType{name: name, version: schemaVersion, typ: typ, personal: o.personal, schema: newEventSchema(typ, o.schema)}
	r.byName[name] = et
	r.byType[typ] = et
	return nil
}

// MustRegisterUpcaster is RegisterUpcaster that panics with its error.
func MustRegisterUpcaster(rt *Runtime, name string, fromVersion int, fn Upcaster) {
	if err := RegisterUpcaster(rt, name, fromVersion, fn); err != nil {
		panic(err)
	}
}

// RegisterUpcaster registers fn to rewrite stored events named name from
// schema version fromVersion to fromVersion+1; register the event first.
// Events are upcast step by step; a missing step fails the decode, naming it.
// It is RegisterEventUpcaster's one-to-one case: same type, next version;
// to rename, split, merge or retire a type use RegisterEventUpcaster.
func RegisterUpcaster(rt *Runtime, name string, fromVersion int, fn Upcaster) error {
	if fn == nil {
		return regErr("upcaster for event %q from version %d is nil", name, fromVersion)
	}
	r := rt.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	et, ok := r.byName[name]
	if !ok {
		return regErr("upcaster for unknown event %q; call RegisterEvent first", name)
	}
	if fromVersion < 1 || fromVersion >= et.version {
		return regErr("upcaster for event %q from version %d: it must upcast from a version in [1, %d) (the registered version is %d)", name, fromVersion, et.version, et.version)
	}
	next := EventVersion{name, fromVersion + 1}
	return r.addUpcast(EventVersion{name, fromVersion}, &upcastStep{
		into: []EventVersion{next},
		fn: func(data json.RawMessage) ([]Upcast, error) {
			out, err := fn(data)
			if err != nil {
				return nil, err
			}
			return []Upcast{{Type: next.Type, SchemaVersion: next.SchemaVersion, Data: out}}, nil
		},
	})
}

// encodeEvent turns an event value into a journal event (without ID,
// stream tag or metadata). partition and stream (the aggregate's stream
// tag; empty for a DCB event) say where it will be appended: the streams of
// an event with personal data are bound to its subject before it is sealed,
// so an erasure finds every stream (and snapshot) that holds the data.
func (r *registry) encodeEvent(ctx context.Context, partition string, stream journal.Tag, ev any) (journal.Event, error) {
	if ev == nil {
		return journal.Event{}, fmt.Errorf("%w: Decide returned a nil event", ErrUnknownEvent)
	}
	typ := reflect.TypeOf(ev)
	r.mu.RLock()
	et := r.byType[typ]
	r.mu.RUnlock()
	if et == nil {
		hint := ""
		if typ.Kind() == reflect.Pointer {
			hint = " (Decide returned a pointer: return the registered value type)"
		}
		return journal.Event{}, fmt.Errorf("%w: Go type %s is not registered%s; call runtime.RegisterEvent", ErrUnknownEvent, typ, hint)
	}
	data, err := r.codec.Marshal(ev)
	if err != nil {
		return journal.Event{}, fmt.Errorf("runtime: encoding event %q: %w", et.name, err)
	}
	if err := et.schema.validate(et.name, et.version, data); err != nil {
		return journal.Event{}, err
	}
	je := journal.Event{Type: et.name, SchemaVersion: et.version, Data: data}
	if t, ok := ev.(Tagged); ok {
		je.Tags = dedupTags(t.Tags())
	}
	if et.personal != nil {
		if je.Data, err = r.seal(ctx, et, partition, stream, je); err != nil {
			return journal.Event{}, err
		}
	}
	return je, nil
}

// seal binds the event's streams to its subject and seals its personal
// fields.
func (r *registry) seal(ctx context.Context, et *eventType, partition string, stream journal.Tag, je journal.Event) ([]byte, error) {
	if r.keys == nil {
		return nil, fmt.Errorf("runtime: event %q has personal data but the runtime has no key store; set Config.KeyStore", et.name)
	}
	tags := je.Tags
	if stream != "" && !slices.Contains(tags, stream) {
		tags = append([]journal.Tag{stream}, tags...)
	}
	subject, err := subjectOf(et.name, et.personal, je.Data, tags)
	if err != nil || subject == "" {
		return je.Data, err
	}
	key, err := r.keys.dataKey(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("runtime: sealing the personal data of event %q: %w", et.name, err)
	}
	for _, t := range tags {
		if err := r.keys.bind(ctx, subject, journal.StreamID{Partition: partition, Tag: t}); err != nil {
			return nil, err
		}
	}
	data, err := erasure.Seal(je.Data, erasure.SealParams{EventType: et.name, Subject: subject, Fields: et.personal.Fields, Key: key})
	if err != nil {
		return nil, fmt.Errorf("runtime: sealing the personal data of event %q: %w", et.name, err)
	}
	return data, nil
}

func dedupTags(tags []journal.Tag) []journal.Tag {
	out := make([]journal.Tag, 0, len(tags))
	for _, t := range tags {
		dup := false
		for _, o := range out {
			if o == t {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// decodeValues turns a stored record into the registered Go values it
// upcasts to (none for a retired type, several for a split), in order,
// opening its sealed personal fields (those of erased subjects are left
// out, so they decode to zero values, and named in erased, in the stored
// event's shape). The values are appended to out (a caller's buffer, so
// that the usual single value needs no allocation).
func (r *registry) decodeValues(ctx context.Context, rec *journal.Record, out []upcastValue) ([]upcastValue, []string, error) {
	data := json.RawMessage(rec.Data)
	var erased []string
	if erasure.HasSealed(data) {
		if r.keys == nil {
			return nil, nil, fmt.Errorf("runtime: stored event %q (id %s) holds sealed personal data but the runtime has no key store; set Config.KeyStore to the key store it was written with", rec.Type, rec.ID)
		}
		op, err := r.keys.open(ctx, rec)
		if err != nil {
			return nil, nil, err
		}
		data, erased = op.Data, op.Erased
	}
	values, err := r.upcastAll(rec, EventVersion{rec.Type, max(rec.SchemaVersion, 1)}, data, out)
	if err != nil {
		return nil, nil, err
	}
	return values, erased, nil
}

// decodeEvent is decodeValues for a read that gives one value: a record
// that upcasts to none or several fails with ErrNotOneEvent.
func (r *registry) decodeEvent(ctx context.Context, rec *journal.Record) (any, []string, error) {
	var buf [1]upcastValue
	values, erased, err := r.decodeValues(ctx, rec, buf[:0])
	if err != nil {
		return nil, nil, err
	}
	if len(values) != 1 {
		return nil, nil, notOneEvent(rec, values)
	}
	return values[0].value, erased, nil
}

// unmarshal decodes data into a new value of et's Go type.
func (r *registry) unmarshal(et *eventType, data json.RawMessage) (any, error) {
	if _, ok := r.codec.(JSONCodec); ok {
		v, err := r.json.unmarshal(data, reflect.New(et.typ).Interface(), func() any { return reflect.New(et.typ).Interface() })
		if err != nil {
			return nil, err
		}
		return reflect.ValueOf(v).Elem().Interface(), nil
	}
	ptr := reflect.New(et.typ)
	if err := r.codec.Unmarshal(data, ptr.Interface()); err != nil {
		return nil, err
	}
	return ptr.Elem().Interface(), nil
}

func (r *registry) model(group string) actors.Model {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.aggregates[group]
}

func validGroup(name string) error {
	switch {
	case name == "":
		return regErr("aggregate name is empty; name it (it becomes the tag group of its streams, e.g. \"account\")")
	case strings.ContainsRune(name, ':'):
		return regErr("aggregate name %q contains ':'; the name is a tag group, the text before the first colon", name)
	case len(name) >= journal.MaxTagLength:
		return regErr("aggregate name %q is too long", name)
	}
	return nil
}

// MustRegisterEvent is RegisterEvent that panics with its error.
func MustRegisterEvent[T any](rt *Runtime, name string, schemaVersion int, opts ...EventOption) {
	if err := RegisterEvent[T](rt, name, schemaVersion, opts...); err != nil {
		panic(err)
	}
}

// MustRegisterAggregate is RegisterAggregate that panics with its error.
func MustRegisterAggregate[S any](rt *Runtime, a Aggregate[S]) {
	if err := RegisterAggregate(rt, a); err != nil {
		panic(err)
	}
}

// MustRegisterDCB is RegisterDCB that panics with its error.
func MustRegisterDCB[C, S any](rt *Runtime, def DCB[C, S]) *DCBCommand[C, S] {
	d, err := RegisterDCB(rt, def)
	if err != nil {
		panic(err)
	}
	return d
}
