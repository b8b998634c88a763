package pgadmin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// MovePlan is what MovePartition would do now: start a new move of the
// partition or resume an unfinished one, and what the source holds of it.
type MovePlan struct {
	Partition string
	// Source and Target are the two databases (address and schema).
	Source, Target string
	// Resume is the step an unfinished move of the partition from this
	// source to this target stopped in; empty for a new move.
	Resume MoveStep
	// Events counts the partition's events on the source, archived ones
	// included; Archived the archived ones.
	Events, Archived uint64
	// Streams counts the partition's streams with events on the source,
	// Tombstones the retired ones among them, Snapshots its snapshots.
	Streams, Tombstones, Snapshots int
}

// PlanPartitionMove checks a move as MovePartition would before it writes
// anything, and writes nothing: it returns the plan, or the *MoveError
// (ErrMoveRefused) MovePartition would fail with at once.
func PlanPartitionMove(ctx context.Context, m PartitionMove) (MovePlan, error) {
	mv, err := newMover(m)
	defer mv.close()
	if err != nil {
		return MovePlan{Partition: mv.m.Partition}, err
	}
	plan, err := mv.plan(ctx)
	if err != nil {
		return plan, mv.fail("", err)
	}
	return plan, nil
}

// moveRecord is the target's record of an unfinished move
// (partition_moves).
type moveRecord struct {
	state               MoveStep
	source              string
	lastCommit, lastSeq int64
	copied              int64
	synced              sourceDigest
	exists              bool
}

// sourceDigest is what the move copied of the source's partition besides
// its events, in three numbers that only grow on the source: the sum of its
// streams' cut versions, its archived events, its tombstoned streams.
type sourceDigest struct{ cuts, archived, retired int64 }

// readRecord reads the target's record of an unfinished move of the
// partition (exists false when there is none).
func (mv *mover) readRecord(ctx context.Context, q rowQuerier) (moveRecord, error) {
	var r moveRecord
	var state string
	err := q.QueryRow(ctx, mv.dstSQL(`SELECT state, source, last_commit, last_seq, copied, synced_cuts, synced_archived, synced_retired
		FROM __S__.partition_moves WHERE partition = $1 AND state <> 'done'`), mv.m.Partition).Scan(
		&state, &r.source, &r.lastCommit, &r.lastSeq, &r.copied, &r.synced.cuts, &r.synced.archived, &r.synced.retired)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, nil
	case err != nil:
		return r, fmt.Errorf("reading the target's record of the move: %w", err)
	}
	r.state, r.exists = MoveStep(state), true
	return r, nil
}

// rowQuerier reads one row: a pool, a connection or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// fenceRow is a partition's row in partition_fences.
type fenceRow struct {
	state, movedTo string
	since          time.Time
}

func (mv *mover) readFence(ctx context.Context, q rowQuerier, sql func(string) string) (fenceRow, error) {
	var f fenceRow
	err := q.QueryRow(ctx, sql(`SELECT state, moved_to, since FROM __S__.partition_fences WHERE partition = $1`), mv.m.Partition).Scan(&f.state, &f.movedTo, &f.since)
	if errors.Is(err, pgx.ErrNoRows) {
		return fenceRow{}, nil
	}
	return f, err
}

// sourceCounts fills the plan's counts from the source.
func (mv *mover) sourceCounts(ctx context.Context, plan *MovePlan) error {
	var hot, archived, streams, retired, snaps int64
	err := mv.m.Source.QueryRow(ctx, mv.srcSQL(`SELECT
			(SELECT count(*) FROM __S__.events WHERE partition = $1),
			(SELECT count(*) FROM __S__.events_archive WHERE partition = $1),
			(SELECT count(*) FROM __S__.streams WHERE partition = $1 AND version > 0),
			(SELECT count(*) FROM __S__.streams WHERE partition = $1 AND retired),
			(SELECT count(*) FROM __S__.snapshots WHERE partition = $1)`), mv.m.Partition).Scan(&hot, &archived, &streams, &retired, &snaps)
	if err != nil {
		return fmt.Errorf("counting the partition on the source: %w", err)
	}
	plan.Events, plan.Archived = uint64(hot+archived), uint64(archived)
	plan.Streams, plan.Tombstones, plan.Snapshots = int(streams), int(retired), int(snaps)
	return nil
}

