package tagconsistency

import (
	"context"

	"github.com/scribe-es/scribe/journal"
)

// TagOwners gives the executor access to the single writer of each tag stream.
// Implementations must be safe for concurrent use by many goroutines.
//
// A Reservation tells the executor what the owner knows about the stream at
// the grant (lease, version, last position, state, optionally the complete
// records), and its Grantor ends it. Scribe's stream actors
// (*actors.Host) and cluster members implement TagOwners. Exactly one of
// Grantor.Confirm, Grantor.Cancel or (for a PostingGrantor) PostConfirm
// follows every successful Reserve, after it returned; the executor ends the reservations of one command concurrently,
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
	Reserve(ctx context.Context, stream journal.StreamID) (*Reservation, error)
}

// Reservation is a DCB hold on one stream, granted by the stream's owner.
// While it is held the owner decides none of its own commands and grants no
// other reservation: they queue. The holder appends with Lease and
// Expect{Stream.Tag: Version}, then ends it through Grantor. The data
// fields are read-only once granted.
type Reservation struct {
	// Stream is the reserved stream.
	Stream journal.StreamID
	// Lease is the owner's lease: the holder's append must carry it.
	Lease journal.Lease
	// Version is the stream's version the owner holds (its confirmed state).
	Version uint64
	// LastPosition is the position of the event at Version; zero when the
	// stream is empty or the owner does not know it.
	LastPosition journal.Position
	// State is the aggregate's confirmed state at Version, nil when no
	// aggregate owns the stream's tag group. Treat it as immutable.
	State any
	// Records, when Complete is true, are every record of the stream
	// (versions 1..Version) in ascending version order, owned by the grantor
	// (holders only read them). Stream actors do not set them.
	Records  []journal.Record
	Complete bool
	// Grantor ends the reservation at the owner that granted it.
	Grantor Grantor
}

// Grantor is the granting owner's end of one Reservation: exactly one of
// Confirm or Cancel (or PostConfirm, see PostingGrantor) is called, once,
// from any goroutine.
type Grantor interface {
	// Confirm hands the owner the appended records: it adopts those carrying
	// its tag (re-reading its tail if they do not continue Version) and
	// serves its queue again. ErrReservationLost: it was no longer held.
	Confirm(ctx context.Context, records []journal.Record) error
	// Cancel ends the reservation without an append; a non-nil cause (the
	// append failed or its outcome is unknown) makes the owner re-read its
	// tail before serving again.
	Cancel(ctx context.Context, cause error) error
}

// PostingGrantor is a Grantor that can be confirmed without its holder waiting
// for the owner's answer, so releasing a tag after a successful append costs
// the command no round trip. The executor posts the confirmation of every
// grant that implements it (Scribe's stream actors do) and calls Confirm on
// the others.
type PostingGrantor interface {
	Grantor
	// PostConfirm is Confirm without the answer: the owner has the records
	// queued when it returns, ahead of any request the caller sends that
	// owner afterwards, so the caller's next command or reservation on the
	// stream sees them. It counts as the reservation's one Confirm or
	// Cancel. A reservation the owner no longer holds (ErrReservationLost)
	// is the owner's to report: it reloads the stream, as after a failed
	// Confirm.
	PostConfirm(records []journal.Record)
}
