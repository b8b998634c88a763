package pgadmin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// PartitionMove moves one partition from a source schema to a target schema
// (usually on another Postgres server): MovePartition.
type PartitionMove struct {
	// Partition is the partition to move ("" means journal.DefaultPartition).
	Partition string
	// Source and Target are pools on the two databases. Required; the
	// target pool needs at least 2 connections (a move holds one for its
	// lock), and verifies up to 8 streams at a time with the rest.
	Source, Target *pgxpool.Pool
	// SourceSchema and TargetSchema are the schemas (migrated to this
	// build's version). Default "scribe".
	SourceSchema, TargetSchema string
	// To is recorded in the source as where the partition went, and named
	// by the journal.PartitionMoveError its Acquire then returns: give the
	// partition map's member name of the target (a partitioned.Router
	// switches its map to the member of that name by itself). Default: the
	// target's address and schema.
	To string
	// BatchSize is how many events one copy transaction carries. Default
	// 1000.
	BatchSize int
	// Progress, when set, is called after each step and each copied batch
	// (on MovePartition's goroutine).
	Progress func(MoveProgress)

	// testPoint, set only by the package's tests, is called at the points
	// where a step has committed on one database and not yet on the other,
	// and where the switch holds its locks; an error returned there stops
	// the move as a crash would.
	testPoint func(point string) error
}

// MoveStep is a step of a partition move, in the order they run.
type MoveStep string

// The steps of a partition move. A move that stopped (a crash, a cancelled
// context) resumes at the step it stopped in when MovePartition runs again
// with the same partition, source and target.
const (
	// MovePrecopy: while the partition still serves commands (the target
	// already refuses its leases: 'incoming'), its events, hot and
	// archived, are copied up to the source's read gate, so the fenced
	// cut-over only copies the tail appended meanwhile.
	MovePrecopy MoveStep = "precopy"
	// MoveFence: the source revokes every lease of the partition and
	// refuses new ones ('outgoing'): commands to the partition get a
	// retryable journal.ErrPartitionMoving until the switch.
	MoveFence MoveStep = "fence"
	// MoveCopy: the events appended since the pre-copy are copied, in the
	// source's position order, a batch per transaction, the progress
	// committed with each batch, while the source holds the partition's
	// appends off (its advisory lock, no other partition's).
	MoveCopy MoveStep = "copy"
	// MoveStreams: stream heads (version, chain head), cuts, tombstones,
	// the archived part of each stream and snapshots are copied.
	MoveStreams MoveStep = "streams"
	// MoveVerify: the event counts are equal, every stream's version, chain
	// head, cut and tombstone equal the source's, and every chain verifies
	// on the target, its archived part included.
	MoveVerify MoveStep = "verify"
	// MoveSwitch: the source marks the partition moved (its Acquire names
	// the target: journal.ErrPartitionMoved) and the target serves it.
	MoveSwitch MoveStep = "switch"
	// MoveRetire: the source's copy (events and archived events, tag
	// indexes, streams, snapshots) is deleted.
	MoveRetire MoveStep = "retire"
	// MoveDone: nothing is left to do; the move's record went to the
	// target's partition_move_history.
	MoveDone MoveStep = "done"
)

// moveSteps are the steps in order; a step's index is its rank.
var moveSteps = []MoveStep{MovePrecopy, MoveFence, MoveCopy, MoveStreams, MoveVerify, MoveSwitch, MoveRetire, MoveDone}

// MoveProgress reports a partition move's progress.
type MoveProgress struct {
	Partition string
	// Step is the step just completed (MovePrecopy and MoveCopy once per
	// batch).
	Step MoveStep
	// Copied and Total count the partition's events (hot and archived)
	// copied and to copy.
	Copied, Total uint64
	// Streams is the number of streams copied (from MoveStreams on).
	Streams int
}

// MoveReport is the outcome of a completed partition move.
type MoveReport struct {
	Partition string
	// Events counts the events copied, archived ones included.
	Events uint64
	// Archived counts the events that are archived (retention), Streams
	// the streams, Tombstones the retired ones among them, Snapshots the
	// snapshots.
	Archived   uint64
	Streams    int
	Tombstones int
	Snapshots  int
	// Resumed reports that an earlier, interrupted run of the same move
	// had done part of it.
	Resumed bool
}

