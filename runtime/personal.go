package runtime

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// EventOption adjusts an event type's registration.
type EventOption func(*eventOptions)

type eventOptions struct {
	personal *PersonalData
	schema   json.RawMessage // WithSchema (types.go); nil: derived
}

// PersonalData declares an event type's personal data and its subject.
type PersonalData struct {
	// Fields are the JSON names of the top-level personal fields: sealed
	// under the subject's key before they reach the journal, they read as
	// zero values once the subject is erased. Required.
	Fields []string
	// Exactly one names the subject ID: SubjectField, a top-level string
	// field, left readable (an ID is not personal data), or SubjectTagGroup,
	// the group of the event's tag (the stream's own included) whose value
	// is the ID ("customer:42" gives "42").
	SubjectField    string
	SubjectTagGroup string
}

// WithPersonalData declares the event type's personal data; it needs
// Config.KeyStore.
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
