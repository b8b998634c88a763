package pgadmin_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// TestArchiveWhileATagQueryProjectionLags: an unsliced projection whose
// query names streams by tag reads them through the tag index, like a
// sliced one. Held while a second load is written, it lags; an archive
// whose policy cuts every stream to its last version runs meanwhile.
// Released, it applies every event of its streams once, in each stream's
// order: the archive kept the tag index rows it had not read.
func TestArchiveWhileATagQueryProjectionLags(t *testing.T) {
	t.Parallel()
	f := setupPool(t, 16)
	ctx := t.Context()
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	k := projection.Key{Name: "first-four", Version: 1}
	m := newAppliedModel(t, f, k.String())
	// archiveLoad's writer 0 writes acct:0 … acct:3 and nothing else.
	mine := []journal.Tag{"acct:0", "acct:1", "acct:2", "acct:3"}
	var q journal.Query
	for _, tag := range mine {
		q.Items = append(q.Items, journal.QueryItem{Tags: []journal.Tag{tag}})
	}
	var gate holdGate
	p, status := heldProjection(t, store, k, q, m, &gate)
	ofMine := func(recs []journal.Record) []journal.Record {
		return slices.DeleteFunc(slices.Clone(recs), func(r journal.Record) bool { return !slices.Contains(mine, r.Tags[0]) })
	}

	stop := runRunners(t, f, store, p, 1)
	first := ofMine(archiveLoad(t, f, 1, 40))
	require.Eventually(t, func() bool { return status().Events == uint64(len(first)) }, time.Minute, 5*time.Millisecond, "the first load is applied")

	gate.hold()
	second := archiveLoad(t, f, 2, 60)
	all := append(slices.Clone(first), ofMine(second)...)
	prog, err := f.admin.Archive(ctx, keep("acct", 1, true), pgadmin.ArchiveOptions{BatchSize: 50})
	require.NoError(t, err)
	require.NotZero(t, prog.Versions, "the streams the projection does not read are cut")

	gate.release()
	// Caught up: the projection's checkpoint reaches its last event (what
	// it applied is checked after, whatever it is).
	last := all[len(all)-1].Position
	require.Eventually(t, func() bool { return !last.After(status().Checkpoint) }, time.Minute, 5*time.Millisecond, "the runner catches up")
	stop()
	m.equalsJournal(t, all)
	require.EqualValues(t, len(all), status().Events, "every event applied once")
}
