package tagconsistency

import (
	"context"

	"github.com/scribe-es/scribe/journal"
)

// Reservation is a tag owner's grant of its stream to one DCB command: while a
// reservation is held, the owner appends nothing to the stream and serves no
// other command or reservation for it (they queue). It tells the executor what
// the owner knows about the stream at the moment of the grant.
type Reservation struct {
	// Stream is the reserved tag stream.
	Stream journal.StreamID
	// Lease is the owner's current lease on Stream; the executor's append
	// carries it, so a stale owner's grant can never be used to write.
	Lease journal.Lease
	// Version is the stream's current version (its event count) as the owner
	// knows it; the executor's append expects exactly this version.
	Version uint64
	// LastPosition is the position of the stream's newest event, or zero when
	// the stream is empty or the owner does not know it.
	LastPosition journal.Position
	// Records, when Complete is true, are every record of the stream (versions
	// 1..Version) in ascending version order, owned by the owner (the executor
	// only reads them). The executor then folds matching events from them
	// instead of reading the journal.
	Records  []journal.Record
	Complete bool
	// State is the owner's cached state of the stream at Version (for a
	// stream actor: its aggregate's confirmed state), nil when it has none.
	// Read-only. Commands with FromStates decide from it.
	State any
	// Token is the owner's own handle for this reservation; the executor passes
	// the Reservation back unchanged to Confirm or Cancel.
	Token any
}

// TagOwners gives the executor access to the single writer of each tag stream.
// Implementations must be safe for concurrent use by many goroutines.
//
// Exactly one of Confirm or Cancel follows every successful Reserve, after it
// returned; the executor ends the reservations of one command concurrently,
// each from its own goroutine. The executor reserves the streams of one command in ascending
// (partition, tag) order, which is what makes concurrent commands
// deadlock-free; an owner must therefore queue a reservation behind a busy
// stream rather than fail it.
type TagOwners interface {
	// Reserve waits until the owner of stream grants it to the caller, or ctx
	// ends (then it returns ctx's error and grants nothing, or cancels the
	// grant itself). The owner bounds the wait with its own reservation
	// timeout (in Scribe: runtime.Config.ReservationTimeout); past it Reserve
	// fails with an error matching ErrReservationTimeout and grants nothing.
	// The executor relies on that bound and sets none of its own. While the reservation is held the owner queues its own
	// commands and later reservations for the stream.
	Reserve(ctx context.Context, stream journal.StreamID) (Reservation, error)
	// Confirm ends the reservation after a successful append: records are the
	// appended records that carry the stream's tag, in ascending version order
	// continuing at r.Version+1; the owner adopts them as its new state and
	// version and resumes serving. An error means the owner could not adopt
	// them (for example its reservation had already timed out); the records
	// are durable regardless, and the owner must reload from the journal
	// before it writes again.
	Confirm(ctx context.Context, r Reservation, records []journal.Record) error
	// Cancel ends the reservation without adopting anything. cause is nil
	// when nothing was attempted or the append certainly wrote nothing and
	// the owner's view is still exact; a non-nil cause (a conflict, an
	// unknown append outcome, a lost lease) means the owner's state may be
	// stale and it must reload from the journal before serving again.
	Cancel(ctx context.Context, r Reservation, cause error) error
}
