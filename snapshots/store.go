package snapshots

import (
	"context"
	"errors"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// ErrNotFound is returned by Load when no snapshot matches.
var ErrNotFound = errors.New("snapshots: not found")

// ErrInvalidArgument is wrapped by every error a Store returns for input the
// caller got wrong (version 0, an empty stream tag, a negative keep): nothing
// was read or written. Validate and ValidateStream produce such errors.
var ErrInvalidArgument = errors.New("snapshots: invalid argument")

// Snapshot is a stream's serialized state at Version.
type Snapshot struct {
	Stream        journal.StreamID
	Version       uint64 // the stream version the state includes; ≥ 1
	SchemaVersion int    // the state's schema version
	State         []byte // opaque to the store; owned by the caller after Load
	// CreatedAt is when the snapshot was taken. Save stores it to the
	// microsecond; when it is zero, Save records the store's current time.
	CreatedAt time.Time
}

// Info describes a stored snapshot without its state (the snapshot index).
type Info struct {
	Version       uint64
	SchemaVersion int
	Size          int
	CreatedAt     time.Time
}

// Store persists snapshots. All methods are safe for concurrent use.
type Store interface {
	// Save stores a snapshot. Saving again at the same stream and version
	// replaces it. Version 0 or an empty stream tag is rejected.
	Save(ctx context.Context, s Snapshot) error
	// Load returns the newest snapshot of stream with Version ≤ atOrBelow
	// (math.MaxUint64 for the newest), or ErrNotFound.
	Load(ctx context.Context, stream journal.StreamID, atOrBelow uint64) (Snapshot, error)
	// List returns the stream's snapshots, oldest version first.
	List(ctx context.Context, stream journal.StreamID) ([]Info, error)
	// Prune deletes all but the newest keep snapshots of stream and returns how
	// many it deleted. keep must be ≥ 0.
	Prune(ctx context.Context, stream journal.StreamID, keep int) (int, error)
}
