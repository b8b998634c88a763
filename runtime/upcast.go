package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/scribe-es/scribe/journal"
)

// Upcasting on read. A stored event (type, schema version, data) is turned
// into the values this build registers by the upcasters registered for it:
// RegisterUpcaster's one-to-one steps (version n to n+1, same type) and
// RegisterEventUpcaster's general ones (zero, one or several events, each
// with its own type and version). The stored record is never rewritten: its
// position, tags, per-tag versions and hash stay what they are, and every
// value it upcasts to is read at that position with those tags.

// ErrNotOneEvent: a stored event upcasts to no event (its type is retired)
// or to several (it was split), so a read that returns one value cannot
// give it. Read it with Runtime.DecodeValues or Runtime.Decoding, which
// give every value.
var ErrNotOneEvent = errors.New("runtime: the stored event does not upcast to exactly one event")

// EventVersion is an event type name at a schema version.
type EventVersion struct {
	Type          string
	SchemaVersion int
}

// String renders v as "Type vN", as errors name it.
func (v EventVersion) String() string { return fmt.Sprintf("%s v%d", v.Type, v.SchemaVersion) }

// Upcast is one event an EventUpcaster makes of a stored event: its type
// name and schema version (one of the upcaster's Into) and its JSON data.
// It is upcast further when another upcaster is registered for its type
// and version, else decoded into the Go type registered at that name and
// version.
type Upcast struct {
	Type          string
	SchemaVersion int
	Data          json.RawMessage
}

// EventUpcaster reads the stored events of one type at one schema version
// as zero, one or several events of this build: registered with
// RegisterEventUpcaster, it renames (one event of another type), splits
// (several), merges (two old types upcast into one new type) or retires
// (none) a type.
type EventUpcaster struct {
	// Type and FromVersion (≥ 1) name the stored events it reads. Type need
	// not be registered (a renamed, split or retired type usually is not);
	// when it is, FromVersion is below its registered version, as this
	// build writes that version and reads it without upcasting.
	Type        string
	FromVersion int
	// Into lists every type and version Upcast may return, each registered
	// or upcast further by another upcaster (RegisterEventUpcaster refuses
	// a chain that leads back to Type at FromVersion). Empty retires the
	// type: Upcast must return no event.
	Into []EventVersion
	// Upcast returns the events of the stored data, in the order they are
	// read; each one's Type and SchemaVersion must be among Into. It must be
	// pure (it runs at every read of the event, on any node) and safe for
	// concurrent use; data must not be modified. Its error fails the read,
	// naming the event.
	Upcast func(data json.RawMessage) ([]Upcast, error)
}

// upcastStep is a registered upcaster: from one stored type and version
// into the types and versions of into.
type upcastStep struct {
	into []EventVersion
	fn   func(data json.RawMessage) ([]Upcast, error)
}

// RegisterEventUpcaster registers u, the general form of RegisterUpcaster:
// each stored event of u.Type at u.FromVersion is read as the events
// u.Upcast returns, at the stored event's position and with its tags, by
// every read (aggregate recovery, State, DCB folds, Decoding and
// DecodeValues, CheckStored). Each (type, version) has one upcaster.
func RegisterEventUpcaster(rt *Runtime, u EventUpcaster) error {
	from := EventVersion{u.Type, u.FromVersion}
	switch {
	case u.Type == "":
		return regErr("upcaster with no Type; name the stored event type it reads")
	case u.FromVersion < 1:
		return regErr("upcaster for event %q from version %d: versions start at 1", u.Type, u.FromVersion)
	case u.Upcast == nil:
		return regErr("upcaster for %s has no Upcast function", from)
	}
	for _, to := range u.Into {
		if to.Type == "" || to.SchemaVersion < 1 {
			return regErr("upcaster for %s: Into holds %q at version %d; name a type and a version ≥ 1", from, to.Type, to.SchemaVersion)
		}
	}
	r := rt.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if et, ok := r.byName[u.Type]; ok && u.FromVersion >= et.version {
		return regErr("upcaster for %s: the event is registered at version %d, which this build writes and reads as is; upcast only older versions", from, et.version)
	}
	return r.addUpcast(from, &upcastStep{into: slices.Clone(u.Into), fn: u.Upcast})
}

