package pgadmin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/snapshots"
)

// The partition move tests run the source and the target as two schemas of
// the shared server (a move between servers is the same code;
// journal/partitioned's tests move between two servers).

// inPartition returns event(typ, tags...) in partition p.
func inPartition(p, typ string, tags ...journal.Tag) journal.Event {
	e := event(typ, tags...)
	e.Metadata.Partition = p
	return e
}

// depositAll appends n deposits to each of accounts streams of partition p
// (expecting each stream's version), then a transfer tagged with the first
// two accounts, and saves a snapshot of the first account.
func depositAll(t *testing.T, f *fixture, p string, accounts, n int) {
	t.Helper()
	ctx := t.Context()
	for a := range accounts {
		tag := journal.NewTag("acct", fmt.Sprint(a))
		sum, err := f.journal.TagSummary(ctx, journal.StreamID{Partition: p, Tag: tag})
		require.NoError(t, err)
		for i := range n {
			e := inPartition(p, "Deposited", tag)
			e.Data = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
			_, err := f.journal.Append(ctx, []journal.Event{e}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: sum.Version + uint64(i)}})
			require.NoError(t, err)
		}
	}
	if accounts > 1 {
		_, err := f.journal.Append(ctx, []journal.Event{inPartition(p, "Transferred", "acct:0", "acct:1")}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	sum, err := f.journal.TagSummary(ctx, journal.StreamID{Partition: p, Tag: "acct:0"})
	require.NoError(t, err)
	require.NoError(t, f.snapshots.Save(ctx, snapshots.Snapshot{Stream: journal.StreamID{Partition: p, Tag: "acct:0"}, Version: sum.Version, SchemaVersion: 1, State: []byte(`{"n":1}`)}))
}

// streamRow is what a database records of a stream, positions aside.
type streamRow struct {
	Version, Cut  int64
	Head, CutHash []byte
	Retired       bool
}

// partitionCopy is what a database holds of a partition, positions aside:
// its event IDs in position order (hot and archived), which are archived,
// its streams and its snapshots.
type partitionCopy struct {
	IDs       []string
	Archived  []string
	Streams   map[string]streamRow
	Snapshots int
}

func (c partitionCopy) events() uint64 { return uint64(len(c.IDs)) }

// holding reads what f holds of partition p.
func holding(t *testing.T, f *fixture, p string) partitionCopy {
	t.Helper()
	ctx := t.Context()
	s := quote(f.cfg.Schema)
	out := partitionCopy{Streams: map[string]streamRow{}}
	rows, err := f.pool.Query(ctx, `SELECT id::text, archived FROM (
		SELECT id, commit_xid, seq, false AS archived FROM `+s+`.events WHERE partition = $1
		UNION ALL SELECT id, commit_xid, seq, true FROM `+s+`.events_archive WHERE partition = $1) e ORDER BY commit_xid, seq`, p)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var archived bool
		require.NoError(t, rows.Scan(&id, &archived))
		out.IDs = append(out.IDs, id)
		if archived {
			out.Archived = append(out.Archived, id)
		}
	}
	require.NoError(t, rows.Err())
	rows, err = f.pool.Query(ctx, `SELECT tag, version, cut_version, head_hash, coalesce(cut_hash, ''), retired FROM `+s+`.streams WHERE partition = $1 AND version > 0`, p)
	require.NoError(t, err)
	for rows.Next() {
		var tag string
		var r streamRow
		require.NoError(t, rows.Scan(&tag, &r.Version, &r.Cut, &r.Head, &r.CutHash, &r.Retired))
		out.Streams[tag] = r
	}
	require.NoError(t, rows.Err())
	out.Snapshots = f.count(t, "snapshots", "partition = $1", p)
	return out
}

// requireMoved checks a completed move of p from one fixture to another:
// the target holds exactly what the source held (want), in the same
// position order, every chain verifies there (its archived part against its
// cut), the target serves the partition, and the source holds nothing of it
// but its 'moved' fence naming the target.
func requireMoved(t *testing.T, want partitionCopy, from, to *fixture, p, toName string) {
	t.Helper()
	ctx := t.Context()
	require.Equal(t, want, holding(t, to, p), "the target holds the source's partition, in the same order")
	for tag, s := range want.Streams {
		stream := journal.StreamID{Partition: p, Tag: journal.Tag(tag)}
		sum, err := to.journal.TagSummary(ctx, stream)
		require.NoError(t, err)
		archived, err := journal.VerifyArchive(ctx, to.journal, stream, sum.Cut)
		require.NoError(t, err, tag)
		hot, err := journal.VerifyStream(ctx, to.journal, stream)
		require.NoError(t, err, tag)
		require.EqualValues(t, s.Version, archived+hot, tag)
	}
	for _, table := range []string{"events", "event_tags", "events_archive", "event_tags_archive", "streams", "snapshots"} {
		require.Zero(t, from.count(t, table, "partition = $1", p), "the source keeps nothing of the partition in %s", table)
	}
	require.Equal(t, 1, from.count(t, "partition_fences", "partition = $1 AND state = 'moved' AND moved_to = $2", p, toName))
	require.Zero(t, to.count(t, "partition_fences", "partition = $1", p), "the target serves the partition")
	require.Zero(t, to.count(t, "partition_moves", "partition = $1", p), "the target records no unfinished move")
	requireAnswersMoved(t, from, p, toName)
}

