package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// Projection describes a read model fed from the journal's global feed.
// Tx is the type of the transaction a handler writes in: pgx.Tx for the
// Postgres store (read model and checkpoint commit together), NoTx for the
// memory store.
type Projection[Tx any] struct {
	// Name identifies the projection across processes; at most 200 bytes.
	Name string
	// Version is the projection's code version, ≥ 1. A new version is a new
	// projection with its own checkpoint that starts at position zero beside
	// the old one (see Options.TakeOver).
	Version int
	// Query selects the events the handler sees. The zero Query means every
	// event of every partition.
	Query journal.Query
	// Handle applies one batch of records, in ascending position order, in
	// the store's transaction that also stores the checkpoint: a returned
	// error rolls both back, and the runner retries (Options.MaxAttempts).
	Handle func(ctx context.Context, tx Tx, batch Batch) error
	// Prepare, when set, runs before each batch's transaction, outside it,
	// for effects outside the database (a publisher's deliveries; again on
	// a retry), and may set Batch.Prepared for Handle. Its error counts as a
	// handler error.
	Prepare func(ctx context.Context, batch *Batch) error
	// Replay, when set and the store is a DeadLetterReplayer, re-applies
	// the dead letters whose replay was requested (RequestReplay): the
	// runner holding the lease looks every Options.ReplayInterval, between
	// batches, and replays them as ReplayDeadLetters does (so Replay sees
	// an old event after newer ones). Publishers set it to their sink.
	Replay func(ctx context.Context, tx Tx, d DeadLetter) error
	// Setup, when set, creates the read model (CREATE TABLE IF NOT EXISTS…)
	// through Store.Setup before the runner's first batch; every runner
	// start runs it, so it must be idempotent.
	Setup func(ctx context.Context, tx Tx) error
	// Clear, when set, empties the read model; Rebuild runs it in the
	// transaction that moves the checkpoint back to zero (Store.Reset).
	Clear func(ctx context.Context, tx Tx) error

	// Slicing, when set, cuts the projection's events into slices that
	// several runners apply at once (see Slicing); Query must then be
	// empty, and the source a journal.SliceSubscriber (both memory and
	// Postgres are) or a PartitionedSource (partition × tag slice).
	Slicing *Slicing

	// rows is set by Bind: the read model is the store's rows.
	rows bool
}

// Batch is what a handler receives.
type Batch struct {
	// Records are the batch's events, ascending by position, never empty.
	Records []journal.Record
	// Attempt is 1 on the first try of these records, 2 on the first retry…
	Attempt int
	// Epoch is the lease epoch of an unsliced projection, which grows at
	// every take-over; zero for a sliced one.
	Epoch uint64
	// Slices, for a sliced projection, is the slice Records[i] is delivered
	// for (a record delivered for two slices appears twice); nil otherwise.
	Slices []int
	// Prepared is what Prepare left for Handle (nil without Prepare).
	Prepared any
}

// NoTx is the transaction type of the memory store: it binds the rows a
// handler writes through MemoryStore.Rows to its commit. Its zero value
// binds nothing.
type NoTx struct{ w *RowWrites }

// Key identifies one version of a projection.
type Key struct {
	Name    string
	Version int
}

// String renders "name@version".
func (k Key) String() string { return fmt.Sprintf("%s@%d", k.Name, k.Version) }

// Validate reports a key a store rejects.
func (k Key) Validate() error {
	switch {
	case k.Name == "":
		return errors.New("projection: the name is empty; give the projection a stable name such as \"accounts\"")
	case len(k.Name) > 200:
		return fmt.Errorf("projection: the name is %d bytes; use at most 200", len(k.Name))
	case k.Version < 1:
		return fmt.Errorf("projection %q: version %d; versions start at 1", k.Name, k.Version)
	}
	return nil
}

// State is where a projection stands.
type State string

// States of a projection, as stores record them and runners report them.
const (
	StateIdle       State = "idle"       // never run, or reset (and not paused)
	StateStandby    State = "standby"    // resumed and not claimed yet; a runner's own Progress: it waits for the lease
	StateRunning    State = "running"    // a runner holds the lease and applies batches
	StateFailed     State = "failed"     // stopped after MaxAttempts at FailedAt
	StateSuperseded State = "superseded" // a newer version took over
	StateStopped    State = "stopped"    // the runner's context ended
	StatePaused     State = "paused"     // an operator paused it (Pauser), also through a reset; runners wait
)

// The transitions between states are in state.go (State.Next).

