package erasure

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/scribe-es/scribe/journal"
)

// MaxSubjectLength bounds a subject ID, in bytes.
const MaxSubjectLength = 256

// MaxByLength bounds the "by" of an erasure (who or what asked for it), in
// bytes.
const MaxByLength = 256

// KeySize is the size of a data key in bytes (AES-256).
const KeySize = 32

// Errors of this package, matched with errors.Is.
var (
	// ErrSubjectErased: the subject was erased; personal data can never be
	// sealed for it again. Retrying is useless: use a new subject ID. The
	// error is a *SubjectErasedError.
	ErrSubjectErased = errors.New("erasure: subject erased")
	// ErrInvalidArgument: a subject ID, a "by" or a field name was empty,
	// too long or not valid UTF-8; nothing was read or written. Retrying
	// the same call is useless.
	ErrInvalidArgument = errors.New("erasure: invalid argument")
	// ErrKeyMissing: sealed data names a subject the key store knows
	// neither a key nor an erasure of. The key store is not the one the
	// data was sealed with, or it lost keys (restored from a backup older
	// than the data?). Retrying is useless until the right key store is
	// configured.
	ErrKeyMissing = errors.New("erasure: no data key for the subject")
	// ErrCorrupt: an envelope is malformed or fails authentication (it was
	// altered, or moved to another field, event type or subject). Retrying
	// is useless.
	ErrCorrupt = errors.New("erasure: sealed field is corrupt")
)

// SubjectErasedError details ErrSubjectErased: the subject and its erasure.
// It carries no personal data (a subject ID is an identifier, not personal
// data: see the package comment).
type SubjectErasedError struct {
	Erasure Erasure
}

// Error implements error.
func (e *SubjectErasedError) Error() string {
	return fmt.Sprintf("erasure: subject %q was erased at %s by %q, so no personal data can be stored for it again; use a new subject ID",
		e.Erasure.Subject, e.Erasure.At.UTC().Format(time.RFC3339), e.Erasure.By)
}

// Is makes errors.Is(err, ErrSubjectErased) true.
func (e *SubjectErasedError) Is(target error) bool { return target == ErrSubjectErased }

// DataKey is a subject's AES-256 data key. Its String, GoString, Format and
// LogValue never reveal the key: printing, logging or wrapping a DataKey in
// an error shows "[redacted]". The zero DataKey is invalid.
type DataKey struct {
	k *keyState
}

// keyState is a key and its AES-256-GCM instance, built once (the key
// schedule is the costly part of sealing a short value). cipher.AEAD from
// crypto/cipher is safe for concurrent use.
type keyState struct {
	k    [KeySize]byte
	aead cipher.AEAD
}

func newKeyState(k *[KeySize]byte) (DataKey, error) {
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return DataKey{}, fmt.Errorf("erasure: AES: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return DataKey{}, fmt.Errorf("erasure: AES-GCM: %w", err)
	}
	return DataKey{k: &keyState{k: *k, aead: aead}}, nil
}

// NewDataKey returns a fresh random data key from crypto/rand.
func NewDataKey() (DataKey, error) {
	var k [KeySize]byte
	if _, err := rand.Read(k[:]); err != nil {
		return DataKey{}, fmt.Errorf("erasure: reading random bytes for a data key: %w", err)
	}
	return newKeyState(&k)
}

// DataKeyFromBytes returns the data key of the KeySize bytes b (a key store
// loading a stored key). b is copied.
func DataKeyFromBytes(b []byte) (DataKey, error) {
	if len(b) != KeySize {
		return DataKey{}, fmt.Errorf("%w: a data key has %d bytes, got %d; the key store's data is damaged", ErrCorrupt, KeySize, len(b))
	}
	var k [KeySize]byte
	copy(k[:], b)
	return newKeyState(&k)
}

// Bytes returns a copy of the key material, for a key store to persist. It
// must never reach logs, errors or traces.
func (k DataKey) Bytes() []byte {
	if k.k == nil {
		return nil
	}
	out := make([]byte, KeySize)
	copy(out, k.k.k[:])
	return out
}

// Valid reports whether k holds a key.
func (k DataKey) Valid() bool { return k.k != nil }

const redacted = "[redacted]"

// String returns "[redacted]".
func (k DataKey) String() string { return redacted }

// GoString returns "[redacted]".
func (k DataKey) GoString() string { return redacted }

