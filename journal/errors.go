package journal

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them (with %w or a typed error whose Is
// matches), so callers test with errors.Is.
var (
	// ErrVersionMismatch: an expected per-tag version did not match the stream's
	// current version, or another writer claimed the version first.
	ErrVersionMismatch = errors.New("journal: version mismatch")
	// ErrAppendConditionFailed: an event matching the DCB condition's query
	// exists after the condition's position.
	ErrAppendConditionFailed = errors.New("journal: append condition failed")
	// ErrSessionExpired: the writer's lease or node session has expired.
	ErrSessionExpired = errors.New("journal: session expired")
	// ErrInvalidSession: the lease is not the stream's current lease (another
	// writer acquired it since: a newer epoch), or it was released.
	ErrInvalidSession = errors.New("journal: invalid session")
	// ErrStoreNotOpen: the journal is closed, or (Postgres) not migrated.
	ErrStoreNotOpen = errors.New("journal: store not open")
	// ErrOpenTimeout: a stream's lease could not be acquired within the open
	// timeout because another live holder has it.
	ErrOpenTimeout = errors.New("journal: open timeout")
	// ErrInvalidEvent: an event (or the event list) failed validation; nothing was written.
	ErrInvalidEvent = errors.New("journal: invalid event")
	// ErrDuplicateMismatch: some but not all of an append's event IDs are
	// already stored, or a stored ID holds a different event.
	ErrDuplicateMismatch = errors.New("journal: duplicate mismatch")
	// ErrInvalidQuery: a query or read option is malformed.
	ErrInvalidQuery = errors.New("journal: invalid query")
	// ErrNotFound: the requested event, snapshot or stream does not exist.
	ErrNotFound = errors.New("journal: not found")
	// ErrOutcomeUnknown: the connection failed while the commit was in flight;
	// the append may or may not be stored. Retrying the same append (same event
	// IDs) resolves it: a stored append comes back marked Duplicate.
	ErrOutcomeUnknown = errors.New("journal: append outcome unknown")
	// ErrUnavailable: the store cannot be reached or is shutting down
	// (connection refused or reset, administrator shutdown, no pooled
	// connection before the context's deadline). Nothing about the store's
	// contents is implied: a read returned nothing, a write either wrote
	// nothing or, when the error also matches ErrOutcomeUnknown, may have
	// been stored. Retrying later is safe.
	ErrUnavailable = errors.New("journal: store unavailable")
	// ErrNodeSuperseded: a node session was superseded by a newer
	// incarnation of the same node ID (OpenNode was called again with that
	// ID). Errors matching it also match ErrInvalidSession. When the older
	// incarnation's process is still alive, two live processes share one
	// node ID: the older must stop serving rather than open the node again,
	// or the two take each other's leases forever.
	ErrNodeSuperseded = errors.New("journal: node session superseded by a newer incarnation")
	// ErrConfiguration: the store cannot be used as configured, and trying
	// again will not change that: at start-up the database could not be
	// reached (wrong host or port, nothing listening), refused the
	// credentials, does not exist, or its schema is not migrated or was
	// migrated by a newer, incompatible build. The error says what to
	// check. It is never retryable: fix the configuration (or migrate, or
	// upgrade) and start again. The same connection failure after a
	// successful start is an outage and matches ErrUnavailable instead.
	ErrConfiguration = errors.New("journal: store misconfigured")
)

// VersionMismatchError details ErrVersionMismatch for one stream.
type VersionMismatchError struct {
	Stream   StreamID
	Expected uint64
	Actual   uint64
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("journal: version mismatch on stream %s: expected version %d, found %d; reload the stream and decide again", e.Stream, e.Expected, e.Actual)
}

// Is matches ErrVersionMismatch.
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersionMismatch }

// InvalidEventError details ErrInvalidEvent: which event (Index, -1 for the list
// as a whole) and which field was wrong, and why.
type InvalidEventError struct {
	Index  int
	Field  string
	Reason string
}

