package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// DefaultKeyCacheSize is the default of Config.KeyCacheSize.
const DefaultKeyCacheSize = 10000

// EventOption adjusts the registration of an event type (RegisterEvent).
type EventOption func(*eventOptions)

type eventOptions struct {
	personal *PersonalData
}

// PersonalData declares which top-level JSON fields of an event type hold
// personal data and whose data it is (the subject). Exactly one of
// SubjectField and SubjectTagGroup is set.
type PersonalData struct {
	// Fields are the JSON names of the top-level fields holding personal
	// data. They are sealed (encrypted under the subject's data key, see
	// package erasure) before the event reaches the journal, and decode to
	// their zero value once the subject is erased. Required.
	Fields []string
	// SubjectField is the JSON name of a top-level string field holding the
	// subject ID (for example "customerId"). It stays readable: the subject
	// ID is an identifier, not personal data.
	SubjectField string
	// SubjectTagGroup takes the subject ID from the value of the event's tag
	// of this group (the tag "customer:42" gives subject "42"). For an
	// aggregate's event the stream's own tag counts.
	SubjectTagGroup string
}

// WithPersonalData declares the personal fields of the registered event
// type and their subject (see PersonalData). It needs Config.KeyStore.
func WithPersonalData(p PersonalData) EventOption {
	return func(o *eventOptions) {
		p.Fields = slices.Clone(p.Fields)
		o.personal = &p
	}
}

// validatePersonal checks a PersonalData declaration against the event's Go
// type (a struct's JSON field names).
func validatePersonal(name string, typ reflect.Type, p *PersonalData, ks erasure.KeyStore) error {
	if ks == nil {
		return regErr("event %q declares personal data, but Config.KeyStore is nil; configure a key store (erasure.NewMemoryKeyStore, postgres.NewKeyStore) so that its personal fields can be sealed and erased", name)
	}
	if len(p.Fields) == 0 {
		return regErr("event %q: WithPersonalData names no field; list the JSON names of its personal fields", name)
	}
	if (p.SubjectField == "") == (p.SubjectTagGroup == "") {
		return regErr("event %q: WithPersonalData needs exactly one of SubjectField (a JSON field holding the subject ID) and SubjectTagGroup (a tag group whose value is the subject ID)", name)
	}
	if strings.ContainsRune(p.SubjectTagGroup, ':') {
		return regErr("event %q: SubjectTagGroup %q contains ':'; name the group only (the text before the colon)", name, p.SubjectTagGroup)
	}
	known := jsonFieldNames(typ)
	seen := map[string]bool{}
	for _, f := range p.Fields {
		switch {
		case f == "":
			return regErr("event %q: WithPersonalData lists an empty field name", name)
		case seen[f]:
			return regErr("event %q: WithPersonalData lists field %q twice", name, f)
		case f == p.SubjectField:
			return regErr("event %q: the subject field %q cannot be personal too: it must stay readable to find the subject's key", name, f)
		case known != nil && !known[f]:
			return regErr("event %q: WithPersonalData names field %q, which Go type %s does not encode; use the JSON names (the json tags)", name, f, typ)
		}
		seen[f] = true
	}
	if known != nil && p.SubjectField != "" && !known[p.SubjectField] {
		return regErr("event %q: SubjectField %q is not a JSON field of Go type %s", name, p.SubjectField, typ)
	}
	return nil
}

// jsonFieldNames returns the top-level JSON names of a struct type's
// exported fields (nil for a map type: any name is possible).
func jsonFieldNames(typ reflect.Type) map[string]bool {
	if typ.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for n := range jsonFieldNames(f.Type) {
				out[n] = true
			}
			continue
		}
		out[name] = true
	}
	return out
}

