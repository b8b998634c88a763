package erasure

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// EnvelopeKey is the single key of the object that replaces a sealed field's
// value in event data.
const EnvelopeKey = "$personal"

// EnvelopeVersion is the version of the envelope format Seal writes. Open
// reads every version up to it and refuses newer ones.
const EnvelopeVersion = 1

const nonceSize = 12

// envelopeMarker is the envelope's key as it appears in JSON.
const envelopeMarker = `"` + EnvelopeKey + `"`

// envelope is the object under EnvelopeKey.
type envelope struct {
	V       int    `json:"v"`
	Subject string `json:"subject"`
	// CT is base64 (standard, padded) of nonce (12 bytes) | ciphertext |
	// GCM tag (16 bytes).
	CT string `json:"ct"`
}

type wrapped struct {
	E *envelope `json:"$personal"`
}

// aad binds a sealed value to its envelope version, subject, event type and
// field. Each part is length-prefixed, so no two different triples share
// their authenticated data.
func aad(v int, subject, eventType, field string) []byte {
	return appendAAD(make([]byte, 0, 48+len(subject)+len(eventType)+len(field)), v, subject, eventType, field)
}

// appendAAD appends "scribe.personal.v<v>|<len>:<subject>|<len>:<type>|<len>:<field>".
func appendAAD(b []byte, v int, subject, eventType, field string) []byte {
	b = append(b, "scribe.personal.v"...)
	b = strconv.AppendInt(b, int64(v), 10)
	for _, part := range [...]string{subject, eventType, field} {
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(len(part)), 10)
		b = append(b, ':')
		b = append(b, part...)
	}
	return b
}

func newGCM(key DataKey) (cipher.AEAD, error) {
	if !key.Valid() {
		return nil, fmt.Errorf("%w: the data key is empty", ErrInvalidArgument)
	}
	return key.k.aead, nil
}

// SealParams says which fields of which event to seal, for whom.
type SealParams struct {
	// EventType is the event's type name; it is bound into each field's
	// authenticated data.
	EventType string
	// Subject is the data subject whose key seals the fields.
	Subject string
	// Fields are the JSON names of the top-level fields to seal. A field
	// absent from the object, or null, is left as it is.
	Fields []string
	// Key is Subject's data key.
	Key DataKey
}

// Seal returns the JSON object data with the value of each of p.Fields
// replaced by an envelope holding it encrypted under p.Key. data must be a
// JSON object; the result's keys are sorted. Errors never contain the
// data.
func Seal(data []byte, p SealParams) ([]byte, error) {
	if err := ValidateSubject(p.Subject); err != nil {
		return nil, err
	}
	aead, err := newGCM(p.Key)
	if err != nil {
		return nil, err
	}
	var buf [16]member
	if ms, ok := scanObject(data, buf[:0]); ok {
		return sealMembers(data, ms, aead, p)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: event %q: the data to seal is not a JSON object", ErrInvalidArgument, p.EventType)
	}
	sealed := false
	for _, f := range p.Fields {
		v, ok := obj[f]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		env, err := appendEnvelope(nil, aead, p, f, v)
		if err != nil {
			return nil, err
		}
		obj[f] = env
		sealed = true
	}
	if !sealed {
		return data, nil
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("erasure: encoding sealed event %q: %w", p.EventType, err)
	}
	return out, nil
}

// sealMembers seals the members ms (scanned from data) named in p.Fields,
// rewriting their values in place.
func sealMembers(data []byte, ms []member, aead cipher.AEAD, p SealParams) ([]byte, error) {
	var out []byte
	last := 0
	for _, m := range ms {
		v := data[m.start:m.end]
		field := ""
		for _, f := range p.Fields {
			if m.is(data, f) {
				field = f
				break
			}
		}
		if field == "" || string(v) == "null" {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(data)+128)
		}
		out = append(out, data[last:m.start]...)
		var err error
		if out, err = appendEnvelope(out, aead, p, field, v); err != nil {
			return nil, err
		}
		last = m.end
	}
	if out == nil {
		return data, nil
	}
	return append(out, data[last:]...), nil
}

