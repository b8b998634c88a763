package postgres_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/erasure/erasuretest"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

func TestKeyStoreConformance(t *testing.T) {
	t.Parallel()
	erasuretest.Run(t, func(t *testing.T) erasure.KeyStore {
		pool, schema := pgtest.Pool(t)
		cfg := postgres.KeyStoreConfig{Schema: schema}
		require.NoError(t, postgres.MigrateKeyStore(context.Background(), pool, cfg))
		require.NoError(t, postgres.MigrateKeyStore(context.Background(), pool, cfg), "migrating again must be a no-op")
		ks, err := postgres.NewKeyStore(pool, cfg)
		require.NoError(t, err)
		return ks
	})
}

func TestKeyStoreErasureLeavesNoKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	cfg := postgres.KeyStoreConfig{Schema: schema}
	require.NoError(t, postgres.MigrateKeyStore(ctx, pool, cfg))
	ks, err := postgres.NewKeyStore(pool, cfg)
	require.NoError(t, err)
	key, err := ks.DataKey(ctx, "c-1")
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".subjects WHERE data_key = $1`, key.Bytes()).Scan(&n))
	require.Equal(t, 1, n)
	_, err = ks.BeginErasure(ctx, "c-1", "op")
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".subjects WHERE data_key IS NOT NULL`).Scan(&n))
	require.Equal(t, 1, n, "a begun erasure keeps the key until its record is in the journal")
	_, err = ks.DestroyKey(ctx, "c-1")
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".subjects WHERE data_key IS NOT NULL`).Scan(&n))
	require.Zero(t, n)
}

func TestKeyStoreNotMigrated(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Pool(t)
	ks, err := postgres.NewKeyStore(pool, postgres.KeyStoreConfig{Schema: schema})
	require.NoError(t, err)
	_, err = ks.DataKey(context.Background(), "c-1")
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.ErrorIs(t, err, erasure.ErrKeyStoreUnavailable)
	require.Contains(t, err.Error(), "MigrateKeyStore")
}

// TestKeyStoreMissingIsUnavailable: a key store whose schema was dropped
// (a journal restored without it) or whose database cannot be reached
// answers every read with erasure.ErrKeyStoreUnavailable, never as an
// erased subject; the missing one says to restore it, the unreachable one
// also matches the retryable journal.ErrUnavailable.
func TestKeyStoreMissingIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	cfg := postgres.KeyStoreConfig{Schema: schema + "_keys"}
	require.NoError(t, postgres.MigrateKeyStore(ctx, pool, cfg))
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{cfg.Schema}.Sanitize()+" CASCADE")
	})
	ks, err := postgres.NewKeyStore(pool, cfg)
	require.NoError(t, err)
	_, err = ks.DataKey(ctx, "c-1")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{cfg.Schema}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	_, err = ks.Lookup(ctx, []string{"c-1"})
	require.ErrorIs(t, err, erasure.ErrKeyStoreUnavailable)
	require.NotErrorIs(t, err, erasure.ErrSubjectErased)
	require.NotErrorIs(t, err, journal.ErrUnavailable)
	require.ErrorContains(t, err, "missing")
	require.ErrorContains(t, err, "restore")
	_, err = ks.DataKey(ctx, "c-1")
	require.ErrorIs(t, err, erasure.ErrKeyStoreUnavailable)
	_, err = ks.Subjects(ctx, "", 0)
	require.ErrorIs(t, err, erasure.ErrKeyStoreUnavailable)

	closed, err := pgxpool.New(ctx, pgtest.URL(t))
	require.NoError(t, err)
	closed.Close()
	ks, err = postgres.NewKeyStore(closed, cfg)
	require.NoError(t, err)
	_, err = ks.Lookup(ctx, []string{"c-1"})
	require.ErrorIs(t, err, erasure.ErrKeyStoreUnavailable)
	require.ErrorIs(t, err, journal.ErrUnavailable)
}