// requireAnswersMoved checks that f's Acquire of a stream of p names toName.
func requireAnswersMoved(t *testing.T, f *fixture, p, toName string) {
	t.Helper()
	ctx := t.Context()
	node, err := f.journal.OpenNode(ctx, "probe", time.Minute)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.journal.CloseNode(ctx, node)) }()
	_, err = f.journal.Acquire(ctx, node, journal.StreamID{Partition: p, Tag: "acct:0"}, 0)
	var moved *journal.PartitionMoveError
	require.True(t, errors.As(err, &moved), "%v", err)
	require.True(t, moved.Moved)
	require.Equal(t, toName, moved.To)
}

// moveSpec is a move of p from one fixture to another, named toName there.
func moveSpec(from, to *fixture, p, toName string) pgadmin.PartitionMove {
	return pgadmin.PartitionMove{Partition: p, Source: from.pool, SourceSchema: from.cfg.Schema,
		Target: to.pool, TargetSchema: to.cfg.Schema, To: toName, BatchSize: 7}
}

// TestPartitionMoveThereBackAndThereAgain moves a partition from a to b, back
// to a and to b again, appending to it at its new home after each move: each
// move is a new one (not a resume), carries every event exactly once in
// order, with its streams, chain heads and snapshots, and leaves nothing of
// the partition on its source but the fence; each finished move is in its
// target's history; another partition on a stays where it is.
func TestPartitionMoveThereBackAndThereAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 4, 5)
	depositAll(t, a, "west", 2, 3)
	west := holding(t, a, "west")
	homes := []*fixture{a, b, a, b}
	names := []string{"a", "b", "a", "b"}
	for i := 1; i < len(homes); i++ {
		from, to := homes[i-1], homes[i]
		want := holding(t, from, "east")
		var steps []pgadmin.MoveStep
		spec := moveSpec(from, to, "east", names[i])
		spec.Progress = func(p pgadmin.MoveProgress) { steps = append(steps, p.Step) }
		rep, err := pgadmin.MovePartition(ctx, spec)
		require.NoError(t, err, "move %d (%s to %s)", i, names[i-1], names[i])
		require.False(t, rep.Resumed, "move %d is a new move", i)
		require.Equal(t, want.events(), rep.Events)
		require.Equal(t, len(want.Streams), rep.Streams)
		require.Contains(t, steps, pgadmin.MoveRetire)
		requireMoved(t, want, from, to, "east", names[i])
		require.Equal(t, (i+1)/2, to.count(t, "partition_move_history", "partition = 'east'"), "the finished moves into %s", names[i])
		// The new home serves the partition.
		depositAll(t, to, "east", 5, 2)
	}
	require.Equal(t, west, holding(t, a, "west"), "the other partition stays")
}

// TestPartitionMoveRefusesAMissingPartition: a partition the source does not
// hold (no events, or only a lease row) is refused by the plan and by the
// move, with a message naming it, and nothing is written on either side.
func TestPartitionMoveRefusesAMissingPartition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 2, 2)
	node, err := a.journal.OpenNode(ctx, "n", time.Minute)
	require.NoError(t, err)
	_, err = a.journal.Acquire(ctx, node, journal.StreamID{Partition: "leased", Tag: "acct:9"}, 0)
	require.NoError(t, err)
	tables := []string{"partition_fences", "partition_moves", "partition_move_history", "events", "streams"}
	rows := func() []int {
		var n []int
		for _, f := range []*fixture{a, b} {
			for _, table := range tables {
				n = append(n, f.count(t, table, "true"))
			}
		}
		return n
	}
	before := rows()
	for _, p := range []string{"nosuch", "leased"} {
		_, err := pgadmin.PlanPartitionMove(ctx, moveSpec(a, b, p, "b"))
		requireRefused(t, err, "", fmt.Sprintf("partition %q has no events or streams on the source", p))
		_, err = pgadmin.MovePartition(ctx, moveSpec(a, b, p, "b"))
		requireRefused(t, err, "", fmt.Sprintf("partition %q has no events or streams on the source", p), "nothing was written on either database")
	}
	require.Equal(t, before, rows(), "nothing was written")
}