// appendEnvelope appends the envelope of field's value v to dst.
func appendEnvelope(dst []byte, aead cipher.AEAD, p SealParams, field string, v []byte) ([]byte, error) {
	var nonce [nonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("erasure: reading a random nonce: %w", err)
	}
	var scratch [256]byte // nonce | ciphertext | tag of a short value, and the AAD, on the stack
	sealed := append(scratch[:0], nonce[:]...)
	var adBuf [128]byte
	ad := appendAAD(adBuf[:0], EnvelopeVersion, p.Subject, p.EventType, field)
	sealed = aead.Seal(sealed, nonce[:], v, ad)
	dst = append(dst, `{"$personal":{"v":1,"subject":`...)
	if plainSubject(p.Subject) {
		dst = append(dst, '"')
		dst = append(dst, p.Subject...)
		dst = append(dst, '"')
	} else {
		q, err := json.Marshal(p.Subject)
		if err != nil {
			return nil, fmt.Errorf("erasure: encoding a subject: %w", err)
		}
		dst = append(dst, q...)
	}
	dst = append(dst, `,"ct":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, sealed)
	return append(dst, `"}}`...), nil
}

// plainSubject reports a subject JSON encodes as is between quotes.
func plainSubject(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// topLevelFieldSlow is TopLevelField through encoding/json.
func topLevelFieldSlow(data []byte, name string) ([]byte, bool, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, false, fmt.Errorf("%w: the data is not a JSON object", ErrInvalidArgument)
	}
	v, ok := obj[name]
	return v, ok, nil
}

// HasSealed reports whether data may hold sealed fields. It is a cheap
// byte search: false means certainly none.
func HasSealed(data []byte) bool { return bytes.Contains(data, []byte(envelopeMarker)) }

// field is one top-level member of an event's data: its name, its key as
// written (quoted), its value, and its envelope when the value is one.
type field struct {
	name      string
	quotedKey []byte
	value     []byte
	env       *envelope
}

// parseEnvelope returns the envelope v holds, nil when v is not one.
func parseEnvelope(v []byte) *envelope {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '{' || !bytes.Contains(v, []byte(envelopeMarker)) {
		return nil
	}
	if e := parseEnvelopeExact(v); e != nil {
		return e
	}
	var w wrapped
	if err := json.Unmarshal(v, &w); err != nil || w.E == nil {
		return nil
	}
	return w.E
}

// parseEnvelopeExact parses an envelope exactly as appendEnvelope writes
// it with a plain subject, without encoding/json; nil for anything else.
func parseEnvelopeExact(v []byte) *envelope {
	const pre, mid, post = `{"$personal":{"v":1,"subject":"`, `","ct":"`, `"}}`
	if !bytes.HasPrefix(v, []byte(pre)) || !bytes.HasSuffix(v, []byte(post)) {
		return nil
	}
	body := v[len(pre) : len(v)-len(post)]
	i := bytes.Index(body, []byte(mid))
	if i < 0 {
		return nil
	}
	subject, ct := body[:i], body[i+len(mid):]
	if bytes.ContainsAny(subject, `"\`) || bytes.ContainsAny(ct, `"\`) || !plainSubject(string(subject)) {
		return nil
	}
	return &envelope{V: 1, Subject: string(subject), CT: string(ct)}
}

// fields returns the top-level members of the JSON object data, in order
// (by the scanner; through encoding/json, sorted by name, when the scanner
// gives up).
func fields(data []byte) ([]field, bool) {
	var buf [16]member
	if ms, ok := scanObject(data, buf[:0]); ok {
		out := make([]field, len(ms))
		for i, m := range ms {
			v := data[m.start:m.end]
			out[i] = field{name: string(data[m.ks:m.ke]), quotedKey: data[m.ks-1 : m.ke+1], value: v, env: parseEnvelope(v)}
		}
		return out, true
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, false
	}
	out := make([]field, 0, len(obj))
	for k, v := range obj {
		qk, err := json.Marshal(k)
		if err != nil {
			return nil, false
		}
		out = append(out, field{name: k, quotedKey: qk, value: v, env: parseEnvelope(v)})
	}
	slices.SortFunc(out, func(a, b field) int { return strings.Compare(a.name, b.name) })
	return out, true
}

// Subjects returns the distinct subjects of the sealed fields of the JSON
// object data (none when data holds no envelope).
func Subjects(data []byte) ([]string, error) {
	if !HasSealed(data) {
		return nil, nil
	}
	fs, ok := fields(data)
	if !ok {
		return nil, fmt.Errorf("%w: event data is not a JSON object", ErrCorrupt)
	}
	var out []string
	for _, f := range fs {
		if f.env != nil && !slices.Contains(out, f.env.Subject) {
			out = append(out, f.env.Subject)
		}
	}
	return out, nil
}

// Opened is the result of Open.
type Opened struct {
	// Data is the JSON object with every sealed field opened, or removed
	// when its subject was erased.
	Data []byte
	// Erased names the fields removed because their subject was erased
	// (nil when none), sorted.
	Erased []string
	// ErasedSubjects are the erased subjects those fields belonged to,
	// sorted.
	ErasedSubjects []string
}

// Open returns data (a JSON object of event type eventType) with each sealed
// field replaced by its plaintext value, using the keys in keys. A field
// whose subject is in keys.Erased is removed and named in Opened.Erased:
// erasure is never an error. A subject in neither map fails with
// ErrKeyMissing; an envelope that does not authenticate fails with
// ErrCorrupt. Data without envelopes is returned as is. Errors never
// contain the data or a key.
func Open(data []byte, eventType string, keys Lookup) (Opened, error) {
	if !HasSealed(data) {
		return Opened{Data: data}, nil
	}
	fs, ok := fields(data)
	if !ok {
		return Opened{}, fmt.Errorf("%w: event %q: its data is not a JSON object", ErrCorrupt, eventType)
	}
	if !slices.ContainsFunc(fs, func(f field) bool { return f.env != nil }) {
		return Opened{Data: data}, nil
	}
	var out Opened
	buf := make([]byte, 0, len(data))
	buf = append(buf, '{')
	written := 0
	write := func(f field, v []byte) {
		if written > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, f.quotedKey...)
		buf = append(buf, ':')
		buf = append(buf, v...)
		written++
	}
	for _, f := range fs {
		env := f.env
		if env == nil {
			write(f, f.value)
			continue
		}
		if env.V < 1 || env.V > EnvelopeVersion {
			return Opened{}, fmt.Errorf("%w: event %q field %q: envelope version %d is not supported (at most %d); upgrade Scribe", ErrCorrupt, eventType, f.name, env.V, EnvelopeVersion)
		}
		if _, gone := keys.Erased[env.Subject]; gone {
			out.Erased = append(out.Erased, f.name)
			if !contains(out.ErasedSubjects, env.Subject) {
				out.ErasedSubjects = append(out.ErasedSubjects, env.Subject)
			}
			continue
		}
		key, ok := keys.Keys[env.Subject]
		if !ok {
			return Opened{}, fmt.Errorf("%w: event %q field %q is sealed for subject %q, which the key store knows neither a key nor an erasure of; configure the key store the data was written with", ErrKeyMissing, eventType, f.name, env.Subject)
		}
		aead, err := newGCM(key)
		if err != nil {
			return Opened{}, err
		}
		raw, err := base64.StdEncoding.AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(env.CT))), []byte(env.CT))
		if err != nil || len(raw) < nonceSize+aead.Overhead() {
			return Opened{}, fmt.Errorf("%w: event %q field %q: the ciphertext is malformed", ErrCorrupt, eventType, f.name)
		}
		var adBuf [128]byte
		plain, err := aead.Open(raw[nonceSize:nonceSize], raw[:nonceSize], raw[nonceSize:], appendAAD(adBuf[:0], env.V, env.Subject, eventType, f.name))
		if err != nil {
			return Opened{}, fmt.Errorf("%w: event %q field %q does not authenticate under subject %q's key (altered, or moved from another field or event)", ErrCorrupt, eventType, f.name, env.Subject)
		}
		// plain is the JSON value Seal took from valid event data, and GCM
		// authenticated it: no need to validate it again.
		write(f, plain)
	}
	out.Data = append(buf, '}')
	slices.Sort(out.Erased)
	slices.Sort(out.ErasedSubjects)
	return out, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
