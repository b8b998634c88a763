package actors

import (
	"bytes"
)

// StateFingerprinter is implemented by models whose snapshots record the
// shape of their state type (runtime's aggregates do: a hash of the Go
// type's fields, names, tags and kinds). A snapshot is used only when it was
// saved with the model's current fingerprint: one saved with another (the
// state type changed shape and its schema version was not bumped) or with
// none (saved before fingerprints) is ignored, counted in
// scribe.snapshots.ignored, and the stream replayed.
type StateFingerprinter interface {
	StateFingerprint() string
}

// fingerprintHeader starts a fingerprinted snapshot's state bytes; the
// fingerprint and a newline follow, then the model's encoding.
const fingerprintHeader = "scribe-state-fingerprint:"

func fingerprintOf(m Model) string {
	if f, ok := m.(StateFingerprinter); ok {
		return f.StateFingerprint()
	}
	return ""
}

// WithFingerprint returns a model's encoded state data as a snapshot of a
// model with fingerprint fp holds it (data as is when fp is empty).
func WithFingerprint(fp string, data []byte) []byte {
	if fp == "" {
		return data
	}
	out := make([]byte, 0, len(fingerprintHeader)+len(fp)+1+len(data))
	out = append(out, fingerprintHeader...)
	out = append(out, fp...)
	out = append(out, '\n')
	return append(out, data...)
}

// stripFingerprint returns the state bytes of a snapshot saved with
// fingerprint fp, and false when it was saved with another or none. A model
// without a fingerprint (fp empty) takes the bytes as they are.
func stripFingerprint(fp string, data []byte) ([]byte, string, bool) {
	if fp == "" {
		return data, "", true
	}
	rest, ok := bytes.CutPrefix(data, []byte(fingerprintHeader))
	if !ok {
		return nil, "none", false
	}
	got, state, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return nil, "none", false
	}
	if string(got) != fp {
		return nil, string(got), false
	}
	return state, "", true
}