// ErrMoveRefused is wrapped by the errors of a partition move that cannot
// start or continue as asked: a partition the source does not hold, one
// already moved away or moving, a target that holds the partition or
// receives it from another source, appends without a lease that keep
// reaching the moving partition, a copy that does not verify. Running the
// same move again fails the same way: the message says what to change
// first. A refusal before the move started wrote nothing on either database.
var ErrMoveRefused = errors.New("postgres: partition move refused")

// MoveError is the error of MovePartition and PlanPartitionMove. It says
// whether running the same move again continues it (Rerun) or what has to
// be fixed first; errors.Is(err, ErrMoveRefused) holds for a refusal.
type MoveError struct {
	Partition string
	// Source and Target are the two databases (address and schema).
	Source, Target string
	// Step is the step the move stopped in; empty when it was refused
	// before it wrote anything on either database.
	Step MoveStep
	// Rerun reports a passing fault (a lost connection, a server shutting
	// down or restarting, a cancelled context or deadline, a deadlock or a
	// lock or statement timeout): running the same move again (same
	// partition, source and target) continues it from Step. When false,
	// the error names what to fix first: a refusal (ErrMoveRefused), or
	// another failure (a statement the database refused, a schema not
	// migrated).
	Rerun bool
	Err   error
}

// Error says what stopped the move and what to do about it.
func (e *MoveError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "postgres: moving partition %q from %s to %s", e.Partition, e.Source, e.Target)
	if e.Step != "" {
		fmt.Fprintf(&b, ", step %s", e.Step)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	switch {
	case e.Rerun && e.Step == "":
		b.WriteString("; a passing fault stopped the move before it started: run the same move again (same partition, source and target)")
	case e.Rerun:
		fmt.Fprintf(&b, "; a passing fault stopped the move: run the same move again (same partition, source and target) and it continues from step %s", e.Step)
	case errors.Is(e.Err, ErrMoveRefused) && e.Step == "":
		b.WriteString("; nothing was written on either database")
	case errors.Is(e.Err, ErrMoveRefused):
		fmt.Fprintf(&b, "; running it again as it is fails the same way: fix that first, then run the same move again and it continues from step %s", e.Step)
	default:
		fmt.Fprintf(&b, "; this is not a passing fault, so running it again as it is fails the same way: fix its cause first, then run the same move again and it continues from step %s", e.Step)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *MoveError) Unwrap() error { return e.Err }

// passing reports a fault that goes away by itself: a rerun continues.
func passing(err error) bool {
	switch {
	case errors.Is(err, ErrMoveRefused):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), pgschema.Unavailable(err):
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 40: serialization failure, deadlock; 53: out of resources;
		// 55P03 lock timeout; 57014 statement timeout or cancel.
		return strings.HasPrefix(pgErr.Code, "40") || strings.HasPrefix(pgErr.Code, "53") ||
			pgErr.Code == "55P03" || pgErr.Code == "57014" || pgschema.IsConnErr(err)
	}
	return pgconn.SafeToRetry(err)
}

// refusedf returns an ErrMoveRefused error.
func refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMoveRefused}, args...)...)
}

// maxStepsBack bounds how often one run goes back to an earlier step
// (events appended without a lease, the archiver moving a cut) before it
// gives up with ErrMoveRefused.
const maxStepsBack = 8

// mover runs one PartitionMove.
type mover struct {
	m                PartitionMove
	src, dst         string // quoted schemas
	srcAddr, dstAddr string
	srcJ, dstJ       *postgres.Journal // verification
	srcS, dstS       pgschema.Schema   // lock keys
	report           MoveReport
	total            uint64
	rec              moveRecord
	// held is the target connection holding the move's session lock.
	held *pgxpool.Conn
}

func (mv *mover) srcSQL(q string) string { return strings.ReplaceAll(q, "__S__.", mv.src+".") }
func (mv *mover) dstSQL(q string) string { return strings.ReplaceAll(q, "__S__.", mv.dst+".") }