func (e *InvalidEventError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("journal: invalid event: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("journal: invalid event %d: %s: %s", e.Index, e.Field, e.Reason)
}

// Is matches ErrInvalidEvent.
func (e *InvalidEventError) Is(target error) bool { return target == ErrInvalidEvent }

// SessionError details ErrSessionExpired or ErrInvalidSession for one stream.
type SessionError struct {
	Stream StreamID
	Err    error // ErrSessionExpired or ErrInvalidSession
	Detail string
	// Node reports that the writer's node session failed (none, superseded,
	// closed, expired): no lease of that node is valid. When false, the
	// node session is live and the stream's own lease is not current (never
	// acquired here, taken over, released, revoked by a partition move): a
	// writer may acquire the stream again.
	Node bool
}

// Is matches ErrLeaseRevoked when the stream's own lease, not the node
// session, is not current.
func (e *SessionError) Is(target error) bool {
	return target == ErrLeaseRevoked && !e.Node && e.Err == ErrInvalidSession
}

// ErrLeaseRevoked is matched (besides ErrInvalidSession) by a fencing
// failure of a stream's own lease under a live node session: the stream was
// never acquired where the append went, was taken over, released, or its
// lease revoked by a partition move. The append wrote nothing. The writer
// may acquire the stream again: Acquire waits for another live holder and
// fails with ErrOpenTimeout while that holder keeps it.
var ErrLeaseRevoked = errors.New("journal: the stream's lease was revoked")

// LeaseRevoked reports whether err says the writer's lease of a stream was
// revoked (ErrLeaseRevoked) and the call certainly wrote nothing (not
// ErrOutcomeUnknown).
func LeaseRevoked(err error) bool {
	return errors.Is(err, ErrLeaseRevoked) && !errors.Is(err, ErrOutcomeUnknown)
}

func (e *SessionError) Error() string {
	return fmt.Sprintf("%v on stream %s: %s", e.Err, e.Stream, e.Detail)
}

// Unwrap returns the sentinel.
func (e *SessionError) Unwrap() error { return e.Err }

// ChainError reports the first broken link of a stream's hash chain.
type ChainError struct {
	Stream   StreamID
	Version  uint64
	Position Position
	Reason   string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("journal: hash chain of stream %s broken at version %d (position %s): %s", e.Stream, e.Version, e.Position, e.Reason)
}

// Retention sentinels.
var (
	// ErrArchived: a read asked for events of a stream at or below the
	// stream's cut: they were retired into the archive (see Checkpoint). The
	// error is an *ArchivedError naming the cut. It is not retryable as is:
	// read from the cut's version + 1, or read the archive through an
	// ArchiveReader.
	ErrArchived = errors.New("journal: events archived")
	// ErrStreamRetired: an append named a stream that was retired whole
	// behind a tombstone. Its versions are never reused, so no retry can
	// succeed: the error is an *StreamRetiredError and is final.
	ErrStreamRetired = errors.New("journal: stream retired")
	// ErrSnapshotRequired: a retention policy would retire events of an
	// aggregate stream past its newest snapshot, so recovering the aggregate
	// would need archived events. Nothing was retired; take a snapshot at or
	// after the cut first (or retire less).
	ErrSnapshotRequired = errors.New("journal: snapshot required before retiring events")
)

// ArchivedError details ErrArchived: the stream whose events were asked for
// and its cut, the version and position of its newest archived event. Events
// with versions above CutVersion are hot and read as usual.
type ArchivedError struct {
	Stream      StreamID
	CutVersion  uint64
	CutPosition Position
	// FromVersion is the version the read asked for (≤ CutVersion).
	FromVersion uint64
	// Retired reports that the stream is closed for good behind a
	// tombstone; the error then also matches ErrStreamRetired.
	Retired bool
}

func (e *ArchivedError) Error() string {
	if e.Retired {
		return fmt.Sprintf("journal: stream %s is retired (tombstone) and archived up to version %d (position %s), version %d was asked for: read it with ReadStreamWithArchive; it takes no more events",
			e.Stream, e.CutVersion, e.CutPosition, e.FromVersion)
	}
	return fmt.Sprintf("journal: stream %s is archived up to version %d (position %s) and version %d was asked for; read from version %d on, or read the archive through journal.ArchiveReader (ReadStreamWithArchive)",
		e.Stream, e.CutVersion, e.CutPosition, e.FromVersion, e.CutVersion+1)
}

// Is matches ErrArchived, and ErrStreamRetired when the stream is retired.
func (e *ArchivedError) Is(target error) bool {
	return target == ErrArchived || (e.Retired && target == ErrStreamRetired)
}

// StreamRetiredError details ErrStreamRetired: the stream and the version
// it was retired at (its last version, which is never reused).
type StreamRetiredError struct {
	Stream  StreamID
	Version uint64
}

func (e *StreamRetiredError) Error() string {
	return fmt.Sprintf("journal: stream %s was retired at version %d behind a tombstone and takes no more events; a retry cannot succeed: write to another stream", e.Stream, e.Version)
}

// Is matches ErrStreamRetired.
func (e *StreamRetiredError) Is(target error) bool { return target == ErrStreamRetired }