// Status describes a projection as its store records it.
type Status struct {
	Key   Key
	State State
	// Checkpoint is the position of the last applied record; Events how many
	// records were applied in all.
	Checkpoint journal.Position
	Events     uint64
	// Owner and Epoch name the current lease holder; LeaseUntil is when the
	// lease lapses unless renewed.
	Owner      string
	Epoch      uint64
	LeaseUntil time.Time
	// Active is true when this version is the one readers should use (the
	// newest version that caught up, or the only one).
	Active bool
	// FailedAt and Error describe the record that stopped the projection
	// (State failed), or the last infrastructure error (any state).
	FailedAt  journal.Position
	Error     string
	UpdatedAt time.Time
	// ReadModel is the kind of read model the projection's runner declared
	// when it set the projection up (Store.Setup): whether Reset alone
	// empties it.
	ReadModel ReadModelKind
	// Paused reports that an operator's pause holds (Pauser); State is then
	// StatePaused unless the projection failed or was superseded.
	Paused bool
	// Slices is the number of slices of a sliced projection (0: unsliced).
	// Its status sums them up: Checkpoint is the oldest slice checkpoint,
	// Events the deliveries applied, SliceOwners the runners holding a
	// live slice lease, State running while one is live; Owner and
	// LeaseUntil stay empty.
	Slices, SliceOwners int
}

// SummarizeSlices returns st (a projection's own status) with Active and
// superseded as active (the active version, 0: none) says, and its
// progress taken from its slices, laid out as l (live[i]: slices[i]'s lease
// is held and unexpired): an unsliced projection reports its one slice's
// checkpoint, events, owner, epoch and lease, a sliced one sums up as
// Status.Slices says. Without a live lease, a projection that is not
// failed, paused, superseded, standby or idle with nothing applied is
// stopped. Both stores report statuses through it.
func SummarizeSlices(st Status, active int, l Layout, slices []SliceStatus, live []bool) Status {
	st.Active = active == st.Key.Version
	if active > st.Key.Version && st.State != StateFailed {
		st.State = StateSuperseded
	}
	st.Slices, st.SliceOwners, st.Events, st.Owner, st.LeaseUntil = len(slices), 0, 0, "", time.Time{}
	owners := map[string]bool{}
	applied := false
	for i, x := range slices {
		if i == 0 || x.Checkpoint.Before(st.Checkpoint) {
			st.Checkpoint = x.Checkpoint
		}
		st.Events += x.Events
		applied = applied || !x.Checkpoint.IsZero()
		if i < len(live) && live[i] && x.Owner != "" {
			owners[x.Owner] = true
		}
	}
	st.SliceOwners = len(owners)
	if !l.Sliced() && len(slices) > 0 {
		st.Slices, st.SliceOwners, st.Epoch = 0, 0, slices[0].Epoch
		if len(owners) > 0 {
			st.Owner, st.LeaseUntil = slices[0].Owner, slices[0].LeaseUntil
		}
	}
	switch {
	case st.State == StateFailed || st.State == StatePaused || st.State == StateSuperseded:
	case len(owners) > 0:
		st.State = StateRunning
	case st.State == StateStandby:
	case st.State != StateIdle || applied:
		st.State = StateStopped
	}
	return st
}

// DeadLetter is a record a publisher (or a handler, through
// Store.DeadLetter) gave up on. Dead letters can be replayed: see
// ReplayDeadLetters and DeadLetterReplayer.
type DeadLetter struct {
	Key      Key
	Record   journal.Record
	Error    string
	Attempts int
	At       time.Time
	// ReplayRequestedAt is when a replay by the projection's runner was
	// requested (DeadLetterReplayer.RequestReplay); zero when none is
	// pending.
	ReplayRequestedAt time.Time
}

