package postgres_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/postgres"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgxpool's background health check goroutine ends shortly after Close.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

// fixture is a migrated schema with a journal and a snapshot store on it.
type fixture struct {
	pool      *pgxpool.Pool
	cfg       postgres.Config
	journal   *postgres.Journal
	snapshots *postgres.SnapshotStore
}

// setup migrates a fresh schema and opens a journal on it; edit adjusts the
// config first. Cleanup closes the journal before the schema is dropped.
func setup(t testing.TB, edit ...func(*postgres.Config)) *fixture {
	t.Helper()
	return setupPool(t, 0, edit...)
}

// setupPool is setup with a pool of at least maxConns connections.
func setupPool(t testing.TB, maxConns int32, edit ...func(*postgres.Config)) *fixture {
	t.Helper()
	pool, schema := pgtest.PoolWith(t, func(c *pgxpool.Config) { c.MaxConns = max(c.MaxConns, maxConns) })
	cfg := postgres.Config{Schema: schema}
	for _, e := range edit {
		e(&cfg)
	}
	require.NoError(t, postgres.Migrate(context.Background(), pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	st, err := postgres.NewSnapshotStore(pool, cfg)
	require.NoError(t, err)
	return &fixture{pool: pool, cfg: cfg, journal: j, snapshots: st}
}

// tamper overwrites the stored data of event id without fixing any hash.
func (f *fixture) tamper(ctx context.Context, id uuid.UUID) error {
	_, err := f.pool.Exec(ctx, `UPDATE `+quote(f.cfg.Schema)+`.events SET data = convert_to('{"tampered":true}', 'UTF8') WHERE id = $1`, id)
	return err
}

func quote(s string) string { return `"` + s + `"` }
