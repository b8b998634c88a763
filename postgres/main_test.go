package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/journaltest"
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
	return setupAt(t, pgtest.URL(t), maxConns, edit...)
}

// setupAt is setupPool on the database at url.
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
	return &fixture{pool: pool, cfg: cfg, journal: j, snapshots: st}
}

// alter changes one field of the stored event id without fixing any hash.
func (f *fixture) alter(ctx context.Context, id uuid.UUID, what journaltest.Alteration) error {
	set := map[journaltest.Alteration]string{
		journaltest.AlterData:       `data = convert_to('{"tampered":true}', 'UTF8')`,
		journaltest.AlterType:       `type = type || 'Forged'`,
		journaltest.AlterMetadata:   `metadata = convert_to(jsonb_set(convert_from(metadata, 'UTF8')::jsonb, '{correlationId}', '"forged"')::text, 'UTF8')`,
		journaltest.AlterRecordedAt: `recorded_at = recorded_at + interval '1 millisecond'`,
	}[what]
	if set == "" {
		return fmt.Errorf("alter: unknown alteration %q", what)
	}
	_, err := f.pool.Exec(ctx, `UPDATE `+quote(f.cfg.Schema)+`.events SET `+set+` WHERE id = $1`, id)
	return err
}

// remove deletes event id's rows (event and tag index) without touching its
// streams' rows.
func (f *fixture) remove(ctx context.Context, id uuid.UUID) error {
	s := quote(f.cfg.Schema)
	_, err := f.pool.Exec(ctx, `WITH e AS (DELETE FROM `+s+`.events WHERE id = $1 RETURNING commit_xid, seq)
		DELETE FROM `+s+`.event_tags t USING e WHERE t.commit_xid = e.commit_xid AND t.seq = e.seq`, id)
	return err
}

// swap exchanges which events versions v and w of stream point to.
func (f *fixture) swap(ctx context.Context, stream journal.StreamID, v, w uint64) error {
	stream = stream.Normalize()
	_, err := f.pool.Exec(ctx, `UPDATE `+quote(f.cfg.Schema)+`.event_tags t SET commit_xid = o.commit_xid, seq = o.seq
		FROM `+quote(f.cfg.Schema)+`.event_tags o
		WHERE t.partition = $1 AND t.tag = $2 AND o.partition = $1 AND o.tag = $2
		  AND ((t.version = $3 AND o.version = $4) OR (t.version = $4 AND o.version = $3))`,
		stream.Partition, string(stream.Tag), int64(v), int64(w))
	return err
}

// harness returns the conformance harness of f. Its peer is a second
// Journal on the same pool and schema, as another process would open it.
func (f *fixture) harness(t testing.TB) journaltest.Harness {
	peer, err := postgres.NewJournal(f.pool, f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = peer.Close() })
	return journaltest.Harness{
		Peer:        peer,
		Journal:     f.journal,
		Sessions:    f.journal,
		MaxDataSize: f.cfg.MaxDataSize,
		Alter:       f.alter,
		Remove:      f.remove,
		Swap:        f.swap,
		HoldCommit:  f.journal.HoldAppend,
	}
}

func quote(s string) string { return `"` + s + `"` }