// requireRefused checks a *pgadmin.MoveError refusal: in step (""
// before the move started), no rerun, every text in its message.
func requireRefused(t *testing.T, err error, step pgadmin.MoveStep, texts ...string) {
	t.Helper()
	require.ErrorIs(t, err, pgadmin.ErrMoveRefused)
	var me *pgadmin.MoveError
	require.True(t, errors.As(err, &me), "%v", err)
	require.Equal(t, step, me.Step)
	require.False(t, me.Rerun)
	for _, s := range texts {
		require.Contains(t, err.Error(), s)
	}
	require.NotContains(t, err.Error(), "passing fault")
}

// TestPartitionMoveRefusesAPartitionMovedAway: once a partition moved from a
// to b, moving it from a again (to b or to c) is refused, naming where it
// went, and writes nothing; moving it from b back to a works.
func TestPartitionMoveRefusesAPartitionMovedAway(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b, c := setup(t), setup(t), setup(t)
	depositAll(t, a, "east", 2, 3)
	_, err := pgadmin.MovePartition(ctx, moveSpec(a, b, "east", "b"))
	require.NoError(t, err)
	for _, to := range []*fixture{b, c} {
		_, err := pgadmin.MovePartition(ctx, moveSpec(a, to, "east", "x"))
		requireRefused(t, err, "", `partition "east" was moved away from the source to b`, "give the database it went to as the source")
	}
	require.Zero(t, c.count(t, "partition_fences", "true"))
	require.Zero(t, c.count(t, "partition_moves", "true"))
	want := holding(t, b, "east")
	rep, err := pgadmin.MovePartition(ctx, moveSpec(b, a, "east", "a"))
	require.NoError(t, err)
	require.False(t, rep.Resumed)
	requireMoved(t, want, b, a, "east", "a")
}

// TestPartitionMoveIgnoresAFinishedRecordOfAnOlderBuild: a finished move's
// record that a build before migration 11 left in partition_moves (state
// 'done') neither passes for a finished move nor blocks a new one: the move
// copies everything and the old record goes to the history.
func TestPartitionMoveIgnoresAFinishedRecordOfAnOlderBuild(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "east", 3, 2)
	source := postgres.Address(a.pool.Config().ConnConfig) + " schema " + a.cfg.Schema
	_, err := b.pool.Exec(ctx, `INSERT INTO `+quote(b.cfg.Schema)+`.partition_moves (partition, source, state, copied) VALUES ('east', $1, 'done', 99)`, source)
	require.NoError(t, err)
	want := holding(t, a, "east")
	plan, err := pgadmin.PlanPartitionMove(ctx, moveSpec(a, b, "east", "b"))
	require.NoError(t, err)
	require.Empty(t, plan.Resume)
	require.Equal(t, want.events(), plan.Events)
	rep, err := pgadmin.MovePartition(ctx, moveSpec(a, b, "east", "b"))
	require.NoError(t, err)
	require.False(t, rep.Resumed)
	require.Equal(t, want.events(), rep.Events)
	requireMoved(t, want, a, b, "east", "b")
	require.Equal(t, 2, b.count(t, "partition_move_history", "partition = 'east'"))
	require.Equal(t, 1, b.count(t, "partition_move_history", "partition = 'east' AND events = 99"))
}

// TestPartitionMoveRefusesATargetReceivingFromElsewhere: while b records an
// unfinished move of a partition from a, a move of the same partition from
// c to b is refused, naming a.
func TestPartitionMoveRefusesATargetReceivingFromElsewhere(t *testing.T) {
	t.Parallel()
	a, b, c := setup(t), setup(t), setup(t)
	depositAll(t, a, "east", 2, 2)
	depositAll(t, c, "east", 2, 2)
	want := holding(t, a, "east")
	ctx, cancel := context.WithCancel(t.Context())
	spec := moveSpec(a, b, "east", "b")
	spec.Progress = func(p pgadmin.MoveProgress) {
		if p.Step == pgadmin.MoveFence {
			cancel()
		}
	}
	_, err := pgadmin.MovePartition(ctx, spec)
	var me *pgadmin.MoveError
	require.True(t, errors.As(err, &me), "%v", err)
	require.True(t, me.Rerun, "a cancelled move continues when run again: %v", err)
	require.Equal(t, pgadmin.MoveCopy, me.Step)
	require.Contains(t, err.Error(), "run the same move again (same partition, source and target) and it continues from step copy")
	_, err = pgadmin.MovePartition(t.Context(), moveSpec(c, b, "east", "b"))
	requireRefused(t, err, "", "the target is receiving partition \"east\" from "+postgres.Address(a.pool.Config().ConnConfig)+" schema "+a.cfg.Schema)
	require.Equal(t, 2, c.count(t, "streams", "partition = 'east' AND version > 0"), "c keeps its partition")
	require.Zero(t, c.count(t, "partition_fences", "true"))
	rep, err := pgadmin.MovePartition(t.Context(), moveSpec(a, b, "east", "b"))
	require.NoError(t, err)
	require.True(t, rep.Resumed)
	requireMoved(t, want, a, b, "east", "b")
}