// plan decides, reading only, whether the move resumes, starts, or is
// refused (ErrMoveRefused, naming what to fix).
func (mv *mover) plan(ctx context.Context) (MovePlan, error) {
	p := mv.m.Partition
	plan := MovePlan{Partition: p, Source: mv.srcAddr, Target: mv.dstAddr}
	rec, err := mv.readRecord(ctx, mv.m.Target)
	if err != nil {
		return plan, err
	}
	if rec.exists {
		if rec.source != mv.srcAddr {
			return plan, refusedf("the target is receiving partition %q from %s (stopped at step %s); resume that move (run it with that source), then move the partition from the target if you want it elsewhere",
				p, rec.source, rec.state)
		}
		mv.rec = rec
		plan.Resume = rec.state
		return plan, mv.sourceCounts(ctx, &plan)
	}
	// A new move: the source must hold the partition and not be moving it.
	srcFence, err := mv.readFence(ctx, mv.m.Source, mv.srcSQL)
	if err != nil {
		return plan, fmt.Errorf("reading the source's fence of the partition: %w", err)
	}
	switch srcFence.state {
	case "moved":
		return plan, refusedf("partition %q was moved away from the source to %s (at %s); there is no unfinished move of it to resume here: to move it again, give the database it went to as the source",
			p, srcFence.movedTo, srcFence.since.UTC().Format(time.RFC3339))
	case "outgoing":
		return plan, refusedf("partition %q is being moved out of the source to %s by another move (its record is on that target); resume that move with its target", p, srcFence.movedTo)
	case "incoming":
		return plan, refusedf("partition %q is being moved into the source and is not served there yet; finish that move first", p)
	}
	if err := mv.sourceCounts(ctx, &plan); err != nil {
		return plan, err
	}
	if plan.Events == 0 && plan.Streams == 0 {
		return plan, refusedf("partition %q has no events or streams on the source %s: there is nothing to move; check the partition's name and the source", p, mv.srcAddr)
	}
	// The target must not hold or be moving the partition.
	dstFence, err := mv.readFence(ctx, mv.m.Target, mv.dstSQL)
	if err != nil {
		return plan, fmt.Errorf("reading the target's fence of the partition: %w", err)
	}
	switch dstFence.state {
	case "outgoing":
		return plan, refusedf("the target is itself moving partition %q out (to %s); finish that move first", p, dstFence.movedTo)
	case "incoming":
		return plan, refusedf("the target has partition %q fenced as moving in, but records no unfinished move of it: a move record was removed by hand; inspect %s.partition_fences", p, mv.m.TargetSchema)
	}
	var dstStreams int64
	var dstEvents bool
	if err := mv.m.Target.QueryRow(ctx, mv.dstSQL(`SELECT (SELECT count(*) FROM __S__.streams WHERE partition = $1 AND version > 0),
			EXISTS (SELECT 1 FROM __S__.events WHERE partition = $1) OR EXISTS (SELECT 1 FROM __S__.events_archive WHERE partition = $1)`), p).Scan(&dstStreams, &dstEvents); err != nil {
		return plan, fmt.Errorf("reading what the target holds of the partition: %w", err)
	}
	if dstStreams > 0 || dstEvents {
		return plan, refusedf("the target already holds partition %q (%d stream(s) with events); move it to a database that does not serve it", p, dstStreams)
	}
	return plan, nil
}

// lockMove takes the move's session lock on the target, so one run at a
// time works on a partition's move into a schema; it ends with the
// session.
func (mv *mover) lockMove(ctx context.Context) error {
	conn, err := mv.m.Target.Acquire(ctx)
	if err != nil {
		return err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, mv.moveLockKey()).Scan(&ok); err != nil {
		conn.Release()
		return err
	}
	if !ok {
		conn.Release()
		return refusedf("another run of a move of partition %q into the target is running (it holds the move's lock there); let it end first", mv.m.Partition)
	}
	mv.held = conn
	return nil
}

// moveLockKey is the target's advisory lock key of the partition's move.
func (mv *mover) moveLockKey() int64 {
	return mv.dstS.LockKey(pgschema.LockMove, mv.m.Partition, "move")
}

// begin takes the move's lock, plans, and for a new move records it on the
// target and fences the partition there ('incoming', in one transaction).
// It returns the step to run.
func (mv *mover) begin(ctx context.Context) (MoveStep, error) {
	if err := mv.lockMove(ctx); err != nil {
		return "", err
	}
	plan, err := mv.plan(ctx)
	if err != nil {
		return "", err
	}
	mv.total = plan.Events
	if plan.Resume != "" {
		mv.report.Resumed = true
		mv.report.Events = uint64(mv.rec.copied)
		return plan.Resume, nil
	}
	p := mv.m.Partition
	tx, err := mv.m.Target.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// A finished move's record that a build before migration 11 left in
	// partition_moves is history.
	if _, err := tx.Exec(ctx, mv.dstSQL(`WITH d AS (
			DELETE FROM __S__.partition_moves WHERE partition = $1 AND state = 'done' RETURNING partition, source, copied, started_at, updated_at)
		INSERT INTO __S__.partition_move_history (partition, source, events, started_at, finished_at) SELECT * FROM d`), p); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, mv.dstSQL(`INSERT INTO __S__.partition_moves (partition, source, state) VALUES ($1, $2, $3)`), p, mv.srcAddr, string(MovePrecopy)); err != nil {
		return "", err
	}
	// A 'moved' fence an earlier move out of the target left becomes
	// 'incoming'; it keeps naming where the partition is served until the
	// switch (partitionFence).
	ct, err := tx.Exec(ctx, mv.dstSQL(`INSERT INTO __S__.partition_fences AS f (partition, state, moved_to) VALUES ($1, 'incoming', '')
		ON CONFLICT (partition) DO UPDATE SET state = 'incoming', since = now() WHERE f.state = 'moved'`), p)
	if err != nil {
		return "", err
	}
	if ct.RowsAffected() != 1 {
		return "", refusedf("the target's fence of partition %q changed while the move started; run it again to see why", p)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	mv.rec = moveRecord{state: MovePrecopy, source: mv.srcAddr, exists: true}
	return MovePrecopy, nil
}
