package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/metricread"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

// TestStateFromReplica: with Config.Replica, State reads a streaming standby
// (started by the test). AtLeastVersion returns the version asked for, from
// the replica once it has replayed it, and from the primary when the replica
// has not within ReplicaVersionWait (replay paused); without it, State is as
// current as the replica's replay.
func TestStateFromReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	t.Parallel()
	primary := throwawaypg.Start(t)
	standby := primary.StartStandby(t)
	pool, schema := pgtest.PoolAt(t, primary.URL(), nil)
	ctx := t.Context()
	engine := metricread.New()
	cfg := postgres.Config{Schema: schema, MeterProvider: engine.Provider}
	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	snaps, err := postgres.NewSnapshotStore(pool, cfg)
	require.NoError(t, err)
	rpool, err := pgxpool.New(ctx, standby.URL())
	require.NoError(t, err)
	t.Cleanup(rpool.Close)
	replica, err := postgres.NewReplica(rpool, j)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Close() })

	e := &env{j: j, s: j, snaps: snaps}
	rt := e.start(t, func(c *runtime.Config) { c.Replica, c.ReplicaVersionWait = replica, 300*time.Millisecond })
	first := mustExec(t, rt, counter("r"), Increment{By: 5})
	st, err := runtime.State[CounterState](ctx, rt, counter("r"), runtime.AtLeastVersion(first.Version))
	require.NoError(t, err)
	require.Equal(t, first.Version, st.Version)
	require.Equal(t, 5, st.State.Count, "read from the replica once it replayed the append")
	sums, err := engine.Sums(ctx)
	require.NoError(t, err)
	require.Zero(t, sums.Int(postgres.MetricReplicaFallbacks), "runtime.State waits for the replica itself, never through Replica.ReaderAt")

	_, err = rpool.Exec(ctx, "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
	second := mustExec(t, rt, counter("r"), Increment{By: 2})
	stale, err := runtime.State[CounterState](ctx, rt, counter("r"))
	require.NoError(t, err)
	require.Equal(t, first.Version, stale.Version, "without AtLeastVersion, State is as current as the paused replica")
	start := time.Now()
	st, err = runtime.State[CounterState](ctx, rt, counter("r"), runtime.AtLeastVersion(second.Version))
	require.NoError(t, err)
	require.Equal(t, second.Version, st.Version, "the replica did not reach the version in ReplicaVersionWait: the primary answered")
	require.Equal(t, 7, st.State.Count)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "it waited for the replica first")

	_, err = rpool.Exec(ctx, "SELECT pg_wal_replay_resume()")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := runtime.State[CounterState](context.Background(), rt, counter("r"))
		return err == nil && st.Version == second.Version
	}, 30*time.Second, 5*time.Millisecond, "the replica catches up once replay resumes")
}
