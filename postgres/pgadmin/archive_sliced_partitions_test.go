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

// TestArchiveKeepsWhatASlicedProjectionAcrossDatabasesHasNotPassed: the
// slices of a sliced projection across several databases (partition × tag
// slice) read their partition's feed, each from its own checkpoint: one
// slice behind keeps every event row after its checkpoint hot, its lag
// counts the events of its tag slice after its checkpoint and the others'
// nothing, before and after the archive; once it caught up, a second run
// lets the rows go.
func TestArchiveKeepsWhatASlicedProjectionAcrossDatabasesHasNotPassed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	k := projection.Key{Name: "across", Version: 1}
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	sl := projection.Slicing{Group: "acct", Count: 4}
	l := projection.Layout{Group: sl.Group, Count: sl.Count, Partitions: []string{journal.DefaultPartition}}
	_, err = store.Join(ctx, k, l, "r", time.Minute)
	require.NoError(t, err)
	sts, got, err := store.Slices(ctx, k)
	require.NoError(t, err)
	require.Len(t, sts, sl.Count)
	require.Equal(t, l, got, "the layout reads back as it was joined")
	_, err = store.Join(ctx, k, projection.Layout{Group: sl.Group, Count: sl.Count, Partition: journal.DefaultPartition}, "r", time.Minute)
	require.ErrorIs(t, err, projection.ErrSlicingChanged, "the same tag slicing on one database is another layout")

	var recs []journal.Record
	for range 20 {
		for a := range 8 {
			recs = append(recs, appendN(t, f.journal, journal.Tag(fmt.Sprintf("acct:%d", a)), 1)...)
		}
	}
	lagging, _ := sl.SliceOf("acct:0")
	ckpt, last := recs[39].Position, recs[len(recs)-1].Position // 5 events of each stream passed
	for i := range sl.Count {
		if i == lagging {
			setSlice(t, f, k, i, ckpt)
		} else {
			setSlice(t, f, k, i, last)
		}
	}
	behind := 0
	for _, r := range recs[40:] {
		if s, _ := sl.SliceOf(r.Tags[0]); s == lagging {
			behind++
		}
	}
	require.NotZero(t, behind)
	lags, err := f.admin.SliceLags(ctx, k, 0)
	require.NoError(t, err)
	for i, lag := range lags {
		if i == lagging {
			require.Equal(t, uint64(behind), lag.Events, "the lagging slice counts its tag slice's events after its checkpoint")
		} else {
			require.Zero(t, lag.Events, "slice %d passed everything", i)
		}
	}

	_, err = f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{BatchSize: 7})
	require.NoError(t, err)
	require.Equal(t, 120, f.count(t, "events", "true"), "every event row after the lagging slice's checkpoint stays hot")
	lags, err = f.admin.SliceLags(ctx, k, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(behind), lags[lagging].Events, "an archive changes no lag")
	var read []journal.Record
	for r, err := range f.journal.Subscribe(ctx, journal.Query{Partition: journal.DefaultPartition, All: true}, ckpt) {
		require.NoError(t, err)
		read = append(read, r)
		if len(read) == 120 {
			break
		}
	}
	require.Len(t, read, 120)
	for i, r := range read {
		require.Equal(t, recs[40+i].ID, r.ID, "the lagging slice's feed still has every record after its checkpoint, in order")
	}

	setSlice(t, f, k, lagging, last)
	_, err = f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, 8*5, f.count(t, "events", "true"), "caught up, every slice lets the rows go")
}
