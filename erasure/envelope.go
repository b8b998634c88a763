package erasure

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// EnvelopeKey is the single key of the object that replaces a sealed field's
// value in event data.
const EnvelopeKey = "$personal"

// EnvelopeVersion is the version of the envelope format Seal writes. Open
// reads every version up to it and refuses newer ones.
const EnvelopeVersion = 1

const nonceSize = 12

var envelopeMarker = []byte(`"` + EnvelopeKey + `"`)

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
	b := make([]byte, 0, 32+len(subject)+len(eventType)+len(field))
	b = fmt.Appendf(b, "scribe.personal.v%d|%d:%s|%d:%s|%d:%s", v, len(subject), subject, len(eventType), eventType, len(field), field)
	return b
}

func newGCM(key DataKey) (cipher.AEAD, error) {
	if !key.Valid() {
		return nil, fmt.Errorf("%w: the data key is empty", ErrInvalidArgument)
	}
	block, err := aes.NewCipher(key.k[:])
	if err != nil {
		return nil, fmt.Errorf("erasure: AES: %w", err)
	}
	return cipher.NewGCM(block)
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
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: event %q: the data to seal is not a JSON object", ErrInvalidArgument, p.EventType)
	}
	aead, err := newGCM(p.Key)
	if err != nil {
		return nil, err
	}
	sealed := false
	for _, f := range p.Fields {
		v, ok := obj[f]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		buf := make([]byte, nonceSize, nonceSize+len(v)+aead.Overhead())
		if _, err := rand.Read(buf); err != nil {
			return nil, fmt.Errorf("erasure: reading a random nonce: %w", err)
		}
		buf = aead.Seal(buf, buf[:nonceSize], v, aad(EnvelopeVersion, p.Subject, p.EventType, f))
		env, err := json.Marshal(wrapped{E: &envelope{V: EnvelopeVersion, Subject: p.Subject, CT: base64.StdEncoding.EncodeToString(buf)}})
		if err != nil {
			return nil, fmt.Errorf("erasure: encoding an envelope: %w", err)
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

// HasSealed reports whether data may hold sealed fields. It is a cheap
// byte search: false means certainly none.
func HasSealed(data []byte) bool { return bytes.Contains(data, envelopeMarker) }

// sealedFields returns the top-level fields of obj whose value is an
// envelope.
func sealedFields(obj map[string]json.RawMessage) map[string]*envelope {
	var out map[string]*envelope
	for f, v := range obj {
		v = bytes.TrimSpace(v)
		if len(v) == 0 || v[0] != '{' || !bytes.Contains(v, envelopeMarker) {
			continue
		}
		var w wrapped
		if err := json.Unmarshal(v, &w); err != nil || w.E == nil {
			continue
		}
		if out == nil {
			out = map[string]*envelope{}
		}
		out[f] = w.E
	}
	return out
}

// Subjects returns the distinct subjects of the sealed fields of the JSON
// object data (none when data holds no envelope).
func Subjects(data []byte) ([]string, error) {
	if !HasSealed(data) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%w: event data is not a JSON object", ErrCorrupt)
	}
	var out []string
	seen := map[string]bool{}
	for _, env := range sealedFields(obj) {
		if !seen[env.Subject] {
			seen[env.Subject] = true
			out = append(out, env.Subject)
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
	// (nil when none), in no particular order.
	Erased []string
	// ErasedSubjects are the erased subjects those fields belonged to.
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
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return Opened{}, fmt.Errorf("%w: event %q: its data is not a JSON object", ErrCorrupt, eventType)
	}
	fields := sealedFields(obj)
	if len(fields) == 0 {
		return Opened{Data: data}, nil
	}
	var out Opened
	aeads := map[string]cipher.AEAD{}
	for f, env := range fields {
		if env.V < 1 || env.V > EnvelopeVersion {
			return Opened{}, fmt.Errorf("%w: event %q field %q: envelope version %d is not supported (at most %d); upgrade Scribe", ErrCorrupt, eventType, f, env.V, EnvelopeVersion)
		}
		if _, gone := keys.Erased[env.Subject]; gone {
			delete(obj, f)
			out.Erased = append(out.Erased, f)
			if !contains(out.ErasedSubjects, env.Subject) {
				out.ErasedSubjects = append(out.ErasedSubjects, env.Subject)
			}
			continue
		}
		key, ok := keys.Keys[env.Subject]
		if !ok {
			return Opened{}, fmt.Errorf("%w: event %q field %q is sealed for subject %q, which the key store knows neither a key nor an erasure of; configure the key store the data was written with", ErrKeyMissing, eventType, f, env.Subject)
		}
		aead := aeads[env.Subject]
		if aead == nil {
			var err error
			if aead, err = newGCM(key); err != nil {
				return Opened{}, err
			}
			aeads[env.Subject] = aead
		}
		raw, err := base64.StdEncoding.DecodeString(env.CT)
		if err != nil || len(raw) < nonceSize+aead.Overhead() {
			return Opened{}, fmt.Errorf("%w: event %q field %q: the ciphertext is malformed", ErrCorrupt, eventType, f)
		}
		plain, err := aead.Open(nil, raw[:nonceSize], raw[nonceSize:], aad(env.V, env.Subject, eventType, f))
		if err != nil {
			return Opened{}, fmt.Errorf("%w: event %q field %q does not authenticate under subject %q's key (altered, or moved from another field or event)", ErrCorrupt, eventType, f, env.Subject)
		}
		obj[f] = plain
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return Opened{}, fmt.Errorf("%w: event %q: re-encoding the opened data failed", ErrCorrupt, eventType)
	}
	out.Data = b
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