// MustRegisterEventUpcaster is RegisterEventUpcaster that panics with its
// error.
func MustRegisterEventUpcaster(rt *Runtime, u EventUpcaster) {
	if err := RegisterEventUpcaster(rt, u); err != nil {
		panic(err)
	}
}

// addUpcast registers step from; r.mu is held.
func (r *registry) addUpcast(from EventVersion, step *upcastStep) error {
	if _, dup := r.upcasts[from]; dup {
		return regErr("event %q already has an upcaster from version %d", from.Type, from.SchemaVersion)
	}
	for _, to := range step.into {
		if to == from || r.upcastsInto(to, from, map[EventVersion]bool{}) {
			return regErr("upcaster for %s into %s makes a loop: %s upcasts back to %s; upcast old versions into newer ones only", from, to, to, from)
		}
	}
	r.upcasts[from] = step
	return nil
}

// upcastsInto reports whether the registered upcasters lead from at to
// target; r.mu is held.
func (r *registry) upcastsInto(at, target EventVersion, seen map[EventVersion]bool) bool {
	if at == target {
		return true
	}
	if seen[at] {
		return false
	}
	seen[at] = true
	step := r.upcasts[at]
	if step == nil {
		return false
	}
	for _, to := range step.into {
		if r.upcastsInto(to, target, seen) {
			return true
		}
	}
	return false
}

