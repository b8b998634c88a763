package tagconsistency

import (
	"context"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

// TagOwners gives the executor access to the single writer of each tag stream.
// Implementations must be safe for concurrent use by many goroutines.
//
// A reservation is an *actors.Reservation: it tells the executor what the owner
// knows about the stream at the grant (lease, version, last position, state,
// optionally the complete records), and its Grantor ends it. Exactly one of
// Grantor.Confirm or Grantor.Cancel follows every successful Reserve, after it
// returned; the executor ends the reservations of one command concurrently,
// each from its own goroutine. Confirm receives the appended records that
// carry the stream's tag, in ascending version order continuing at
// Version+1. Cancel's cause is nil when nothing was attempted or the append
// certainly wrote nothing; a non-nil cause (a conflict, an unknown append
// outcome, a lost lease) means the owner must reload from the journal before
// serving again. The executor reserves the streams of one command in ascending
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
	Reserve(ctx context.Context, stream journal.StreamID) (*actors.Reservation, error)
}
