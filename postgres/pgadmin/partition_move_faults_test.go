package pgadmin_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// errCrash stands for a crash at a move's test point.
var errCrash = errors.New("simulated crash")

// TestPartitionMoveResumesAfterAStopInEveryStep stops a move after each of
// its steps (the context cancelled as the step is recorded, so the next one
// fails at once), inside the pre-copy (after its second batch), and at the
// points where a step committed on the source but not yet on the target (a
// crash there): in each case the error says whether a rerun continues it,
// and running the same move again completes it, each event moved exactly
// once, nothing left on the source but its fence.
func TestPartitionMoveResumesAfterAStopInEveryStep(t *testing.T) {
	t.Parallel()
	type stop struct {
		name  string
		after pgadmin.MoveStep // cancel after this step's progress (and its nth report)
		nth   int
		point string // or crash at this test point
		next  pgadmin.MoveStep
	}
	stops := []stop{
		{name: "precopy-batch", after: pgadmin.MovePrecopy, nth: 2, next: pgadmin.MovePrecopy},
		{name: "fence", after: pgadmin.MoveFence, nth: 1, next: pgadmin.MoveCopy},
		{name: "copy", after: pgadmin.MoveCopy, nth: 1, next: pgadmin.MoveCopy},
		{name: "streams", after: pgadmin.MoveStreams, nth: 1, next: pgadmin.MoveVerify},
		{name: "verify", after: pgadmin.MoveVerify, nth: 1, next: pgadmin.MoveSwitch},
		{name: "switch", after: pgadmin.MoveSwitch, nth: 1, next: pgadmin.MoveRetire},
		{name: "switch-source-committed", point: "switch: source committed", next: pgadmin.MoveSwitch},
		{name: "retire-source-committed", point: "retire: source committed", next: pgadmin.MoveRetire},
	}
	for _, s := range stops {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			a, b := setup(t), setup(t)
			depositAll(t, a, "east", 4, 6)
			want := holding(t, a, "east")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			spec := moveSpec(a, b, "east", "b")
			seen := 0
			spec.Progress = func(p pgadmin.MoveProgress) {
				if p.Step == s.after {
					if seen++; seen == s.nth {
						cancel()
					}
				}
			}
			if s.point != "" {
				spec = pgadmin.WithMoveTestPoint(spec, func(point string) error {
					if point == s.point {
						return errCrash
					}
					return nil
				})
			}
			_, err := pgadmin.MovePartition(ctx, spec)
			var me *pgadmin.MoveError
			require.True(t, errors.As(err, &me), "%v", err)
			require.Equal(t, s.next, me.Step, "%v", err)
			if s.point == "" {
				require.ErrorIs(t, err, context.Canceled)
				require.True(t, me.Rerun, "a cancelled move continues when run again")
				require.Contains(t, err.Error(), "run the same move again")
			} else {
				require.ErrorIs(t, err, errCrash)
			}
			switch s.name {
			case "precopy-batch":
				require.Zero(t, a.count(t, "partition_fences", "partition = 'east'"), "the pre-copy does not fence the source")
			case "switch-source-committed":
				// The source says the partition moved; the target does not
				// serve it yet: a command gets a retryable error there.
				requireAnswersMoved(t, a, "east", "b")
				requireAcquireMoving(t, b, "east")
			}
			plan, err := pgadmin.PlanPartitionMove(t.Context(), moveSpec(a, b, "east", "b"))
			require.NoError(t, err)
			require.Equal(t, s.next, plan.Resume)

			rep, err := pgadmin.MovePartition(t.Context(), moveSpec(a, b, "east", "b"))
			require.NoError(t, err)
			require.True(t, rep.Resumed)
			require.Equal(t, want.events(), rep.Events)
			requireMoved(t, want, a, b, "east", "b")
			require.Equal(t, 1, b.count(t, "partition_move_history", "partition = 'east'"))
		})
	}
}