// Format prints "[redacted]" for every verb.
func (k DataKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue makes slog print "[redacted]".
func (k DataKey) LogValue() slog.Value { return slog.StringValue(redacted) }

// Erasure records that a subject was erased: who asked, and when. It holds
// no personal data.
type Erasure struct {
	Subject string
	By      string
	At      time.Time
	// Repeat is set on the result of an Erase of a subject that was already
	// erased: By and At are the original erasure's.
	Repeat bool
}

// Subject is a key store's view of one subject.
type Subject struct {
	ID        string
	CreatedAt time.Time
	// Erased is set once the subject's key is destroyed; ErasedAt and
	// ErasedBy say when and by whom.
	Erased   bool
	ErasedAt time.Time
	ErasedBy string
}

// Lookup is the answer of KeyStore.Lookup: the keys of the subjects that
// have one, and the erasures of those that were erased. A subject in neither
// map is unknown to the store.
type Lookup struct {
	Keys   map[string]DataKey
	Erased map[string]Erasure
}

// KeyStore keeps one data key per subject, separately from the journal, and
// destroys it on erasure. Implementations: NewMemoryKeyStore, and
// postgres.NewKeyStore; a KMS-backed store can keep its data keys wrapped
// by a master key behind the same interface.
//
// All methods are safe for concurrent use by any number of goroutines and
// processes sharing the store. DataKey and Erase on one subject are
// linearizable: once Erase has returned, no DataKey call returns that
// subject's key, and two concurrent first DataKey calls return the same
// key. Returned values are owned by the caller.
type KeyStore interface {
	// DataKey returns subject's data key, creating it on first use. For an
	// erased subject it fails with a *SubjectErasedError
	// (ErrSubjectErased), forever.
	DataKey(ctx context.Context, subject string) (DataKey, error)
	// Lookup returns the keys of the given subjects that have one and the
	// erasures of those that were erased; it creates nothing.
	Lookup(ctx context.Context, subjects []string) (Lookup, error)
	// Erase destroys subject's key and records who erased it (by) and when.
	// It is idempotent: erasing an erased subject changes nothing and
	// returns the original erasure with Repeat set. A subject never seen is
	// recorded as erased too, so no personal data can be stored for it
	// afterwards.
	Erase(ctx context.Context, subject, by string) (Erasure, error)
	// Subjects lists up to limit subjects (limit ≤ 0: all) with IDs
	// greater than after, in ascending ID order.
	Subjects(ctx context.Context, after string, limit int) ([]Subject, error)
	// BindStream records that stream holds events with subject's personal
	// data (so an erasure knows which snapshots and actors to drop).
	// Binding a pair again is a no-op. Binding is allowed after an erasure.
	BindStream(ctx context.Context, subject string, stream journal.StreamID) error
	// Streams returns the streams bound to subject, in no particular order.
	Streams(ctx context.Context, subject string) ([]journal.StreamID, error)
	// StreamSubjects returns the subjects bound to stream (erased ones
	// included), in no particular order: whose keys seal its snapshots.
	StreamSubjects(ctx context.Context, stream journal.StreamID) ([]string, error)
}

// ValidateSubject reports a subject ID that is empty, longer than
// MaxSubjectLength or not valid UTF-8, wrapping ErrInvalidArgument.
func ValidateSubject(subject string) error {
	switch {
	case subject == "":
		return fmt.Errorf("%w: the subject ID is empty; name the data subject (for example a customer ID)", ErrInvalidArgument)
	case len(subject) > MaxSubjectLength:
		return fmt.Errorf("%w: a subject ID of %d bytes is longer than %d; use a shorter ID", ErrInvalidArgument, len(subject), MaxSubjectLength)
	case !utf8.ValidString(subject):
		return fmt.Errorf("%w: the subject ID is not valid UTF-8", ErrInvalidArgument)
	}
	return nil
}

// ValidateBy reports an erasure's "by" that is empty, longer than
// MaxByLength or not valid UTF-8, wrapping ErrInvalidArgument.
func ValidateBy(by string) error {
	switch {
	case by == "":
		return fmt.Errorf("%w: \"by\" is empty; say who or what requested the erasure (an operator, a ticket)", ErrInvalidArgument)
	case len(by) > MaxByLength:
		return fmt.Errorf("%w: \"by\" of %d bytes is longer than %d", ErrInvalidArgument, len(by), MaxByLength)
	case !utf8.ValidString(by):
		return fmt.Errorf("%w: \"by\" is not valid UTF-8", ErrInvalidArgument)
	}
	return nil
}
