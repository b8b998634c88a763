package postgres_test

import (
	"context"
	"sync/atomic"

	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

func event(typ string, tags ...journal.Tag) journal.Event {
	return journal.Event{ID: journal.NewEventID(), Type: typ, SchemaVersion: 1, Tags: tags,
		Data: json.RawMessage(fmt.Sprintf(`{"type":%q}`, typ))}
}

// TestFencingExpiredHolder: holder A's node session expires, B acquires, A's
// append is rejected, B's succeeds, and the stream has no fork.
func TestFencingExpiredHolder(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *postgres.Config) { c.Batching.Disabled = !batched })
			j := f.journal
			ctx := t.Context()
			stream := journal.Stream("account:fenced")

			a, err := j.OpenNode(ctx, "node-a", 300*time.Millisecond)
			require.NoError(t, err)
			b, err := j.OpenNode(ctx, "node-b", time.Minute)
			require.NoError(t, err)
			leaseA, err := j.Acquire(ctx, a, stream, time.Second)
			require.NoError(t, err)
			_, err = j.Append(ctx, []journal.Event{event("Opened", stream.Tag)}, journal.AppendOptions{Leases: []journal.Lease{leaseA}, Expect: map[journal.Tag]uint64{stream.Tag: 0}})
			require.NoError(t, err)

			// B waits for A's expiry (database clock) and takes over.
			leaseB, err := j.Acquire(ctx, b, stream, 5*time.Second)
			require.NoError(t, err)
			require.Greater(t, leaseB.Epoch, leaseA.Epoch)

			_, err = j.Append(ctx, []journal.Event{event("ByA", stream.Tag)}, journal.AppendOptions{Leases: []journal.Lease{leaseA}, Expect: map[journal.Tag]uint64{stream.Tag: 1}})
			require.Error(t, err)
			require.True(t, errors.Is(err, journal.ErrInvalidSession) || errors.Is(err, journal.ErrSessionExpired), "A is fenced: %v", err)
			var se *journal.SessionError
			require.ErrorAs(t, err, &se)
			require.Equal(t, stream, se.Stream)

			_, err = j.Append(ctx, []journal.Event{event("ByB", stream.Tag)}, journal.AppendOptions{Leases: []journal.Lease{leaseB}, Expect: map[journal.Tag]uint64{stream.Tag: 1}})
			require.NoError(t, err)

			var types []string
			for r, err := range j.ReadStream(ctx, stream, 1, 0) {
				require.NoError(t, err)
				types = append(types, r.Type)
			}
			require.Equal(t, []string{"Opened", "ByB"}, types, "no fork: A's event is not in the stream")
			n, err := journal.VerifyStream(ctx, j, stream)
			require.NoError(t, err)
			require.EqualValues(t, 2, n)
		})
	}
}

// TestFencingRacingActivations runs two activations of one stream appending
// concurrently while the lease moves between them; every append either lands
// at the next version or is rejected, and the stream stays one gap-free chain.
func TestFencingRacingActivations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	j := f.journal
	ctx := t.Context()
	stream := journal.Stream("account:contested")
	// Two activations on one node: each Acquire raises the epoch and fences
	// the other activation's lease.
	node, err := j.OpenNode(ctx, "node-a", time.Minute)
	require.NoError(t, err)
	var (
		mu       sync.Mutex
		accepted int
	)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				lease, err := j.Acquire(ctx, node, stream, time.Second)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				// Each activation appends with its lease, without an expected
				// version: only the fence protects the stream.
				for range 3 {
					_, err := j.Append(ctx, []journal.Event{event(fmt.Sprintf("by-%d", i), stream.Tag)}, journal.AppendOptions{Leases: []journal.Lease{lease}})
					if err != nil {
						if !errors.Is(err, journal.ErrInvalidSession) {
							t.Errorf("unexpected error: %v", err)
						}
						break
					}
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	require.Positive(t, accepted)
	n, err := journal.VerifyStream(ctx, j, stream)
	require.NoError(t, err)
	require.EqualValues(t, accepted, n, "every accepted append is in the chain, nothing else")
}

// TestFenceInClaimStatement changes the lease between the append's checks
// and its write: the write statement itself must reject it.
func TestFenceInClaimStatement(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		sql  string
		want error
	}{
		"released": {`UPDATE %s.streams SET released = true`, journal.ErrInvalidSession},
		"taken":    {`UPDATE %s.streams SET epoch = epoch + 1`, journal.ErrInvalidSession},
		"expired":  {`UPDATE %s.nodes SET expires_at = clock_timestamp() - interval '1 second'`, journal.ErrSessionExpired},
	}
	for name, c := range cases {
		for _, batched := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/batched=%v", name, batched), func(t *testing.T) {
				t.Parallel()
				f := setup(t, func(cfg *postgres.Config) { cfg.Batching.Disabled = !batched })
				j := f.journal
				ctx := t.Context()
				stream := journal.Stream("account:raced")
				node, err := j.OpenNode(ctx, "node-a", time.Minute)
				require.NoError(t, err)
				lease, err := j.Acquire(ctx, node, stream, time.Second)
				require.NoError(t, err)
				var armed atomic.Bool
				armed.Store(true)
				j.SetAfterChecks(func(ctx context.Context, _ *pgxpool.Conn) error {
					if armed.CompareAndSwap(true, false) {
						_, err := f.pool.Exec(ctx, fmt.Sprintf(c.sql, quote(f.cfg.Schema)))
						return err
					}
					return nil
				})
				e := event("Raced", stream.Tag)
				_, err = j.Append(ctx, []journal.Event{e}, journal.AppendOptions{Leases: []journal.Lease{lease}})
				require.ErrorIs(t, err, c.want)
				require.False(t, armed.Load(), "the hook ran between the checks and the write")
				_, err = j.ReadEvent(ctx, e.ID)
				require.ErrorIs(t, err, journal.ErrNotFound)
				sum, err := j.TagSummary(ctx, stream)
				require.NoError(t, err)
				require.Zero(t, sum.Version)
			})
		}
	}
}

// TestReleaseOfEmptyStreamDeletesItsRow: a stream leased for a command that
// appended nothing (an account that does not exist) keeps no row once
// released; a stream with events keeps its row. A new lease of the deleted
// stream gets an epoch above the old one's.
func TestReleaseOfEmptyStreamDeletesItsRow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	j, ctx := f.journal, t.Context()
	rows := func() int {
		var n int
		require.NoError(t, f.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %q.streams", f.cfg.Schema)).Scan(&n))
		return n
	}
	node, err := j.OpenNode(ctx, "n", time.Minute)
	require.NoError(t, err)
	for i := range 20 {
		l, err := j.Acquire(ctx, node, journal.Stream(journal.NewTag("ghost", fmt.Sprint(i))), time.Second)
		require.NoError(t, err)
		require.NoError(t, j.Release(ctx, l))
	}
	require.Zero(t, rows(), "no row for streams that never had an event")

	ghost := journal.Stream("ghost:0")
	l1, err := j.Acquire(ctx, node, ghost, time.Second)
	require.NoError(t, err)
	_, err = j.Append(ctx, []journal.Event{event("A", ghost.Tag)}, journal.AppendOptions{Leases: []journal.Lease{l1}})
	require.NoError(t, err)
	require.NoError(t, j.Release(ctx, l1))
	require.Equal(t, 1, rows(), "a stream with events keeps its row")
	l2, err := j.Acquire(ctx, node, ghost, time.Second)
	require.NoError(t, err)
	require.Greater(t, l2.Epoch, l1.Epoch)
}
