package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/scribe-es/scribe/journal"
)

// The type registry: each registered event type has a shape, a JSON Schema
// document, given with WithSchema or derived from its Go type. Start records
// the shapes in the journal (journal.TypeRegistry) and refuses a type
// version recorded with another shape; appends of a type with an explicit
// schema are validated against it in the runtime, before the journal sees
// them (see eventSchema.validate for why there).

// WithSchema declares the event type's shape explicitly: schema, a JSON
// Schema document (draft 2020-12 unless its $schema says otherwise), is
// recorded for the type's version by Start, and every event of the type is
// validated against it before it is appended; one that breaks it is refused
// with a *SchemaViolationError naming the field. Without WithSchema the
// shape is derived from the Go type and recorded, but not checked on append:
// what encoding/json writes for a Go value is what its type says. The
// document is compiled by Start or by the type's first append, whichever
// comes first; an invalid one fails both with ErrRegistration.
func WithSchema(schema json.RawMessage) EventOption {
	return func(o *eventOptions) { o.schema = bytes.Clone(schema) }
}

// SchemaViolationError (journal.ErrInvalidEvent) is an event whose payload
// breaks its type's explicit schema; nothing was appended. Not retryable:
// fix the payload, or register a new version of the type with its new
// schema.
type SchemaViolationError struct {
	Type    string
	Version int
	// Field is the JSON pointer of the offending value ("/amount"; a
	// missing required field's would-be place; "" for the payload itself).
	Field string
	// Reason says what the schema requires there.
	Reason string
}

func (e *SchemaViolationError) Error() string {
	field := e.Field
	if field == "" {
		field = "the payload"
	}
	return fmt.Sprintf("runtime: event %q v%d breaks its schema at %s (%s); fix the event, or register a new version with its schema",
		e.Type, e.Version, field, abbreviate(e.Reason, 60))
}

// Is matches journal.ErrInvalidEvent.
func (e *SchemaViolationError) Is(target error) bool { return target == journal.ErrInvalidEvent }

// eventSchema is an event type's shape. The zero value is not usable; see
// newEventSchema. Safe for concurrent use.
type eventSchema struct {
	typ      reflect.Type
	explicit json.RawMessage // nil: derived from typ

	once     sync.Once
	doc      json.RawMessage   // the document recorded
	compiled *validator.Schema // the explicit document, compiled; nil when derived
	err      error             // an explicit document that does not compile
	printer  *message.Printer  // renders validation errors
}

func newEventSchema(typ reflect.Type, explicit json.RawMessage) *eventSchema {
	return &eventSchema{typ: typ, explicit: explicit}
}

// load derives or compiles the document once.
func (s *eventSchema) load(name string) (json.RawMessage, error) {
	s.once.Do(func() {
		if s.explicit == nil {
			r := jsonschema.Reflector{Anonymous: true, ExpandedStruct: true}
			s.doc, s.err = json.Marshal(r.ReflectFromType(s.typ))
			if s.err != nil {
				s.err = regErr("event %q: deriving its JSON Schema from %s: %v; give one with WithSchema", name, s.typ, s.err)
			}
			return
		}
		doc, err := validator.UnmarshalJSON(bytes.NewReader(s.explicit))
		if _, isObject := doc.(map[string]any); err != nil || !isObject {
			s.err = regErr("event %q: WithSchema is not a JSON object; give a JSON Schema document", name)
			return
		}
		c := validator.NewCompiler()
		const url = "scribe:///event.json"
		if err := c.AddResource(url, doc); err != nil {
			s.err = regErr("event %q: WithSchema: %v", name, err)
			return
		}
		if s.compiled, err = c.Compile(url); err != nil {
			s.err = regErr("event %q: WithSchema does not compile: %s", name, abbreviate(err.Error(), 120))
			return
		}
		s.doc = s.explicit
		s.printer = message.NewPrinter(language.English)
	})
	return s.doc, s.err
}

// validate checks the encoded payload of an event against its explicit
// schema (a derived one is the Go type's own shape: not checked).
//
// It runs in the runtime, before the append, rather than in the journal:
// the runtime holds each of its types' shapes compiled once (the journal
// would have to load and cache the registry and follow other builds'
// recordings), it sees the payload before personal fields are sealed (a
// sealed field is ciphertext no schema describes), it holds for every
// journal alike, and a refusal costs no round trip. A build's shapes are the
// recorded ones: Start refuses to run a build whose shape for a type
// version differs from the recorded one.
func (s *eventSchema) validate(name string, version int, data []byte) error {
	if s == nil || s.explicit == nil {
		return nil
	}
	if _, err := s.load(name); err != nil {
		return err
	}
	v, err := validator.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("runtime: encoding event %q: the payload is not JSON (%v); use a JSON codec for events with a schema", name, err)
	}
	err = s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *validator.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("runtime: validating event %q: %w", name, err)
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	field := ""
	if len(ve.InstanceLocation) > 0 {
		field = "/" + strings.Join(ve.InstanceLocation, "/")
	}
	if req, ok := ve.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
		field += "/" + req.Missing[0]
	}
	return &SchemaViolationError{Type: name, Version: version, Field: field, Reason: ve.ErrorKind.LocalizedString(s.printer)}
}