// TestPartitionMoveResumesAfterItsConnectionIsKilled terminates the
// mover's source connections during its pre-copy (as a server restart or a
// proxy would): the error says a passing fault stopped the move, and
// running it again completes it.
func TestPartitionMoveResumesAfterItsConnectionIsKilled(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 4, 6)
	want := holding(t, a, "east")
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	app := "mover-" + a.cfg.Schema
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	spec := moveSpec(a, b, "east", "b")
	spec.Source = pool
	killed := false
	spec.Progress = func(p pgadmin.MoveProgress) {
		if p.Step == pgadmin.MovePrecopy && !killed {
			killed = true
			var n int
			require.NoError(t, a.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) k`, app).Scan(&n))
			require.Positive(t, n)
		}
	}
	_, err = pgadmin.MovePartition(ctx, spec)
	var me *pgadmin.MoveError
	require.True(t, errors.As(err, &me), "%v", err)
	require.True(t, me.Rerun, "a lost connection is a passing fault: %v", err)
	require.Equal(t, pgadmin.MovePrecopy, me.Step)
	require.Contains(t, err.Error(), "run the same move again")

	spec.Progress = nil
	rep, err := pgadmin.MovePartition(ctx, spec)
	require.NoError(t, err)
	require.True(t, rep.Resumed)
	requireMoved(t, want, a, b, "east", "b")
}

// requireAcquireMoving checks that f refuses p's leases retryably.
func requireAcquireMoving(t *testing.T, f *fixture, p string) {
	t.Helper()
	ctx := t.Context()
	node, err := f.journal.OpenNode(ctx, "probe-moving", time.Minute)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.journal.CloseNode(ctx, node)) }()
	_, err = f.journal.Acquire(ctx, node, journal.StreamID{Partition: p, Tag: "acct:0"}, 0)
	require.ErrorIs(t, err, journal.ErrPartitionMoving)
}

// TestPartitionMoveCarriesAnUnleasedAppend appends to the moving partition
// without a lease (bypassing the runtime, which the fence cannot stop)
// after the copy was verified: the switch finds the extra event under the
// partition's lock, the move goes back to copy it, and it ends on the
// target with every event, the late one included.
func TestPartitionMoveCarriesAnUnleasedAppend(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 3, 3)
	var late journal.AppendResult
	var steps []pgadmin.MoveStep
	spec := moveSpec(a, b, "east", "b")
	spec.Progress = func(p pgadmin.MoveProgress) {
		steps = append(steps, p.Step)
		if p.Step == pgadmin.MoveVerify && late.Records == nil {
			var err error
			late, err = a.journal.Append(ctx, []journal.Event{inPartition("east", "Deposited", "acct:late")}, journal.AppendOptions{})
			require.NoError(t, err)
		}
	}
	rep, err := pgadmin.MovePartition(ctx, spec)
	require.NoError(t, err)
	require.NotNil(t, late.Records)
	want := holding(t, b, "east")
	require.Contains(t, want.IDs, late.Records[0].ID.String(), "the late event is on the target")
	require.Equal(t, want.events(), rep.Events)
	require.Len(t, want.Streams, 4)
	requireMoved(t, want, a, b, "east", "b")
	t.Logf("steps: %v", steps)
}

// TestPartitionMoveRefusesUnleasedAppendsThatKeepComing: a writer appending
// to the moving partition without a lease at every attempt to switch makes
// the move give up (ErrMoveRefused naming the unleased appends) instead of
// looping; the source keeps every event and stays fenced; once the writer
// stopped, running the same move again completes it.
func TestPartitionMoveRefusesUnleasedAppendsThatKeepComing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 2, 3)
	appended := 0
	spec := moveSpec(a, b, "east", "b")
	spec.Progress = func(p pgadmin.MoveProgress) {
		if p.Step == pgadmin.MoveVerify {
			_, err := a.journal.Append(ctx, []journal.Event{inPartition("east", "Deposited", journal.NewTag("acct", fmt.Sprint(100+appended)))}, journal.AppendOptions{})
			require.NoError(t, err)
			appended++
		}
	}
	_, err := pgadmin.MovePartition(ctx, spec)
	requireRefused(t, err, pgadmin.MoveSwitch, "appends without a lease kept reaching the partition", "then run the same move again and it continues from step switch")
	want := holding(t, a, "east")
	require.Len(t, want.IDs, 2*3+1+appended, "the source keeps every event")
	require.Equal(t, 1, a.count(t, "partition_fences", "partition = 'east' AND state = 'outgoing'"))

	rep, err := pgadmin.MovePartition(ctx, moveSpec(a, b, "east", "b"))
	require.NoError(t, err)
	require.True(t, rep.Resumed)
	requireMoved(t, want, a, b, "east", "b")
}

// TestPartitionMoveSwitchHoldsOffOnlyItsPartition holds the switch while it
// has its locks: an append to another partition of the source completes
// meanwhile (the switch no longer locks the events table), while an
// unleased append to the moving partition waits for the switch and lands on
// the source after it. The retire step then finds it and refuses to delete
// the source's copy (ErrMoveRefused, naming what to do) rather than lose
// it; done as the message says, running the move again retires the rest.
func TestPartitionMoveSwitchHoldsOffOnlyItsPartition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 2, 3)
	depositAll(t, a, "west", 1, 1)
	late := inPartition("east", "Deposited", "acct:late")
	held := false
	lateDone := make(chan error, 1)
	spec := pgadmin.WithMoveTestPoint(moveSpec(a, b, "east", "b"), func(point string) error {
		if point != "switch: locked" || held {
			return nil
		}
		held = true
		// Bounded so that a switch locking more than its partition fails
		// the test instead of hanging it; it takes milliseconds.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := a.journal.Append(wctx, []journal.Event{inPartition("west", "Deposited", "acct:0")}, journal.AppendOptions{})
		require.NoError(t, err, "an append to another partition while the switch holds its locks")
		go func() {
			_, err := a.journal.Append(ctx, []journal.Event{late}, journal.AppendOptions{})
			lateDone <- err
		}()
		waitForLockWait(t, a, pgadmin.PartitionLockKey(a.cfg.Schema, "east"))
		return nil
	})
	_, err := pgadmin.MovePartition(ctx, spec)
	requireRefused(t, err, pgadmin.MoveRetire, "appends without a lease reached it on the source after the switch", "append them to the target (same event IDs)")
	require.NoError(t, <-lateDone, "the unleased append was acknowledged")
	require.Equal(t, 1, a.count(t, "events", "id = $1", late.ID), "the source keeps it")
	require.Equal(t, 2*3+1+1, a.count(t, "events", "partition = 'east'"), "and its copy of the partition")
	require.Zero(t, b.count(t, "events", "id = $1", late.ID))
	requireAnswersMoved(t, a, "east", "b")

	// What the message says: append it to the target (same event ID),
	// delete it from the source, run the move again.
	_, err = b.journal.Append(ctx, []journal.Event{late}, journal.AppendOptions{})
	require.NoError(t, err)
	for _, table := range []string{"event_tags", "events"} {
		_, err = a.pool.Exec(ctx, `DELETE FROM `+quote(a.cfg.Schema)+`.`+table+` WHERE partition = 'east' AND (commit_xid, seq) = (SELECT commit_xid, seq FROM `+quote(a.cfg.Schema)+`.events WHERE id = $1)`, late.ID)
		require.NoError(t, err)
	}
	rep, err := pgadmin.MovePartition(ctx, moveSpec(a, b, "east", "b"))
	require.NoError(t, err)
	require.True(t, rep.Resumed)
	for _, table := range []string{"events", "event_tags", "streams", "snapshots"} {
		require.Zero(t, a.count(t, table, "partition = 'east'"), table)
	}
	require.Equal(t, 1, a.count(t, "partition_fences", "partition = 'east' AND state = 'moved'"))
	require.Equal(t, 2*3+1+1, b.count(t, "events", "partition = 'east'"))
}

// waitForLockWait waits until a session of f's database waits for the
// advisory lock key.
func waitForLockWait(t *testing.T, f *fixture, key int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	hi, lo := int64(uint32(uint64(key)>>32)), int64(uint32(uint64(key)))
	for {
		var waiting bool
		require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1)`, hi, lo).Scan(&waiting))
		if waiting {
			return
		}
		require.True(t, time.Now().Before(deadline), "no session waited for the partition's lock within 30 s")
		time.Sleep(2 * time.Millisecond) // polling a condition, not ordering events
	}
}

