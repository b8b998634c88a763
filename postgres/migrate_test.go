package postgres_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

func TestMigrateIsIdempotentAndConcurrentSafe(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Pool(t)
	ctx := t.Context()
	cfg := postgres.Config{Schema: schema}

	v, err := postgres.SchemaVersion(ctx, pool, cfg)
	require.NoError(t, err)
	require.Zero(t, v, "a fresh schema has no version")

	// Eight processes' worth of migrators start at once.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = postgres.Migrate(ctx, pool, cfg)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, postgres.Migrate(ctx, pool, cfg), "migrating again is a no-op")

	v, err = postgres.SchemaVersion(ctx, pool, cfg)
	require.NoError(t, err)
	require.Equal(t, postgres.LatestVersion(), v)
	var applied int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+quote(schema)+`.schema_migrations`).Scan(&applied))
	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	require.Equal(t, len(files), applied, "each embedded migration recorded once (versions may skip numbers)")
}

func TestUnmigratedSchemaIsNotOpen(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Pool(t)
	ctx := t.Context()
	j, err := postgres.NewJournal(pool, postgres.Config{Schema: schema})
	require.NoError(t, err, "the constructor does no I/O")
	defer j.Close()

	_, err = j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "T", Tags: []journal.Tag{"t:1"}, Data: []byte(`{}`)}}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.Contains(t, err.Error(), "postgres.Migrate")
	_, err = j.Head(ctx)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)

	st, err := postgres.NewSnapshotStore(pool, postgres.Config{Schema: schema})
	require.NoError(t, err)
	_, err = st.List(ctx, journal.Stream("a:1"))
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
}

func TestClosedJournalIsNotOpen(t *testing.T) {
	t.Parallel()
	f := setup(t)
	require.NoError(t, f.journal.Close())
	_, err := f.journal.Append(context.Background(), []journal.Event{{ID: journal.NewEventID(), Type: "T", Tags: []journal.Tag{"t:1"}, Data: []byte(`{}`)}}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Pool(t)
	_, err := postgres.NewJournal(pool, postgres.Config{Batching: postgres.BatchingConfig{MaxBatch: 5000}})
	require.ErrorContains(t, err, "MaxBatch")
	_, err = postgres.NewJournal(pool, postgres.Config{PollInterval: -1})
	require.Error(t, err)
	_, err = postgres.NewJournal(nil, postgres.Config{})
	require.ErrorContains(t, err, "pool is nil")
}