// subjectOf returns the subject of an event with personal data: the value
// of its subject field in data, or of its tag of the subject group among
// tags (the stream's tag included). An event without a subject whose
// personal fields are all absent or null carries no personal data: subject
// "" and no error (an account opened without a customer, say). One with
// personal data but no subject is an error.
func subjectOf(name string, p *PersonalData, data []byte, tags []journal.Tag) (string, error) {
	field := func(f string) ([]byte, bool, error) {
		v, ok, err := erasure.TopLevelField(data, f)
		if err != nil {
			return nil, false, fmt.Errorf("runtime: event %q: its data is not a JSON object", name)
		}
		return v, ok, nil
	}
	carriesPersonal := func() (bool, error) {
		for _, f := range p.Fields {
			v, ok, err := field(f)
			if err != nil {
				return false, err
			}
			if ok && string(v) != "null" {
				return true, nil
			}
		}
		return false, nil
	}
	if p.SubjectTagGroup != "" {
		for _, t := range tags {
			if t.Group() == p.SubjectTagGroup {
				return t.Value(), nil
			}
		}
		carries, err := carriesPersonal()
		if err != nil {
			return "", err
		}
		if !carries {
			return "", nil
		}
		return "", fmt.Errorf("runtime: event %q has personal data whose subject is the value of its %q tag, but it carries no such tag; give it one (Tags)", name, p.SubjectTagGroup)
	}
	raw, ok, err := field(p.SubjectField)
	if err != nil {
		return "", err
	}
	var subject string
	if !ok || json.Unmarshal(raw, &subject) != nil || subject == "" {
		carries, err := carriesPersonal()
		if err != nil {
			return "", err
		}
		if !carries && (!ok || string(raw) == "null" || subject == "") {
			return "", nil
		}
		return "", fmt.Errorf("runtime: event %q has personal data, but its subject field %q is missing, empty or not a string; set it to the subject ID", name, p.SubjectField)
	}
	return subject, nil
}

// keyring is a Runtime's view of its key store: a bounded in-process cache
// of data keys, erasures and stream bindings in front of the KeyStore.
// Safe for concurrent use. Keys leave the cache when their subject's
// erasure record reaches this runtime (forget), or to make room.
type keyring struct {
	store erasure.KeyStore
	max   int

	mu     sync.Mutex
	keys   map[string]erasure.DataKey
	erased map[string]erasure.Erasure // erasures are permanent: safe to cache
	bound  map[bindKey]struct{}
	// dropped holds the erased subjects whose streams' actors this runtime
	// has evicted since (dropErased): every state it holds of them now was
	// rebuilt after the erasure, without their personal data.
	dropped map[string]struct{}
	// startHead is the journal's head when this runtime began to follow
	// erasure records: an erasure recorded at or before it was complete
	// (key destroyed) before this runtime could read the subject's data.
	startHead journal.Position
}

type bindKey struct {
	subject string
	stream  journal.StreamID
}

func newKeyring(store erasure.KeyStore, max int) *keyring {
	if store == nil {
		return nil
	}
	return &keyring{store: store, max: max, keys: map[string]erasure.DataKey{}, erased: map[string]erasure.Erasure{},
		bound: map[bindKey]struct{}{}, dropped: map[string]struct{}{}}
}

// makeRoom drops arbitrary entries of m until it has room for one more.
func makeRoom[K comparable, V any](m map[K]V, max int) {
	for k := range m {
		if len(m) < max {
			return
		}
		delete(m, k)
	}
}

// dataKey returns subject's key for sealing (creating it in the store on
// first use), or a *erasure.SubjectErasedError.
func (k *keyring) dataKey(ctx context.Context, subject string) (erasure.DataKey, error) {
	k.mu.Lock()
	if key, ok := k.keys[subject]; ok {
		k.mu.Unlock()
		return key, nil
	}
	if e, ok := k.erased[subject]; ok {
		k.mu.Unlock()
		return erasure.DataKey{}, &erasure.SubjectErasedError{Erasure: e}
	}
	k.mu.Unlock()
	key, err := k.store.DataKey(ctx, subject)
	if err != nil {
		return erasure.DataKey{}, err
	}
	k.mu.Lock()
	makeRoom(k.keys, k.max)
	k.keys[subject] = key
	k.mu.Unlock()
	return key, nil
}