// TestPartitionMoveFenceHoldsOffOnlyItsPartition: while a move's fence
// waits for an append in flight on the moving partition (a transaction
// holding the partition's lock shared and a streams row, as an append
// does), another partition's streams are leased and appended to at once;
// the fence then revokes the partition's leases and the move completes.
// (When the fence locked the whole streams table, the Acquire queued
// behind it until the append ended.)
func TestPartitionMoveFenceHoldsOffOnlyItsPartition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 2, 3)
	depositAll(t, a, "west", 1, 1)
	want := holding(t, a, "east")

	inflight, err := a.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = inflight.Rollback(context.WithoutCancel(ctx)) }()
	_, err = inflight.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, pgadmin.PartitionLockKey(a.cfg.Schema, "east"))
	require.NoError(t, err)
	_, err = inflight.Exec(ctx, `UPDATE `+quote(a.cfg.Schema)+`.streams SET version = version WHERE partition = 'east' AND tag = 'acct:0'`)
	require.NoError(t, err)

	moved := make(chan error, 1)
	go func() {
		_, err := pgadmin.MovePartition(ctx, moveSpec(a, b, "east", "b"))
		moved <- err
	}()
	waitForLockWait(t, a, pgadmin.PartitionLockKey(a.cfg.Schema, "east"))

	// Bounded so that a fence holding more than its partition fails the
	// test instead of hanging it; both take milliseconds.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	node, err := a.journal.OpenNode(wctx, "node-w", time.Minute)
	require.NoError(t, err)
	lease, err := a.journal.Acquire(wctx, node, journal.StreamID{Partition: "west", Tag: "acct:new"}, time.Second)
	require.NoError(t, err, "a lease of another partition while the fence waits")
	_, err = a.journal.Append(wctx, []journal.Event{inPartition("west", "Deposited", "acct:new")}, journal.AppendOptions{Leases: []journal.Lease{lease}})
	require.NoError(t, err, "an append to another partition while the fence waits")
	select {
	case err := <-moved:
		t.Fatalf("the move ended while an append of its partition was in flight: %v", err)
	default:
	}

	require.NoError(t, inflight.Commit(ctx))
	require.NoError(t, <-moved)
	requireMoved(t, want, a, b, "east", "b")
}