// A key store migrated by version 1 (one statement destroyed the key and
// recorded the erasure, and the erasure record could be missing) is
// upgraded: its erased subjects get sequence numbers in erasure order and
// show as pending, a sweep completes each (appending the records that are
// missing, the others as duplicates), and an erasure made afterwards by a
// build of version 1 gets a sequence number too and stays pending until a
// sweep completes it.
func TestKeyStoreUpgradeFromVersion1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	s := pgx.Identifier{schema}.Sanitize()
	v1, err := os.ReadFile("keystore_migrations/0001_keys.sql")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, strings.ReplaceAll(string(v1), "__SCHEMA__", s))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE `+s+`.schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(), compatible_from integer);
		INSERT INTO `+s+`.schema_migrations (version, name, compatible_from) VALUES (1, '0001_keys.sql', 1)`)
	require.NoError(t, err)
	// Version 1's statements: a key, two erasures (the second at a later time).
	oldErase := `INSERT INTO ` + s + `.subjects AS s (subject, data_key, erased_at, erased_by) VALUES ($1, NULL, now(), $2)
		ON CONFLICT (subject) DO UPDATE SET data_key = NULL, erased_at = now(), erased_by = EXCLUDED.erased_by WHERE s.erased_at IS NULL`
	_, err = pool.Exec(ctx, `INSERT INTO `+s+`.subjects (subject, data_key) VALUES ('live', $1), ('b-old', $1)`, make([]byte, 32))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, oldErase, "b-old", "op-1")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, oldErase, "a-old", "op-2")
	require.NoError(t, err)

	cfg := postgres.KeyStoreConfig{Schema: schema}
	require.NoError(t, postgres.MigrateKeyStore(ctx, pool, cfg))
	ks, err := postgres.NewKeyStore(pool, cfg)
	require.NoError(t, err)
	pending, err := ks.Erasures(ctx, erasure.ErasureQuery{PendingOnly: true})
	require.NoError(t, err)
	require.Len(t, pending, 2)
	require.Equal(t, "b-old", pending[0].Subject, "sequence numbers follow the erasure times")
	require.Equal(t, "a-old", pending[1].Subject)
	require.Equal(t, erasure.ErasureKeyDestroyed, pending[0].State)
	subs, err := ks.Subjects(ctx, "", 0)
	require.NoError(t, err)
	for _, sub := range subs {
		require.NotEqual(t, erasure.ErasureComplete, sub.Erasure, "%s: never complete before a sweep checked its record", sub.ID)
	}

	// A build of version 1 still running after the upgrade.
	_, err = pool.Exec(ctx, oldErase, "live", "op-3")
	require.NoError(t, err)
	all, err := ks.Erasures(ctx, erasure.ErasureQuery{After: pending[1].Sequence})
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, "live", all[0].Subject)
	require.Equal(t, erasure.ErasureKeyDestroyed, all[0].State)

	// A sweep completes all three; b-old's record was appended before.
	jcfg := postgres.Config{Schema: schema + "_j"}
	require.NoError(t, postgres.Migrate(ctx, pool, jcfg))
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{jcfg.Schema}.Sanitize()+` CASCADE`)
	})
	j, err := postgres.NewJournal(pool, jcfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	rec, err := erasure.RecordEvent(pending[0])
	require.NoError(t, err)
	_, err = j.Append(ctx, []journal.Event{rec}, journal.AppendOptions{})
	require.NoError(t, err)
	done, err := erasure.CompletePending(ctx, erasure.CompleteParams{Journal: j, KeyStore: ks})
	require.NoError(t, err)
	require.Len(t, done, 3)
	pending, err = ks.Erasures(ctx, erasure.ErasureQuery{PendingOnly: true})
	require.NoError(t, err)
	require.Empty(t, pending)
	n := 0
	for r, err := range j.Read(ctx, erasure.RecordQuery(), journal.ReadOptions{}) {
		require.NoError(t, err)
		_, ok, err := erasure.ParseRecord(&r)
		require.NoError(t, err)
		require.True(t, ok)
		n++
	}
	require.Equal(t, 3, n, "one record per erasure")
	require.NoError(t, postgres.MigrateKeyStore(ctx, pool, cfg), "migrating again is a no-op")
}
