package pgadmin_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// slicedArchiveSetup appends 20 events to each of 8 acct streams,
// interleaved, joins a sliced projection of acct (4 slices) and returns the
// records in position order and the slicing.
func slicedArchiveSetup(t *testing.T, f *fixture, k projection.Key) ([]journal.Record, projection.Slicing) {
	t.Helper()
	ctx := t.Context()
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	sl := projection.Slicing{Group: "acct", Count: 4, Partition: journal.DefaultPartition}
	_, err = store.Join(ctx, k, sl.Layout(), "r", time.Minute)
	require.NoError(t, err)
	var recs []journal.Record
	for range 20 {
		for a := range 8 {
			recs = append(recs, appendN(t, f.journal, journal.Tag(fmt.Sprintf("acct:%d", a)), 1)...)
		}
	}
	return recs, sl
}

// setSlice sets a slice's checkpoint, as a runner's commit would.
func setSlice(t *testing.T, f *fixture, k projection.Key, slice int, at journal.Position) {
	t.Helper()
	ct, err := f.pool.Exec(t.Context(), `UPDATE `+quote(f.cfg.Schema)+`.projection_slices SET commit_xid = $3, seq = $4 WHERE name = $1 AND version = $2 AND slice = $5`,
		k.Name, k.Version, int64(at.Commit), int64(at.Seq), slice)
	require.NoError(t, err)
	require.EqualValues(t, 1, ct.RowsAffected())
}

// sliceQuery is the journal query a runner of slice i of sl reads.
func sliceQuery(sl projection.Slicing, i int) journal.SliceQuery {
	w := journal.SliceSpace / sl.Count
	q := journal.SliceQuery{Partition: sl.Partition, Group: sl.Group}
	for h := i * w; h < (i+1)*w; h++ {
		q.Slices = append(q.Slices, h)
	}
	return q
}

// TestArchiveKeepsWhatALaggingSlicedProjectionHasNotRead: a sliced
// projection with one slice behind keeps the tag index rows of that slice's
// streams, and every event row, hot past that slice's checkpoint, although
// the policy would cut them further; the streams of the slices that passed
// them are cut. Then the lagging slice
// catches up through the runner's read (the group-slice index) and gets
// every record after its checkpoint exactly once; a later run cuts the rest.
func TestArchiveKeepsWhatALaggingSlicedProjectionHasNotRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	k := projection.Key{Name: "accts", Version: 1}
	recs, sl := slicedArchiveSetup(t, f, k)
	lagging, _ := sl.SliceOf("acct:0")
	ckpt := recs[39].Position // 5 events of each stream applied
	last := recs[len(recs)-1].Position
	for i := range sl.Count {
		if i == lagging {
			setSlice(t, f, k, i, ckpt)
		} else {
			setSlice(t, f, k, i, last)
		}
	}

	_, err := f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{BatchSize: 7})
	require.NoError(t, err)
	held := 0
	for a := range 8 {
		tag := journal.Tag(fmt.Sprintf("acct:%d", a))
		sum, err := f.journal.TagSummary(ctx, journal.Stream(tag))
		require.NoError(t, err)
		// The tag floor is per slice: the lagging slice's streams stop at
		// what it applied, the others are cut as the policy asks.
		if s, _ := sl.SliceOf(tag); s == lagging {
			held++
			require.Equal(t, uint64(5), sum.Cut.Version, "%s: the cut stops at the lagging slice's checkpoint", tag)
		} else {
			require.Equal(t, uint64(15), sum.Cut.Version, "%s: its slice passed it all", tag)
		}
		n, err := journal.VerifyStream(ctx, f.journal, journal.Stream(tag))
		require.NoError(t, err)
		require.Equal(t, uint64(20)-sum.Cut.Version, n)
	}
	require.NotZero(t, held)
	require.Less(t, held, 8, "some streams are in other slices")
	require.Equal(t, held*15+(8-held)*5, f.count(t, "events", "true"), "the event rows of the lagging slice's streams stay hot from its checkpoint on, the others' from their cut")

	// The lagging slice's runner catches up.
	var want []journal.Record
	for _, r := range recs[40:] {
		if s, _ := sl.SliceOf(r.Tags[0]); s == lagging {
			want = append(want, r)
		}
	}
	var got []journal.Record
	for r, err := range f.journal.ReadSlices(ctx, sliceQuery(sl, lagging), ckpt, 0) {
		require.NoError(t, err)
		got = append(got, r)
	}
	require.Len(t, got, held*15)
	require.Equal(t, want, got, "every record after the checkpoint, once each, in order")

	// Caught up, the next run cuts the lagging slice's streams too.
	setSlice(t, f, k, lagging, got[len(got)-1].Position)
	_, err = f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	for a := range 8 {
		sum, err := f.journal.TagSummary(ctx, journal.Stream(journal.Tag(fmt.Sprintf("acct:%d", a))))
		require.NoError(t, err)
		require.Equal(t, uint64(15), sum.Cut.Version)
	}
	require.Equal(t, 8*5, f.count(t, "events", "true"))
	require.Equal(t, 8*5, f.count(t, "event_tags", "true"))
}

// TestArchiveNotHeldByACaughtUpSlicedProjection: a sliced projection whose
// slices all passed the events (its own projections row stays at 0, as a
// sliced commit never moves it) does not keep them hot; one that has not
// started (every slice at 0) keeps everything, events and tag index rows.
func TestArchiveNotHeldByACaughtUpSlicedProjection(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	k := projection.Key{Name: "accts", Version: 1}
	recs, sl := slicedArchiveSetup(t, f, k)

	prog, err := f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Zero(t, prog.Versions, "nothing applied yet: the tag index stays")
	require.Zero(t, prog.Events)
	require.Equal(t, len(recs), f.count(t, "event_tags", "true"))

	for i := range sl.Count {
		setSlice(t, f, k, i, recs[len(recs)-1].Position)
	}
	prog, err = f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(8*15), prog.Versions)
	require.Equal(t, uint64(8*15), prog.Events, "the caught-up sliced projection lets its events go")
	require.Equal(t, 8*5, f.count(t, "events", "true"))
}
