package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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
	_, err = ks.Erase(ctx, "c-1", "op")
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
	require.Contains(t, err.Error(), "MigrateKeyStore")
}
