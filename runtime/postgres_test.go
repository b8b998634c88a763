package runtime_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/postgres"
)

// postgresEnv returns an env on a fresh, migrated schema of the test database
// (skipped loudly without SCRIBE_TEST_DATABASE_URL).
func postgresEnv(t *testing.T) *env { return postgresEnvTB(t) }

// postgresEnvTB is postgresEnv for tests and benchmarks.
func postgresEnvTB(t testing.TB) *env {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(context.Background(), pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	snaps, err := postgres.NewSnapshotStore(pool, cfg)
	require.NoError(t, err)
	rows := func(t testing.TB) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "streams"}.Sanitize()).Scan(&n))
		return n
	}
	return &env{j: j, s: j, snaps: snaps, streamRows: rows}
}

// TestPostgresGhosts runs the tests of streams without events on Postgres.
func TestPostgresGhosts(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	t.Run("UnknownStreamsLeaveNoRow", func(t *testing.T) { t.Parallel(); testUnknownStreamsLeaveNoRow(t, postgresEnv(t)) })
	t.Run("StreamCreatedElsewhere", func(t *testing.T) { t.Parallel(); testStreamCreatedElsewhere(t, postgresEnv(t)) })
}

// TestPostgres runs the runtime's done-when tests on the Postgres journal,
// sessions and snapshot store.
func TestPostgres(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	runDoneWhen(t, postgresEnv)
}
