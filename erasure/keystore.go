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
	// ErrKeyStoreUnavailable: the key store cannot be used: its tables or
	// schema are missing (the journal was restored without its key store,
	// or the service points at another database) or its database cannot
	// be reached. Sealed data can be neither opened nor sealed until then;
	// it says nothing about whether a subject was erased. Retrying is safe
	// and succeeds once the key store is restored or reachable again; an
	// unreachable database also matches journal.ErrUnavailable.
	ErrKeyStoreUnavailable = errors.New("erasure: key store unavailable")
	// ErrNotErasing: DestroyKey or CompleteErasure of a subject whose
	// erasure was not begun; nothing was changed. Call Erase (or
	// KeyStore.BeginErasure) first; retrying the same call is useless.
	ErrNotErasing = errors.New("erasure: no erasure of the subject was begun")
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

// ErasureState is where a subject's erasure stands. An erasure moves
// through the states in order and never back: NotErased → ErasurePending →
// ErasureKeyDestroyed → ErasureComplete (see Erase for the steps between).
type ErasureState int

const (
	// NotErased: no erasure of the subject was begun.
	NotErased ErasureState = iota
	// ErasurePending: the erasure is decided and durable
	// (KeyStore.BeginErasure); the key is refused to every caller
	// (DataKey fails, Lookup reports the subject erased) but still stored,
	// and the erasure record may be missing. A sweep (CompletePending, run
	// by every runtime) completes it.
	ErasurePending
	// ErasureKeyDestroyed: the erasure is still pending, but the key is
	// destroyed (or the subject never had one); the erasure record, the
	// snapshots' deletion and the completion may be missing.
	ErasureKeyDestroyed
	// ErasureComplete: every step is done.
	ErasureComplete
)

// String returns "no", "pending", "key destroyed" or "complete".
func (s ErasureState) String() string {
	switch s {
	case NotErased:
		return "no"
	case ErasurePending:
		return "pending"
	case ErasureKeyDestroyed:
		return "key destroyed"
	case ErasureComplete:
		return "complete"
	}
	return fmt.Sprintf("ErasureState(%d)", int(s))
}

// Begun reports whether an erasure was begun (any state but NotErased):
// from then on the subject's key is refused.
func (s ErasureState) Begun() bool { return s > NotErased }

// Erasure records that a subject's erasure was begun: who asked, when, and
// how far it got. It holds no personal data.
type Erasure struct {
	Subject string
	By      string
	At      time.Time
	// State is how far the erasure got when this value was read.
	State ErasureState
	// Sequence orders erasures in the key store: each erasure begun gets a
	// sequence number greater than every number visible before it commits,
	// so a follower that has seen every erasure up to Sequence n misses
	// none by asking for those after n (KeyStore.Erasures). Gaps are
	// allowed.
	Sequence uint64
	// Repeat is set on the result of a BeginErasure (or Erase) of a
	// subject whose erasure was already begun: By and At are the original
	// erasure's.
	Repeat bool
	// Known and Position are set by Erase only. Known: the key store held a
	// key or an erasure of the subject before the call; false means no
	// personal data was ever stored for it (a typo?): the erasure only
	// blocks it from now on. Position: where the erasure record is in the
	// journal, to wait until read models have applied it (zero when the
	// erasure did not get that far).
	Known    bool
	Position journal.Position
}

// Subject is a key store's view of one subject.
type Subject struct {
	ID        string
	CreatedAt time.Time
	// Erasure is where the subject's erasure stands (NotErased for a live
	// subject); ErasedAt and ErasedBy say when it was begun and by whom.
	// Only ErasureComplete means that every step is done.
	Erasure  ErasureState
	ErasedAt time.Time
	ErasedBy string
	// Erased is Erasure.Begun(): the subject's key is refused (its sealed
	// data can no longer be read), whether or not every step is done. It
	// does not mean complete: ask Erasure for that.
	Erased bool
}

// Lookup is the answer of KeyStore.Lookup: the keys of the subjects that
// have one, and the erasures of those whose erasure was begun (pending or
// complete: their keys are never returned). A subject in neither map is
// unknown to the store.
type Lookup struct {
	Keys   map[string]DataKey
	Erased map[string]Erasure
}

// ErasureQuery selects erasures for KeyStore.Erasures.
type ErasureQuery struct {
	// After: only erasures whose Sequence is greater. 0: from the first.
	After uint64
	// Limit: at most this many (≤ 0: all).
	Limit int
	// PendingOnly: only erasures not yet complete.
	PendingOnly bool
}

// KeyStore keeps one data key per subject, separately from the journal, and
// destroys it on erasure. Implementations: NewMemoryKeyStore, and
// postgres.NewKeyStore; a KMS-backed store can keep its data keys wrapped
// by a master key behind the same interface. Package erasuretest is the
// conformance suite every implementation passes.
//
// An erasure takes several calls (see Erase): BeginErasure makes it durable
// and visible at once (no key is returned for the subject afterwards), then
// DestroyKey and CompleteErasure record its progress. Each call is
// idempotent, so a crash between any two leaves a pending erasure that
// CompletePending finishes.
//
// All methods are safe for concurrent use by any number of goroutines and
// processes sharing the store. DataKey and BeginErasure on one subject are
// linearizable: once BeginErasure has returned, no DataKey or Lookup call
// returns that subject's key, and two concurrent first DataKey calls return
// the same key. Returned values are owned by the caller.
type KeyStore interface {
	// DataKey returns subject's data key, creating it on first use. Once
	// the subject's erasure is begun (pending or complete) it fails with a
	// *SubjectErasedError (ErrSubjectErased), forever.
	DataKey(ctx context.Context, subject string) (DataKey, error)
	// Lookup returns the keys of the given subjects that have one and the
	// erasures of those whose erasure was begun; it creates nothing.
	Lookup(ctx context.Context, subjects []string) (Lookup, error)
	// BeginErasure durably records that subject is being erased, by whom
	// and when (state ErasurePending), and gives the erasure its Sequence;
	// from its return on the key is refused everywhere. It is idempotent:
	// for a subject whose erasure was already begun it changes nothing and
	// returns that erasure with Repeat set. A subject never seen is
	// recorded too, so no personal data can be stored for it afterwards.
	BeginErasure(ctx context.Context, subject, by string) (Erasure, error)
	// DestroyKey destroys the key of a subject whose erasure was begun
	// (state ErasureKeyDestroyed, or ErasureComplete unchanged) and returns
	// the erasure. Idempotent. A subject whose erasure was not begun fails
	// with ErrNotErasing and keeps its key.
	DestroyKey(ctx context.Context, subject string) (Erasure, error)
	// CompleteErasure records that every step of subject's erasure is done
	// (state ErasureComplete; the key is destroyed too if it was not) and
	// returns the erasure. Idempotent. A subject whose erasure was not
	// begun fails with ErrNotErasing.
	CompleteErasure(ctx context.Context, subject string) (Erasure, error)
	// Erasures lists the erasures q selects (pending and complete ones,
	// or only pending ones), in ascending Sequence order.
	Erasures(ctx context.Context, q ErasureQuery) ([]Erasure, error)
	// ErasureHead returns a Sequence at least as great as that of every
	// erasure begun before the call (0 when there is none): a follower
	// that then asks Erasures for those after it misses none begun later.
	ErasureHead(ctx context.Context) (uint64, error)
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
