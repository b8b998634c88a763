package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"

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

// TestMigrateNewerSchema: a build older than the schema (a rolling upgrade:
// the new release migrated first) runs against it when every newer migration
// declared itself compatible with the build, and is refused, with the
// migration named, otherwise.
func TestMigrateNewerSchema(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Pool(t)
	ctx := t.Context()
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	latest := postgres.LatestVersion()

	var floors int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+quote(schema)+`.schema_migrations WHERE compatible_from BETWEEN 1 AND version`).Scan(&floors))
	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	require.Equal(t, len(files), floors, "every applied migration records its compatibility floor")
	var floor5 int
	require.NoError(t, pool.QueryRow(ctx, `SELECT compatible_from FROM `+quote(schema)+`.schema_migrations WHERE version = 5`).Scan(&floor5))
	require.Equal(t, 4, floor5, "0005_retention.sql declares builds of version 4 compatible")

	insert := func(version int, from any) {
		_, err := pool.Exec(ctx, `INSERT INTO `+quote(schema)+`.schema_migrations (version, name, compatible_from) VALUES ($1, $2, $3)`,
			version, fmt.Sprintf("%04d_future.sql", version), from)
		require.NoError(t, err)
	}
	insert(latest+1, latest)
	require.NoError(t, postgres.Migrate(ctx, pool, cfg), "a newer additive migration leaves this build running")
	v, err := postgres.SchemaVersion(ctx, pool, cfg)
	require.NoError(t, err)
	require.Equal(t, latest+1, v, "the newer schema is left as it is")

	insert(latest+2, latest+1)
	err = postgres.Migrate(ctx, pool, cfg)
	require.ErrorContains(t, err, fmt.Sprintf("migration %04d_future.sql needs code of schema version %d or later (it is not backward compatible); upgrade the program", latest+2, latest+1))

	_, err = pool.Exec(ctx, `DELETE FROM `+quote(schema)+`.schema_migrations WHERE version = $1`, latest+2)
	require.NoError(t, err)
	insert(latest+2, nil)
	err = postgres.Migrate(ctx, pool, cfg)
	require.ErrorContains(t, err, "did not record which older builds may run against it")
}

// TestMigrationCompatibilityMarker: the header line is parsed, and a floor
// outside 1..version is refused when the migrations load.
func TestMigrationCompatibilityMarker(t *testing.T) {
	good := fstest.MapFS{
		"m/0001_a.sql": {Data: []byte("CREATE TABLE a ();")},
		"m/0002_b.sql": {Data: []byte("-- scribe:compatible-from 1\nALTER TABLE a ADD COLUMN b int;")},
	}
	ms, err := postgres.LoadMigrationsForTest(good, "m")
	require.NoError(t, err)
	require.Equal(t, [][2]int{{1, 1}, {2, 1}}, ms)

	bad := fstest.MapFS{"m/0002_b.sql": {Data: []byte("-- scribe:compatible-from 3\n")}}
	_, err = postgres.LoadMigrationsForTest(bad, "m")
	require.ErrorContains(t, err, `"-- scribe:compatible-from 3" must name a schema version from 1 to 2`)
}