// Start records this build's event types in the journal's type registry
// (journal.TypeRegistry; a journal without one records and checks
// nothing) and checks the journal against them: call it once every event
// type, upcaster, aggregate and DCB command is registered, before serving.
// It fails with ErrConfiguration, recording nothing,
//   - when the journal holds a type version this build cannot read (not
//     registered at that version, no upcaster chain from it), naming it;
//     Config.TolerateUnreadableTypes lets the runtime run anyway, and the
//     events fail where they are read;
//   - when a type version is recorded with another schema (its shape
//     changed without a new version): the error names the type and also
//     matches journal.ErrTypeConflict.
//
// It fails with ErrRegistration on an explicit schema that does not compile.
// Otherwise it records each registered type version's schema, and this
// build (BuildID: what it writes, the older versions it upcasts) with the
// type versions it reads, for `scribe types`. Start may be called again
// (after more registrations); it does no harm.
func (rt *Runtime) Start(ctx context.Context) error {
	schemas, err := rt.typeSchemas()
	if err != nil {
		return err
	}
	tr, ok := rt.cfg.Journal.(journal.TypeRegistry)
	if !ok {
		return nil
	}
	stored, err := tr.StoredVersions(ctx)
	if err != nil {
		return fmt.Errorf("runtime: reading the journal's stored event versions: %w", err)
	}
	recorded, err := tr.RecordedTypes(ctx)
	if err != nil {
		return fmt.Errorf("runtime: reading the journal's type registry: %w", err)
	}
	var unreadable []journal.TypeVersion
	for _, tv := range stored {
		if !strings.HasPrefix(tv.Type, "scribe.") && !rt.reg.readable(tv.Type, tv.Version) {
			unreadable = append(unreadable, tv)
		}
	}
	if len(unreadable) > 0 && !rt.cfg.TolerateUnreadableTypes {
		return unreadableError(unreadable)
	}
	candidates := map[journal.TypeVersion]bool{}
	for _, tv := range stored {
		candidates[tv] = true
	}
	for _, s := range recorded.Schemas {
		candidates[s.TypeVersion] = true
	}
	build := journal.BuildTypes{Build: rt.BuildID(), Node: rt.cfg.NodeID}
	for _, s := range schemas {
		build.Writes = append(build.Writes, s.TypeVersion)
		for v := 1; v <= s.Version; v++ {
			candidates[journal.TypeVersion{Type: s.Type, Version: v}] = true
		}
	}
	for _, tv := range slices.SortedFunc(maps.Keys(candidates), journal.CompareTypeVersions) {
		if rt.reg.readable(tv.Type, tv.Version) {
			build.Reads = append(build.Reads, tv)
		}
	}
	if err := tr.RecordTypes(ctx, schemas, build); err != nil {
		if errors.Is(err, journal.ErrTypeConflict) {
			return fmt.Errorf("%w: runtime: %w", ErrConfiguration, err)
		}
		return fmt.Errorf("runtime: recording the event types: %w", err)
	}
	return nil
}

// unreadableError is Start's refusal of stored type versions this build
// cannot read.
func unreadableError(tvs []journal.TypeVersion) error {
	names := make([]string, 0, 3)
	for _, tv := range tvs[:min(3, len(tvs))] {
		names = append(names, tv.String())
	}
	more := ""
	if len(tvs) > 3 {
		more = fmt.Sprintf(" and %d more", len(tvs)-3)
	}
	return fmt.Errorf("%w: runtime: the journal holds %s%s, which this build cannot read; register them or upcasters from them (or set TolerateUnreadableTypes)",
		ErrConfiguration, strings.Join(names, ", "), more)
}

// typeSchemas returns the registered event types with their schemas,
// ordered by type.
func (rt *Runtime) typeSchemas() ([]journal.TypeSchema, error) {
	rt.reg.mu.RLock()
	types := slices.Collect(maps.Values(rt.reg.byName))
	rt.reg.mu.RUnlock()
	slices.SortFunc(types, func(a, b *eventType) int { return strings.Compare(a.name, b.name) })
	out := make([]journal.TypeSchema, 0, len(types))
	for _, et := range types {
		doc, err := et.schema.load(et.name)
		if err != nil {
			return nil, err
		}
		out = append(out, journal.TypeSchema{TypeVersion: journal.TypeVersion{Type: et.name, Version: et.version}, Schema: doc})
	}
	return out, nil
}

// BuildID identifies this build in the type registry: a digest of the event
// types it registers with their schemas and of the stored type versions its
// upcasters read. Two processes with the same registrations have the same
// BuildID.
func (rt *Runtime) BuildID() string {
	h := sha256.New()
	schemas, _ := rt.typeSchemas() // a schema that fails to load digests as empty; Start reports it
	for _, s := range schemas {
		var canon any
		_ = json.Unmarshal(s.Schema, &canon)
		doc, _ := json.Marshal(canon)
		fmt.Fprintf(h, "type %q %d %s\n", s.Type, s.Version, doc)
	}
	rt.reg.mu.RLock()
	froms := slices.Collect(maps.Keys(rt.reg.upcasts))
	rt.reg.mu.RUnlock()
	slices.SortFunc(froms, func(a, b EventVersion) int {
		return journal.CompareTypeVersions(journal.TypeVersion{Type: a.Type, Version: a.SchemaVersion}, journal.TypeVersion{Type: b.Type, Version: b.SchemaVersion})
	})
	for _, f := range froms {
		fmt.Fprintf(h, "upcast %q %d\n", f.Type, f.SchemaVersion)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
