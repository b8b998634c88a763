package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// TestUnslicedCheckpointSurvivesUpgrade: an unsliced projection that
// applied events before the upgrade (its checkpoint, events and epoch in its
// projections row, as builds before the one-slice form kept them) keeps its
// checkpoint through the migration; a runner resumes after it, and every
// event is applied exactly once across the upgrade. A projection that
// applied nothing gets no slice from the migration and runs as before.
func TestUnslicedCheckpointSurvivesUpgrade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, schema := pgtest.PoolAt(t, pgtest.URL(t), nil)
	cfg := postgres.Config{Schema: schema, PollInterval: 50 * time.Millisecond}
	require.NoError(t, postgres.MigrateBeforeUnslicedSlice(ctx, pool, cfg))
	s := pgx.Identifier{schema}.Sanitize()
	table := pgx.Identifier{schema, "rm_applied"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (model text, id uuid, n int NOT NULL, PRIMARY KEY (model, id))`)
	require.NoError(t, err)
	h := readModelHarness(pool, table)

	// The old build: ten events, the first six applied into the read model
	// with the checkpoint in the projection's row, in one transaction; a
	// second projection set up and paused, nothing applied.
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	var recs []journal.Record
	for range 10 {
		res, err := j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "E", SchemaVersion: 1, Tags: []journal.Tag{"s:1"}, Data: []byte(`{}`)}}, journal.AppendOptions{})
		require.NoError(t, err)
		recs = append(recs, res.Records...)
	}
	k := projection.Key{Name: "balances", Version: 1}
	cp := recs[5].Position
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := h.Apply(ctx, tx, k.String(), recs[:6]); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+s+`.projections (name, version, commit_xid, seq, events, owner, epoch, lease_until, state)
			VALUES ($1, $2, $3, $4, 6, 'old-build', 3, clock_timestamp() + interval '1 hour', 'running'),
			       ('idle', 1, 0, 0, 0, '', 0, '-infinity', 'idle')`,
			k.Name, k.Version, int64(cp.Commit), int64(cp.Seq))
		return err
	}))

	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	store, err := postgres.NewProjectionStore(pool, cfg)
	require.NoError(t, err)
	st, err := store.Status(ctx, k)
	require.NoError(t, err)
	require.Equal(t, cp, st.Checkpoint, "the checkpoint survives the migration")
	require.EqualValues(t, 6, st.Events)
	require.EqualValues(t, 3, st.Epoch)
	require.Empty(t, st.Owner, "the old build's lease is void")
	require.Zero(t, st.Slices, "it is still unsliced")
	sts, l, err := store.Slices(ctx, k)
	require.NoError(t, err)
	require.False(t, l.Sliced())
	require.Len(t, sts, 1)
	idle, _, err := store.Slices(ctx, projection.Key{Name: "idle", Version: 1})
	require.NoError(t, err)
	require.Empty(t, idle, "a projection that applied nothing gets its slice at its first join")

	p := projection.Projection[pgx.Tx]{Name: k.Name, Version: k.Version, Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
		return h.Apply(ctx, tx, k.String(), b.Records)
	}}
	r, err := projection.NewRunner(j, store, p, projection.Options{Owner: "new-build", LeaseTTL: 2 * time.Second, Backoff: 10 * time.Millisecond})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	require.NoError(t, r.WaitFor(ctx, recs[9].Position))
	cancel()
	require.NoError(t, <-done)
	applied := h.Applied(t, k.String())
	require.Len(t, applied, len(recs))
	for _, rec := range recs {
		require.Equal(t, 1, applied[rec.ID], "event %s", rec.ID)
	}
	st, err = store.Status(ctx, k)
	require.NoError(t, err)
	require.Equal(t, recs[9].Position, st.Checkpoint)
	require.EqualValues(t, 10, st.Events)
	require.Greater(t, st.Epoch, uint64(3), "epochs go on from the old build's")
}