func (mv *mover) progress(step MoveStep) {
	if mv.m.Progress != nil {
		mv.m.Progress(MoveProgress{Partition: mv.m.Partition, Step: step, Copied: mv.report.Events, Total: mv.total, Streams: mv.report.Streams})
	}
}

// at runs the test point of that name, if a test set one.
func (mv *mover) at(point string) error {
	if mv.m.testPoint == nil {
		return nil
	}
	return mv.m.testPoint(point)
}

// fail wraps err, met in step, in a *MoveError.
func (mv *mover) fail(step MoveStep, err error) error {
	var me *MoveError
	if errors.As(err, &me) {
		return err
	}
	return &MoveError{Partition: mv.m.Partition, Source: mv.srcAddr, Target: mv.dstAddr, Step: step, Rerun: passing(err), Err: err}
}

// newMover validates m, applies the defaults and opens the journals the
// move reads through (no I/O).
func newMover(m PartitionMove) (*mover, error) {
	if m.Partition == "" {
		m.Partition = journal.DefaultPartition
	}
	if m.SourceSchema == "" {
		m.SourceSchema = "scribe"
	}
	if m.TargetSchema == "" {
		m.TargetSchema = "scribe"
	}
	if m.BatchSize <= 0 {
		m.BatchSize = 1000
	}
	mv := &mover{m: m, src: pgx.Identifier{m.SourceSchema}.Sanitize(), dst: pgx.Identifier{m.TargetSchema}.Sanitize()}
	mv.report.Partition = m.Partition
	if m.Source == nil || m.Target == nil {
		return mv, mv.fail("", refusedf("MovePartition needs a Source and a Target pool"))
	}
	mv.srcAddr = postgres.Address(m.Source.Config().ConnConfig) + " schema " + m.SourceSchema
	mv.dstAddr = postgres.Address(m.Target.Config().ConnConfig) + " schema " + m.TargetSchema
	if mv.m.To == "" {
		mv.m.To = mv.dstAddr
	}
	if m.Target.Config().MaxConns < 2 {
		return mv, mv.fail("", refusedf("the target pool allows %d connection; a move holds one for its lock and needs another: give it at least 2", m.Target.Config().MaxConns))
	}
	if mv.srcAddr == mv.dstAddr {
		return mv, mv.fail("", refusedf("the source and the target are the same schema; give another target"))
	}
	mv.srcS, mv.dstS = pgschema.New(m.SourceSchema), pgschema.New(m.TargetSchema)
	var err error
	if mv.srcJ, err = postgres.NewJournal(m.Source, postgres.Config{Schema: m.SourceSchema}); err != nil {
		return mv, mv.fail("", refusedf("source schema: %v", err))
	}
	if mv.dstJ, err = postgres.NewJournal(m.Target, postgres.Config{Schema: m.TargetSchema}); err != nil {
		return mv, mv.fail("", refusedf("target schema: %v", err))
	}
	return mv, nil
}

func (mv *mover) close() {
	if mv.held != nil {
		// Unlocked before the connection goes back to the pool; a session
		// that cannot say so is closed (its end unlocks).
		var ok bool
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := mv.held.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, mv.moveLockKey()).Scan(&ok); err != nil || !ok {
			_ = mv.held.Conn().Close(ctx)
		}
		cancel()
		mv.held.Release()
	}
	for _, j := range []*postgres.Journal{mv.srcJ, mv.dstJ} {
		if j != nil {
			_ = j.Close()
		}
	}
}