// readable reports whether this build decodes a stored event of type name
// at schema version version (0 reads as 1): the type is registered at that
// version, or an upcaster reads that version and everything it may return
// (its Into) is readable in turn. A retiring upcaster makes its version
// readable (it decodes to no event). It runs no upcaster: CheckStored runs
// them on the stored data.
func (r *registry) readable(name string, version int) bool {
	if version == 0 {
		version = 1
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.readableLocked(EventVersion{name, version}, map[EventVersion]bool{})
}

func (r *registry) readableLocked(at EventVersion, seen map[EventVersion]bool) bool {
	if step := r.upcasts[at]; step != nil {
		if seen[at] {
			return false // not reached: addUpcast refuses loops
		}
		seen[at] = true
		for _, to := range step.into {
			if !r.readableLocked(to, seen) {
				return false
			}
		}
		return true
	}
	et := r.byName[at.Type]
	return et != nil && et.version == at.SchemaVersion
}

// sourcesOf returns the stored types whose events upcast, through any
// chain, into an event of one of types, excluding types themselves; sorted.
func (r *registry) sourcesOf(types []string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for from := range r.upcasts {
		if slices.Contains(types, from.Type) || slices.Contains(out, from.Type) {
			continue
		}
		for _, t := range types {
			if r.reachesType(from, t, map[EventVersion]bool{}) {
				out = append(out, from.Type)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// reachesType reports whether the upcasters lead from at to an event of
// type name; r.mu is held.
func (r *registry) reachesType(at EventVersion, name string, seen map[EventVersion]bool) bool {
	if seen[at] {
		return false
	}
	seen[at] = true
	step := r.upcasts[at]
	if step == nil {
		return false
	}
	for _, to := range step.into {
		if to.Type == name || r.reachesType(to, name, seen) {
			return true
		}
	}
	return false
}

// StoredQuery returns q with, in each item that names types, the stored
// types whose events upcast into one of them (a renamed type's old name,
// the type a split came from, the types a merge joined): a journal read or
// a projection's Query with it finds the events stored under older names,
// which Decoding and DecodeValues then give as the queried types (and, for
// a split, also as the other types it upcasts to: skip those by their Go
// type). q itself is not modified. DCB commands expand their queries
// themselves.
func (rt *Runtime) StoredQuery(q journal.Query) journal.Query {
	if q.All || len(q.Items) == 0 {
		return q
	}
	out := q
	out.Items = make([]journal.QueryItem, len(q.Items))
	for i, it := range q.Items {
		out.Items[i] = it
		if len(it.Types) == 0 {
			continue
		}
		if src := rt.reg.sourcesOf(it.Types); len(src) > 0 {
			out.Items[i].Types = append(slices.Clone(it.Types), src...)
		}
	}
	return out
}

// matchesQueried reports whether a value of type typ read from a record
// with tags matches q as the caller wrote it (before StoredQuery): the
// record matched the expanded query, the value must match the original.
func matchesQueried(q journal.Query, typ string, tags []journal.Tag) bool {
	if q.All {
		return true
	}
	e := journal.Event{Type: typ, Tags: tags}
	for _, it := range q.Items {
		if it.Matches(&e) {
			return true
		}
	}
	return false
}

// upcastValue is one value a stored event decodes to.
type upcastValue struct {
	typ   string // its registered type name
	value any    // its registered Go value (not a pointer)
}

// upcastOrigin names the stored record rec in an error while it is read as
// at: also the stored type and version when at is not them.
func upcastOrigin(rec *journal.Record, at EventVersion) string {
	stored := EventVersion{rec.Type, max(rec.SchemaVersion, 1)}
	if at == stored {
		return fmt.Sprintf("%q (id %s)", rec.Type, rec.ID)
	}
	return fmt.Sprintf("%q v%d (upcast from stored %q v%d, id %s)", at.Type, at.SchemaVersion, rec.Type, stored.SchemaVersion, rec.ID)
}

// upcastAll turns data, read from rec as type and version at, into the
// registered values it upcasts to, appending them to out in order.
func (r *registry) upcastAll(rec *journal.Record, at EventVersion, data json.RawMessage, out []upcastValue) ([]upcastValue, error) {
	r.mu.RLock()
	step := r.upcasts[at]
	et := r.byName[at.Type]
	r.mu.RUnlock()
	if step != nil {
		ups, err := step.fn(data)
		if err != nil {
			return out, fmt.Errorf("runtime: upcasting event %s from version %d: %w", upcastOrigin(rec, at), at.SchemaVersion, err)
		}
		for _, up := range ups {
			to := EventVersion{up.Type, up.SchemaVersion}
			if !slices.Contains(step.into, to) {
				return out, fmt.Errorf("runtime: the upcaster of %s returned %s, not in its Into %v (event id %s); declare it in Into", at, to, step.into, rec.ID)
			}
			if out, err = r.upcastAll(rec, to, up.Data, out); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	switch {
	case et == nil:
		return out, fmt.Errorf("%w: stored event type %s is not registered; call runtime.RegisterEvent, or RegisterEventUpcaster to read it as other types", ErrUnknownEvent, upcastOrigin(rec, at))
	case at.SchemaVersion > et.version:
		return out, fmt.Errorf("runtime: stored event %s has schema version %d, newer than the registered %d; deploy the newer event definition", upcastOrigin(rec, at), at.SchemaVersion, et.version)
	case at.SchemaVersion < et.version:
		return out, fmt.Errorf("runtime: stored event %s has schema version %d and no upcaster from version %d to %d is registered; call runtime.RegisterUpcaster", upcastOrigin(rec, at), at.SchemaVersion, at.SchemaVersion, at.SchemaVersion+1)
	}
	v, err := r.unmarshal(et, data)
	if err != nil {
		return out, fmt.Errorf("runtime: decoding event %s: %w", upcastOrigin(rec, at), err)
	}
	return append(out, upcastValue{typ: et.name, value: v}), nil
}

// notOneEvent is the error of a one-value read of a record that upcasts to
// n ≠ 1 values.
func notOneEvent(rec *journal.Record, values []upcastValue) error {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = v.typ
	}
	return fmt.Errorf("%w: stored event %q (id %s) upcasts to %d events [%s]; read it with Runtime.DecodeValues or Runtime.Decoding",
		ErrNotOneEvent, rec.Type, rec.ID, len(values), strings.Join(names, " "))
}