// Store keeps projections' slices (see Layout), each with its checkpoint
// and lease, the live runners of each projection, and the projection-wide
// status, dead letters and read-model setup. Implementations are safe for
// concurrent use, also by several processes sharing a database; the calls
// on one slice are fenced against each other by epoch, expiry and
// checkpoint.
type Store[Tx any] interface {
	// Join records owner as a live runner of k until ttl from now and
	// returns the live runners, sorted. The first call for k creates its
	// slices as l lays them out; a later one with another layout fails with
	// ErrSlicingChanged, except that each of l.Partitions without slices
	// gets l.PerPartition new ones, numbered after the others.
	Join(ctx context.Context, k Key, l Layout, owner string, ttl time.Duration) ([]string, error)
	// Leave removes owner from k's live runners.
	Leave(ctx context.Context, k Key, owner string) error
	// Claim claims, among want, the slices whose lease is free, expired
	// or owner's: each gets a new epoch and lasts ttl. It returns the
	// leases obtained, by slice (the others are held by live runners);
	// ErrPaused when k is paused, ErrSuperseded when a newer version is
	// active.
	Claim(ctx context.Context, k Key, owner string, ttl time.Duration, want []int) ([]Lease, error)
	// Renew extends the live leases among ls (all of one projection and
	// owner) by their TTL and returns the slices whose lease is no longer
	// current (fenced, expired, reset, paused); ErrSuperseded when a newer
	// version is active.
	Renew(ctx context.Context, ls []Lease) (lost []int, err error)
	// Release gives the leases up so that another runner claims them at
	// once.
	Release(ctx context.Context, ls []Lease) error
	// Commit runs apply and moves each lease's slice checkpoint to the last
	// of records delivered for it (slices[i] is records[i]'s slice), or to
	// Passed when PassedID is set (records may then be empty), storing the
	// lease's Member and the record's event ID, atomically where the store
	// has transactions, and extends the leases. It fails without running
	// apply with ErrFenced when a lease is not current and live or its
	// checkpoint moved, ErrSuperseded when a newer version is active, and
	// with a *HandlerError when apply failed (nothing stored).
	Commit(ctx context.Context, ls []Lease, records []journal.Record, slices []int, apply func(ctx context.Context, tx Tx) error) error
	// Fail records that k stopped at the record at pos with msg (its status
	// becomes StateFailed), when l is still current.
	Fail(ctx context.Context, l Lease, pos journal.Position, msg string) error
	// Slices lists k's slices and their layout (none before the first
	// Join).
	Slices(ctx context.Context, k Key) ([]SliceStatus, Layout, error)
	// DeadLetter stores d in tx (so that it commits with the checkpoint).
	DeadLetter(ctx context.Context, tx Tx, d DeadLetter) error
	// DeadLetters lists k's dead letters in position order.
	DeadLetters(ctx context.Context, k Key) ([]DeadLetter, error)
	// Activate makes k the version readers use, unless a newer one is active.
	Activate(ctx context.Context, k Key) error
	// Status returns k's status; a projection never run is StateIdle.
	Status(ctx context.Context, k Key) (Status, error)
	// Statuses lists every projection version the store knows, by name and version.
	Statuses(ctx context.Context) ([]Status, error)
	// Reset moves every slice's checkpoint of k back to zero, ends their
	// leases (the runners holding them are fenced and start over), clears
	// the failure and the dead letters, and deletes k's rows (RowStore);
	// clear, when not nil, runs in the same transaction to empty the rest
	// of the read model. When clear fails nothing is reset. See Rebuild.
	Reset(ctx context.Context, k Key, clear func(ctx context.Context, tx Tx) error) error
	// Setup runs setup (when not nil) in a transaction to create k's read
	// model and records kind (Status.ReadModel). It may run concurrently in
	// several processes.
	Setup(ctx context.Context, k Key, kind ReadModelKind, setup func(ctx context.Context, tx Tx) error) error
}

// Errors of stores and runners; test with errors.Is.
var (
	// ErrFenced: the lease is no longer current (another runner took over,
	// it expired, or the projection was reset); nothing was stored.
	ErrFenced = errors.New("projection: lease lost; nothing was stored")
	// ErrSuperseded: a newer version of the projection is active.
	ErrSuperseded = errors.New("projection: a newer version is active")
	// ErrPaused: an operator paused the projection (Pauser.Pause); Claim
	// fails with it until Resume, and a runner waits.
	ErrPaused = errors.New("projection: paused by an operator")
)

// Pauser is a store whose projections an operator can pause and resume
// (`scribe projections pause|resume`). Both stores implement it.
type Pauser interface {
	// Pause stops the projection where it is: the current lease is fenced
	// (a batch being applied is not stored) and Claim fails with ErrPaused
	// until Resume; the checkpoint, rows and dead letters stay. Pausing a
	// paused projection changes nothing; an unknown projection is an error.
	Pause(ctx context.Context, k Key) error
	// Resume lets runners claim the projection again; they continue from its
	// checkpoint, and its state becomes StateStandby until one claims it
	// (State.Next). Resuming a projection that is not paused changes
	// nothing; an unknown projection is an error.
	Resume(ctx context.Context, k Key) error
}

// HandlerError wraps an error returned by a projection's handler.
type HandlerError struct {
	// At is the position of the first record of the batch that failed.
	At  journal.Position
	Err error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("projection: handler failed on the batch starting at %s: %v", e.At, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }

// FailedError is what Runner.Run returns when the handler failed
// MaxAttempts times on one record: the projection stopped at At.
type FailedError struct {
	Key      Key
	At       journal.Position
	EventID  string
	Attempts int
	Err      error
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("projection %s stopped at position %s (event %s) after %d attempts: %v; fix the handler or the data and run it again (or reset it)",
		e.Key, e.At, e.EventID, e.Attempts, e.Err)
}

func (e *FailedError) Unwrap() error { return e.Err }
