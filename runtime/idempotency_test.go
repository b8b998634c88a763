package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/runtime"
)

func TestIdempotencyMemory(t *testing.T) {
	t.Parallel()
	testIdempotencyFirstOutcome(t, memoryEnv())
}

func TestIdempotencyPostgres(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	testIdempotencyFirstOutcome(t, postgresEnv(t))
}

// testIdempotencyFirstOutcome: a repeated key answers the first execution's
// outcome (its version and the state right after it, not the stream's
// current state), and the same key with a different command is
// ErrIdempotencyKeyReused; both the same after a restart.
func testIdempotencyFirstOutcome(t *testing.T, e *env) {
	ctx := context.Background()
	target := counter("keyed")
	key := runtime.WithIdempotencyKey("k-1")
	check := func(rt *runtime.Runtime) {
		t.Helper()
		again, err := runtime.ExecuteTyped[CounterState](ctx, rt, target, Increment{By: 5}, key)
		require.NoError(t, err)
		require.True(t, again.Duplicate)
		require.Equal(t, uint64(1), again.Version, "the version right after the first execution")
		require.Equal(t, 5, again.State.Count, "the state right after the first execution, not the current one")
		require.Len(t, again.Records, 1)

		_, err = rt.Execute(ctx, target, Increment{By: 7}, key)
		require.ErrorIs(t, err, runtime.ErrIdempotencyKeyReused)
		require.False(t, runtime.IsRetryable(err))
		var kr *runtime.KeyReusedError
		require.ErrorAs(t, err, &kr)
		require.Equal(t, "k-1", kr.Key)
		require.Equal(t, 6, mustExec(t, rt, target, Get{}).State.Count, "nothing more was applied")
	}
	rt := e.start(t)
	first, err := runtime.ExecuteTyped[CounterState](ctx, rt, target, Increment{By: 5}, key)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	mustExec(t, rt, target, Increment{By: 1})
	check(rt)
	require.NoError(t, rt.Shutdown(ctx))

	check(e.start(t, func(c *runtime.Config) { c.NodeID = "restarted" }))
}