// bind records, once per process and pair, that stream holds subject's
// personal data.
func (k *keyring) bind(ctx context.Context, subject string, stream journal.StreamID) error {
	bk := bindKey{subject, stream.Normalize()}
	k.mu.Lock()
	_, done := k.bound[bk]
	k.mu.Unlock()
	if done {
		return nil
	}
	if err := k.store.BindStream(ctx, subject, bk.stream); err != nil {
		return fmt.Errorf("runtime: recording that stream %s holds personal data of subject %q: %w", bk.stream, subject, err)
	}
	k.mu.Lock()
	makeRoom(k.bound, k.max)
	k.bound[bk] = struct{}{}
	k.mu.Unlock()
	return nil
}

// lookup returns the keys and erasures of subjects, from the cache when it
// has them.
func (k *keyring) lookup(ctx context.Context, subjects []string) (erasure.Lookup, error) {
	out := erasure.Lookup{Keys: make(map[string]erasure.DataKey, len(subjects))}
	var missing []string
	k.mu.Lock()
	for _, s := range subjects {
		if key, ok := k.keys[s]; ok {
			out.Keys[s] = key
		} else if e, ok := k.erased[s]; ok {
			if out.Erased == nil {
				out.Erased = map[string]erasure.Erasure{}
			}
			out.Erased[s] = e
		} else {
			missing = append(missing, s)
		}
	}
	k.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := k.store.Lookup(ctx, missing)
	if err != nil {
		return erasure.Lookup{}, fmt.Errorf("runtime: looking up data keys: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for s, key := range got.Keys {
		out.Keys[s] = key
		makeRoom(k.keys, k.max)
		k.keys[s] = key
	}
	for s, e := range got.Erased {
		if out.Erased == nil {
			out.Erased = map[string]erasure.Erasure{}
		}
		out.Erased[s] = e
		makeRoom(k.erased, k.max)
		k.erased[s] = e
	}
	return out, nil
}

// forget drops subject's cached key and bindings after its erasure, and
// remembers the erasure.
func (k *keyring) forget(e erasure.Erasure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.keys, e.Subject)
	for bk := range k.bound {
		if bk.subject == e.Subject {
			delete(k.bound, bk)
		}
	}
	makeRoom(k.erased, k.max)
	k.erased[e.Subject] = e
}

// markDropped records that this runtime evicted the actors of subject's
// streams after its erasure.
func (k *keyring) markDropped(subject string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	makeRoom(k.dropped, k.max)
	k.dropped[subject] = struct{}{}
}

// wasDropped reports whether this runtime holds no state of subject from
// before its erasure: markDropped was called for it, or its erasure record
// is at or before the head this runtime started from (the key was gone
// before the runtime could read the data).
func (k *keyring) wasDropped(ctx context.Context, j journal.Journal, subject string) (bool, error) {
	k.mu.Lock()
	_, ok := k.dropped[subject]
	start := k.startHead
	k.mu.Unlock()
	if ok {
		return true, nil
	}
	rec, err := j.ReadEvent(ctx, erasure.RecordID(subject))
	if errors.Is(err, journal.ErrNotFound) {
		return false, nil // the erasure is not recorded yet
	}
	if err != nil {
		return false, err
	}
	if rec.Position.After(start) {
		return false, nil // the watcher evicts its actors when it gets there
	}
	k.markDropped(subject)
	return true, nil
}

// open opens the sealed fields of a stored record's data.
func (k *keyring) open(ctx context.Context, rec *journal.Record) (erasure.Opened, error) {
	subjects, err := erasure.Subjects(rec.Data)
	if err != nil {
		return erasure.Opened{}, fmt.Errorf("runtime: stored event %q (id %s): %w", rec.Type, rec.ID, err)
	}
	keys, err := k.lookup(ctx, subjects)
	if err != nil {
		return erasure.Opened{}, err
	}
	op, err := erasure.Open(rec.Data, rec.Type, keys)
	if err != nil {
		return erasure.Opened{}, fmt.Errorf("runtime: stored event %q (id %s): %w", rec.Type, rec.ID, err)
	}
	return op, nil
}