// MovePartition moves a partition from the source to the target: it copies
// its events (hot and archived) in position order while the partition still
// serves commands (MovePrecopy), fences it (MoveFence), copies the events
// appended meanwhile, its streams' heads, cuts, tombstones and its
// snapshots, verifies the copy, switches (the source then answers
// journal.ErrPartitionMoved naming PartitionMove.To) and deletes the
// source's copy. Commands to the partition meanwhile fail with a retryable
// journal.ErrPartitionMoving (a lease taken before the fence is refused at
// its next append with journal.ErrInvalidSession, also retryable); nothing
// acknowledged is lost and nothing is stored twice. Appends to other
// partitions of the source are held off only by the fence (while it revokes
// the partition's leases), never by the copy or the switch.
//
// It is resumable: after a crash or any error whose *MoveError says Rerun,
// run it again with the same partition, source and target and it continues
// where it stopped. Only an unfinished move is resumed: a finished move's
// record is history (the target's partition_move_history) and neither
// blocks nor passes for a later move, in either direction, any number of
// times. A partition the source does not hold, or that moved away from it,
// is refused (ErrMoveRefused) before anything is written.
//
// Only appends made through leases (the runtime's) are fenced. An append
// without a lease that reaches the moving partition on the source before the
// switch is copied too (the verify and switch steps find it and go back to
// the copy); one that waits for the switch and lands on the source after it
// makes the retire step refuse (ErrMoveRefused) instead of deleting it.
func MovePartition(ctx context.Context, m PartitionMove) (MoveReport, error) {
	mv, err := newMover(m)
	defer mv.close()
	if err != nil {
		return mv.report, err
	}
	state, err := mv.begin(ctx)
	if err != nil {
		return mv.report, mv.fail("", err)
	}
	backs := 0
	for state != MoveDone {
		next, err := mv.step(ctx, state)
		if err != nil {
			return mv.report, mv.fail(state, err)
		}
		if stepRank(next) < stepRank(state) {
			if backs++; backs > maxStepsBack {
				return mv.report, mv.fail(state, mv.tooManyBacks(next))
			}
		}
		if err := mv.record(ctx, next); err != nil {
			// The target still records this step: a rerun runs it again.
			return mv.report, mv.fail(state, fmt.Errorf("recording that step %s is next on the target: %w", next, err))
		}
		if state != MoveCopy && state != MovePrecopy && stepRank(next) > stepRank(state) {
			mv.progress(state)
		}
		state = next
	}
	mv.progress(MoveDone)
	return mv.report, nil
}

// stepRank is a step's place in moveSteps.
func stepRank(s MoveStep) int {
	for i, x := range moveSteps {
		if x == s {
			return i
		}
	}
	return -1
}

// step runs one step and returns the step to run next.
func (mv *mover) step(ctx context.Context, state MoveStep) (MoveStep, error) {
	switch state {
	case MovePrecopy:
		return MoveFence, mv.copyEvents(ctx, true)
	case MoveFence:
		return MoveCopy, mv.fence(ctx)
	case MoveCopy:
		return MoveStreams, mv.copyEvents(ctx, false)
	case MoveStreams:
		return MoveVerify, mv.copyStreams(ctx)
	case MoveVerify:
		return mv.verify(ctx)
	case MoveSwitch:
		return mv.switchOver(ctx)
	case MoveRetire:
		return MoveDone, mv.retire(ctx)
	}
	return "", refusedf("the target records the move in an unknown state %q, written by another build: finish it with that build", state)
}

func (mv *mover) tooManyBacks(next MoveStep) error {
	if next == MoveStreams {
		return refusedf("the source's archiver or RetireStream changed the partition's streams %d times during the move; pause retention on the source", maxStepsBack)
	}
	return refusedf("appends without a lease kept reaching the partition on the source during the move (%d times); stop the processes that append to it without a lease (only leased appends, the runtime's, are fenced)", maxStepsBack)
}

// record stores the step to run next in the move's record on the target;
// MoveDone moves the record to partition_move_history in one transaction.
func (mv *mover) record(ctx context.Context, next MoveStep) error {
	p := mv.m.Partition
	if next != MoveDone {
		_, err := mv.m.Target.Exec(ctx, mv.dstSQL(`UPDATE __S__.partition_moves SET state = $2, updated_at = now() WHERE partition = $1`), p, string(next))
		return err
	}
	_, err := mv.m.Target.Exec(ctx, mv.dstSQL(`WITH d AS (
			DELETE FROM __S__.partition_moves WHERE partition = $1 RETURNING partition, source, copied, started_at)
		INSERT INTO __S__.partition_move_history (partition, source, events, started_at) SELECT * FROM d`), p)
	return err
}
