package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// A waiting Acquire tries again as soon as the lease may have become free,
// whether the holder gives it up in this process or in another one (NOTIFY),
// and when the holder's session expires: with AcquirePollInterval at a minute
// and every session timeout at a minute or more, nothing else could wake it
// within the test's bound.
func TestAcquireWakesOnLeaseChanges(t *testing.T) {
	t.Parallel()
	const never = time.Minute
	cases := map[string]struct {
		sameJournal bool
		free        func(t *testing.T, holder *postgres.Journal, node journal.NodeSession, lease journal.Lease)
	}{
		"released here": {sameJournal: true, free: func(t *testing.T, j *postgres.Journal, _ journal.NodeSession, l journal.Lease) {
			require.NoError(t, j.Release(t.Context(), l))
		}},
		"released elsewhere": {free: func(t *testing.T, j *postgres.Journal, _ journal.NodeSession, l journal.Lease) {
			require.NoError(t, j.Release(t.Context(), l))
		}},
		"node closed elsewhere": {free: func(t *testing.T, j *postgres.Journal, n journal.NodeSession, _ journal.Lease) {
			require.NoError(t, j.CloseNode(t.Context(), n))
		}},
		"node superseded elsewhere": {free: func(t *testing.T, j *postgres.Journal, n journal.NodeSession, _ journal.Lease) {
			_, err := j.OpenNode(t.Context(), n.NodeID, never)
			require.NoError(t, err)
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(cfg *postgres.Config) { cfg.AcquirePollInterval = never })
			ctx := t.Context()
			holder := f.journal
			waiter := f.journal
			if !c.sameJournal {
				var err error
				waiter, err = postgres.NewJournal(f.pool, f.cfg)
				require.NoError(t, err)
				t.Cleanup(func() { _ = waiter.Close() })
			}
			stream := journal.Stream("account:wanted")
			a, err := holder.OpenNode(ctx, "node-a", never)
			require.NoError(t, err)
			lease, err := holder.Acquire(ctx, a, stream, time.Second)
			require.NoError(t, err)
			b, err := waiter.OpenNode(ctx, "node-b", never)
			require.NoError(t, err)

			got := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := waiter.Acquire(ctx, b, stream, 2*never)
				got <- err
			}()
			require.Eventually(t, func() bool { return waiter.EngineStats().AcquireWaits > 0 }, 10*time.Second, time.Millisecond,
				"the second Acquire never found the stream held")
			c.free(t, holder, a, lease)
			select {
			case err := <-got:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("the waiting Acquire was not woken by the lease change")
			}
			require.Less(t, time.Since(start), never/2)
		})
	}

	t.Run("holder expired", func(t *testing.T) {
		t.Parallel()
		f := setup(t, func(cfg *postgres.Config) { cfg.AcquirePollInterval = never })
		ctx := t.Context()
		stream := journal.Stream("account:wanted")
		a, err := f.journal.OpenNode(ctx, "node-a", never)
		require.NoError(t, err)
		_, err = f.journal.Acquire(ctx, a, stream, time.Second)
		require.NoError(t, err)
		// The holder stops renewing: its session ends 300 ms from now.
		_, err = f.pool.Exec(ctx, fmt.Sprintf(`UPDATE %s.nodes SET expires_at = clock_timestamp() + interval '300 milliseconds' WHERE node_id = 'node-a'`, quote(f.cfg.Schema)))
		require.NoError(t, err)
		b, err := f.journal.OpenNode(ctx, "node-b", never)
		require.NoError(t, err)
		start := time.Now()
		lease, err := f.journal.Acquire(ctx, b, stream, 2*never)
		require.NoError(t, err)
		require.Equal(t, "node-b", lease.NodeID)
		require.Less(t, time.Since(start), never/2, "the Acquire waited for the poll interval, not for the holder's expiry")
		require.Positive(t, f.journal.EngineStats().AcquireWaits)
	})
}
