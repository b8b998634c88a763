package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/postgres"
)

func TestMigrationStatus(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Pool(t)
	ctx := t.Context()
	cfg := postgres.Config{Schema: schema}
	rep, err := postgres.MigrationStatus(ctx, pool, cfg)
	require.NoError(t, err)
	require.Zero(t, rep.Current)
	require.Empty(t, rep.Applied)
	require.NotEmpty(t, rep.Pending)
	require.Equal(t, postgres.LatestVersion(), rep.Pending[len(rep.Pending)-1].Version)
	require.False(t, rep.TooNew())

	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	after, err := postgres.MigrationStatus(ctx, pool, cfg)
	require.NoError(t, err)
	require.Equal(t, postgres.LatestVersion(), after.Current)
	require.Empty(t, after.Pending)
	require.Len(t, after.Applied, len(rep.Pending))
	for _, m := range after.Applied {
		require.WithinDuration(t, time.Now(), m.AppliedAt, time.Minute)
	}

	_, err = pool.Exec(ctx, `INSERT INTO `+quote(schema)+`.schema_migrations (version, name) VALUES (9999, '9999_future.sql')`)
	require.NoError(t, err)
	newer, err := postgres.MigrationStatus(ctx, pool, cfg)
	require.NoError(t, err)
	require.True(t, newer.TooNew())
	require.Equal(t, 9999, newer.Current)
	require.ErrorContains(t, postgres.Migrate(ctx, pool, cfg), "newer than this build's")
}
