package partitioned_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/runtime"
)

// deposits runs one deposit of 1 into each account of partition p named
// in acked through rt, retrying retryable failures (a move fences the
// partition) up to 50 times each, and counts them in acked.
func deposits(t *testing.T, ctx context.Context, rt *runtime.Runtime, p string, acked map[string]int) {
	t.Helper()
	for a := range acked {
		target := runtime.Target{Partition: p, Aggregate: "account", ID: a}
		var err error
		for range 50 {
			if _, err = rt.Execute(ctx, target, deposit{Amount: 1}); err == nil || !runtime.IsRetryable(err) {
				break
			}
		}
		require.NoError(t, err, "%s", target)
		acked[a]++
	}
}

// requireServedBy checks that db holds every acknowledged deposit of p
// exactly once, each account's chain verifying, and that other holds no
// event of p but has it fenced as moved to the member named to.
func requireServedBy(t *testing.T, ctx context.Context, db, other *database, p, to string, acked ...map[string]int) {
	t.Helper()
	total := 0
	for a, n := range merged(acked...) {
		total += n
		v, err := journal.VerifyStream(ctx, db.journal, journal.StreamID{Partition: p, Tag: journal.NewTag("account", a)})
		require.NoError(t, err)
		require.EqualValues(t, n, v, "account %s", a)
	}
	require.Equal(t, total, db.count(t, `SELECT count(DISTINCT id) FROM %s.events WHERE partition = $1`, p))
	require.Equal(t, total, db.count(t, `SELECT count(*) FROM %s.events WHERE partition = $1`, p))
	require.Zero(t, other.count(t, `SELECT count(*) FROM %s.events WHERE partition = $1`, p))
	require.Zero(t, other.count(t, `SELECT count(*) FROM %s.streams WHERE partition = $1`, p))
	require.Equal(t, 1, other.count(t, `SELECT count(*) FROM %s.partition_fences WHERE partition = $1 AND state = 'moved' AND moved_to = $2`, p, to))
	require.Zero(t, db.count(t, `SELECT count(*) FROM %s.partition_fences WHERE partition = $1`, p))
}

// merged returns the counts of several maps of accounts.
func merged(ms ...map[string]int) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// TestPartitionMoveThereBackAndThereAgainBetweenServers moves partition
// "east" from the shared server ("one") to a second one ("two"), back, and
// there again, under a runtime on a router that started with east on one:
// each move is a new one (never taken for the resume of an earlier one),
// carries every acknowledged deposit exactly once, and the router follows
// each by itself. During the move back, stopped after its pre-copy, a node
// whose map still names "one" (where the partition is moving in) is sent to
// "two", which still serves it, instead of waiting for the move to end; its
// deposit is carried too.
func TestPartitionMoveThereBackAndThereAgainBetweenServers(t *testing.T) {
	ctx := context.Background()
	one, two, r := twoDatabases(t, map[string]string{"east": "one"})
	rt, _ := accountRuntime(t, ctx, r, snapshotsOf(t, r, map[string]*database{"one": one, "two": two}), "move-again-node")
	defer func() { require.NoError(t, rt.Shutdown(ctx)) }()
	acked := map[string]int{"0": 0, "1": 0, "2": 0, "3": 0}
	staleAcked := map[string]int{"s0": 0, "s1": 0} // accounts rt never holds
	deposits(t, ctx, rt, "east", acked)
	deposits(t, ctx, rt, "east", acked)

	dbs := map[string]*database{"one": one, "two": two}
	route := []string{"one", "two", "one", "two"}
	for i := 1; i < len(route); i++ {
		from, to := route[i-1], route[i]
		spec := pgadmin.PartitionMove{Partition: "east", Source: dbs[from].pool, SourceSchema: dbs[from].cfg.Schema,
			Target: dbs[to].pool, TargetSchema: dbs[to].cfg.Schema, To: to, BatchSize: 3}
		if i == 2 {
			cctx, cancel := context.WithCancel(ctx)
			first := spec
			first.Progress = func(p pgadmin.MoveProgress) {
				if p.Step == pgadmin.MovePrecopy {
					cancel()
				}
			}
			_, err := pgadmin.MovePartition(cctx, first)
			require.ErrorIs(t, err, context.Canceled)
			stale, err := partitioned.New(partitioned.Config{
				Members:    []partitioned.Member{one.member("one"), two.member("two")},
				Partitions: map[string]string{"east": "one"},
			})
			require.NoError(t, err)
			staleRT, _ := accountRuntime(t, ctx, stale, snapshotsOf(t, stale, map[string]*database{"one": one, "two": two}), "stale-node")
			deposits(t, ctx, staleRT, "east", staleAcked)
			require.NoError(t, staleRT.Shutdown(ctx))
			m, err := stale.MemberOf("east")
			require.NoError(t, err)
			require.Equal(t, "two", m, "the target named where the partition is served")
		}
		rep, err := pgadmin.MovePartition(ctx, spec)
		require.NoError(t, err, "move %d, %s to %s", i, from, to)
		require.Equal(t, i == 2, rep.Resumed, "move %d", i)
		requireServedBy(t, ctx, dbs[to], dbs[from], "east", to, acked, staleAcked)
		deposits(t, ctx, rt, "east", acked)
		m, err := r.MemberOf("east")
		require.NoError(t, err)
		require.Equal(t, to, m, "the router followed move %d", i)
		requireServedBy(t, ctx, dbs[to], dbs[from], "east", to, acked, staleAcked)
	}
	require.Equal(t, 2, two.count(t, `SELECT count(*) FROM %s.partition_move_history WHERE partition = 'east'`))
	require.Equal(t, 1, one.count(t, `SELECT count(*) FROM %s.partition_move_history WHERE partition = 'east'`))
}
