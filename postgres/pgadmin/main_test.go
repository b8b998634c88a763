package pgadmin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgxpool's background health check goroutine ends shortly after Close.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

// fixture is a migrated schema with a journal, a snapshot store and an
// Admin on it.
type fixture struct {
	pool      *pgxpool.Pool
	cfg       postgres.Config
	journal   *postgres.Journal
	snapshots *postgres.SnapshotStore
	admin     *pgadmin.Admin
}

// setup migrates a fresh schema and opens a journal and an Admin on it;
// edit adjusts the config first. Cleanup closes the journal before the
// schema is dropped.
func setup(t testing.TB, edit ...func(*postgres.Config)) *fixture {
	t.Helper()
	return setupAt(t, pgtest.URL(t), 0, edit...)
}

// setupPool is setup with a pool of at least maxConns connections.
func setupPool(t testing.TB, maxConns int32, edit ...func(*postgres.Config)) *fixture {
	t.Helper()
	return setupAt(t, pgtest.URL(t), maxConns, edit...)
}

// setupAt is setup on the database at url, with a pool of at least
// maxConns connections.
func setupAt(t testing.TB, url string, maxConns int32, edit ...func(*postgres.Config)) *fixture {
	t.Helper()
	pool, schema := pgtest.PoolAt(t, url, func(c *pgxpool.Config) { c.MaxConns = max(c.MaxConns, maxConns) })
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
	a, err := pgadmin.New(pool, cfg)
	require.NoError(t, err)
	return &fixture{pool: pool, cfg: cfg, journal: j, snapshots: st, admin: a}
}

func quote(s string) string { return `"` + s + `"` }

func event(typ string, tags ...journal.Tag) journal.Event {
	return journal.Event{ID: journal.NewEventID(), Type: typ, SchemaVersion: 1, Tags: tags,
		Data: json.RawMessage(fmt.Sprintf(`{"type":%q}`, typ))}
}
