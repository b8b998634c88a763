package pgadmin_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// TestPartitionSliceLags: the slices of a projection across several
// databases (one per partition) count their partition's events after their
// checkpoint, as long as the checkpoint is a position of this database:
// nothing applied yet, or its event here (hot or archived). A checkpoint
// of another database counts nothing here.
func TestPartitionSliceLags(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	var def, other []journal.Record // default's acct:1, p2's acct:2
	for range 6 {
		def = append(def, appendN(t, f.journal, "acct:1", 1)...)
		e := event("Changed", "acct:2")
		e.Metadata.Partition = "p2"
		res, err := f.journal.Append(ctx, []journal.Event{e}, journal.AppendOptions{})
		require.NoError(t, err)
		other = append(other, res.Records...)
	}
	k := projection.Key{Name: "everywhere", Version: 1}
	_, err = store.Join(ctx, k, projection.Layout{Partitions: []string{journal.DefaultPartition, "p2"}}, "r", time.Minute)
	require.NoError(t, err)
	sts, _, err := store.Slices(ctx, k)
	require.NoError(t, err)
	require.Len(t, sts, 2)
	slice := map[string]int{sts[0].Partition: sts[0].Slice, sts[1].Partition: sts[1].Slice}
	lagOf := func() map[string]uint64 {
		t.Helper()
		ls, err := f.admin.SliceLags(ctx, k, 0)
		require.NoError(t, err)
		return map[string]uint64{journal.DefaultPartition: ls[slice[journal.DefaultPartition]].Events, "p2": ls[slice["p2"]].Events}
	}
	require.Equal(t, map[string]uint64{journal.DefaultPartition: 6, "p2": 6}, lagOf(), "nothing applied: every event of each partition")

	ls, err := store.Claim(ctx, k, "r", time.Minute, []int{slice[journal.DefaultPartition]})
	require.NoError(t, err)
	require.NoError(t, store.Commit(ctx, ls, def[:4], []int{ls[0].Slice, ls[0].Slice, ls[0].Slice, ls[0].Slice},
		func(context.Context, pgx.Tx) error { return nil }))
	require.Equal(t, map[string]uint64{journal.DefaultPartition: 2, "p2": 6}, lagOf())

	ls, err = store.Claim(ctx, k, "r", time.Minute, []int{slice["p2"]})
	require.NoError(t, err)
	require.NoError(t, store.Commit(ctx, ls, other, []int{ls[0].Slice, ls[0].Slice, ls[0].Slice, ls[0].Slice, ls[0].Slice, ls[0].Slice},
		func(context.Context, pgx.Tx) error { return nil }))
	require.Equal(t, map[string]uint64{journal.DefaultPartition: 2, "p2": 0}, lagOf())

	// The checkpoint's event archived: still this database's.
	prog, err := f.admin.Archive(ctx, keep("acct", 1, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 4+3, prog.Events, "up to the lowest slice checkpoint (def[3]; the appends alternate partitions): def[:4] and other[:3]")
	require.Equal(t, 1, f.count(t, "events_archive", "id = $1", def[3].ID), "the default slice's checkpoint event is archived")
	require.Equal(t, map[string]uint64{journal.DefaultPartition: 2, "p2": 0}, lagOf(), "the archive changes no lag")

	// A position of another database (its event is not here) counts nothing.
	_, err = f.pool.Exec(ctx, `UPDATE `+quote(f.cfg.Schema)+`.projection_slices SET commit_xid = 1, seq = 1, event_id = $3, member = 'elsewhere'
		WHERE name = $1 AND version = $2 AND partition = 'p2'`, k.Name, k.Version, uuid.New())
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{journal.DefaultPartition: 2, "p2": 0}, lagOf())
	_, err = f.pool.Exec(ctx, `UPDATE `+quote(f.cfg.Schema)+`.projection_slices SET commit_xid = 0, seq = 0, event_id = NULL, member = ''
		WHERE name = $1 AND version = $2 AND partition = 'p2'`, k.Name, k.Version)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{journal.DefaultPartition: 2, "p2": 3}, lagOf(), "from zero: the partition's hot events (other[3:])")
}
