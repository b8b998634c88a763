package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/projection/projectiontest"
)

// TestProjectionConformance runs the projection suite on the Postgres store:
// the read model is a table written in the handler's transaction.
func TestProjectionConformance(t *testing.T) {
	t.Parallel()
	projectiontest.Run(t, newProjectionHarness)
}

// TestSliceProjectionStore runs the sliced-projection cases on the
// Postgres store.
func TestSliceProjectionStore(t *testing.T) {
	t.Parallel()
	projectiontest.RunSlices(t, newProjectionHarness)
}

func newProjectionHarness(t *testing.T) projectiontest.Harness[pgx.Tx] {
	f := setup(t, func(c *postgres.Config) { c.PollInterval = 50e6 })
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	table := pgx.Identifier{f.cfg.Schema, "rm_applied"}.Sanitize()
	_, err = f.pool.Exec(context.Background(), `CREATE TABLE `+table+` (model text, id uuid, n int NOT NULL, PRIMARY KEY (model, id))`)
	require.NoError(t, err)
	h := readModelHarness(f.pool, table)
	h.Journal, h.Store = f.journal, store
	return h
}

// readModelHarness is the projection suite's read model in table (model, id,
// n) of pool: what Apply, Applied and Clear do, for any journal and store.
func readModelHarness(pool *pgxpool.Pool, table string) projectiontest.Harness[pgx.Tx] {
	return projectiontest.Harness[pgx.Tx]{
		Apply: func(ctx context.Context, tx pgx.Tx, model string, recs []journal.Record) error {
			ids := make([]uuid.UUID, len(recs))
			for i, r := range recs {
				ids[i] = r.ID
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+table+` (model, id, n) SELECT $1, id, 1 FROM unnest($2::uuid[]) AS id
				ON CONFLICT (model, id) DO UPDATE SET n = `+table+`.n + 1`, model, ids)
			return err
		},
		Applied: func(t *testing.T, model string) map[uuid.UUID]int {
			rows, err := pool.Query(context.Background(), `SELECT id, n FROM `+table+` WHERE model = $1`, model)
			require.NoError(t, err)
			out := map[uuid.UUID]int{}
			for rows.Next() {
				var id uuid.UUID
				var n int
				require.NoError(t, rows.Scan(&id, &n))
				out[id] = n
			}
			require.NoError(t, rows.Err())
			return out
		},
		Clear: func(ctx context.Context, tx pgx.Tx, model string) error {
			_, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE model = $1`, model)
			return err
		},
	}
}

// TestProjectionStoreNeedsMigrate: an unmigrated schema is reported as such.
func TestProjectionStoreNeedsMigrate(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	store, err := postgres.NewProjectionStore(pool, postgres.Config{Schema: schema})
	require.NoError(t, err)
	_, err = store.Join(context.Background(), projection.Key{Name: "p", Version: 1}, projection.Layout{}, "a", time.Second)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.ErrorContains(t, err, "run postgres.Migrate")
}

// TestDeadLetterReplayRollsBack: a replay whose handler wrote to the read
// model and then failed leaves nothing in the read model and keeps the
// letter with the new error; the replay that succeeds writes once and
// removes the letter in the same transaction.
func TestDeadLetterReplayRollsBack(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	table := pgx.Identifier{f.cfg.Schema, "rm"}.Sanitize()
	_, err = f.pool.Exec(ctx, `CREATE TABLE `+table+` (id uuid PRIMARY KEY)`)
	require.NoError(t, err)
	res, err := f.journal.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "E", SchemaVersion: 1, Data: []byte(`{}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	rec := res.Records[0]
	k := projection.Key{Name: "rb", Version: 1}
	l, err := claimOne(ctx, store, k, "a")
	require.NoError(t, err)
	require.NoError(t, commitOne(ctx, store, l, journal.Position{}, res.Records, func(ctx context.Context, tx pgx.Tx) error {
		return store.DeadLetter(ctx, tx, projection.DeadLetter{Key: k, Record: rec, Error: "boom", Attempts: 1})
	}))
	write := func(ctx context.Context, tx pgx.Tx, d projection.DeadLetter) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+table+` (id) VALUES ($1)`, d.Record.ID)
		return err
	}
	err = store.ReplayDeadLetter(ctx, k, rec.Position, func(ctx context.Context, tx pgx.Tx, d projection.DeadLetter) error {
		if err := write(ctx, tx, d); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT 1/0`) // fails after the write, leaving tx aborted
		return err
	})
	var herr *projection.HandlerError
	require.ErrorAs(t, err, &herr)
	var n int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
	require.Zero(t, n, "the failed replay's write is rolled back")
	dl, err := store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Contains(t, dl[0].Error, "division by zero")
	require.Equal(t, 2, dl[0].Attempts)

	require.NoError(t, store.ReplayDeadLetter(ctx, k, rec.Position, write))
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
	require.Equal(t, 1, n)
	dl, err = store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Empty(t, dl)
}

// claimOne joins k as an unsliced projection for owner and claims its one
// slice (an error when another runner holds it).
func claimOne(ctx context.Context, st *postgres.ProjectionStore, k projection.Key, owner string) (projection.Lease, error) {
	if _, err := st.Join(ctx, k, projection.Layout{}, owner, time.Minute); err != nil {
		return projection.Lease{}, err
	}
	ls, err := st.Claim(ctx, k, owner, time.Minute, []int{0})
	if err == nil && len(ls) == 0 {
		err = errors.New("the projection's slice is held by another runner")
	}
	if err != nil {
		return projection.Lease{}, err
	}
	return ls[0], nil
}

// commitOne commits recs under l, an unsliced projection's lease, from the
// checkpoint from.
func commitOne(ctx context.Context, st *postgres.ProjectionStore, l projection.Lease, from journal.Position, recs []journal.Record, apply func(context.Context, pgx.Tx) error) error {
	l.Checkpoint = from
	return st.Commit(ctx, []projection.Lease{l}, recs, make([]int, len(recs)), apply)
}
