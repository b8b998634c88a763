package pgadmin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/postgres/pgadmin"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// A ledger aggregate for the retention test: each Post appends one Posted.
type (
	post   struct{ Amount int }
	posted struct {
		Amount int    `json:"amount"`
		Memo   string `json:"memo"`
	}
	ledger struct {
		Count int `json:"count"`
		Total int `json:"total"`
	}
)

// ledgerRuntime starts a runtime on f with the ledger aggregate registered,
// snapshotting every 100 events and on passivation.
func ledgerRuntime(t *testing.T, f *fixture, node string) *runtime.Runtime {
	t.Helper()
	ctx := t.Context()
	rt, err := runtime.New(ctx, runtime.Config{Journal: f.journal, Snapshots: f.snapshots,
		SnapshotPolicy: &snapshots.Policy{Every: 100, OnPassivation: true}, NodeID: node})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Shutdown(context.WithoutCancel(ctx)) })
	require.NoError(t, runtime.RegisterEvent[posted](rt, "Posted", 1))
	memo := strings.Repeat("retention keeps the hot tables small; ", 25) // ~1 KB per event
	require.NoError(t, runtime.RegisterAggregate(rt, runtime.Aggregate[ledger]{
		Name:    "ledger",
		Initial: func() ledger { return ledger{} },
		Decide: func(_ ledger, c any) ([]any, error) {
			return []any{posted{Amount: c.(post).Amount, Memo: memo}}, nil
		},
		Evolve: func(s ledger, e any) ledger {
			s.Count++
			s.Total += e.(posted).Amount
			return s
		},
	}))
	return rt
}

// ownDatabase creates a database of its own for the test (dropped at its
// end) and returns its URL. VACUUM FULL keeps the deleted rows that a
// transaction in the same database might still see; other tests' transactions
// in the shared test database would make how much it returns depend on
// their timing. Transactions in other databases do not hold it back.
func ownDatabase(t *testing.T) string { return pgtest.Database(t, "scribe_retention_") }

// waitForHorizon waits until no transaction of the server (in any
// database) is older than a transaction ID drawn now, so that VACUUM FULL may
// drop every row deleted before it: a row some transaction might still see is
// kept. On a shared test server other tests' transactions would otherwise
// decide how much it returns. It fails after 2 minutes, naming the oldest
// transactions.
func waitForHorizon(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	var now string
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&now))
	start := time.Now()
	var older string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(datname || ' pid ' || pid || ' (' || left(query, 60) || ')', '; '), '')
			FROM pg_stat_activity WHERE pid <> pg_backend_pid()
			  AND (age(backend_xmin) > age($1::xid8::xid) OR age(backend_xid) > age($1::xid8::xid))`, now).Scan(&older)
		return err == nil && older == ""
	}, 2*time.Minute, 5*time.Millisecond, "transactions older than the archive's deletes still run: %s", older)
	t.Logf("waited %s for older transactions of the server to end", time.Since(start).Round(time.Millisecond))
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// TestRetentionShrinksHotTables: a policy retires 90% of a ledger's 1000
// events; after VACUUM FULL (Compact, once no older transaction of the server
// runs) the hot tables and their indexes are measurably smaller (sizes in the
// log), the aggregate still loads and takes
// commands (recovering from its snapshot, never touching the archive), the
// stream verifies from its checkpoint and its archived part against it, and
// the archived events read back through ReadStreamWithArchive.
func TestRetentionShrinksHotTables(t *testing.T) {
	t.Parallel()
	f := setupAt(t, ownDatabase(t), 0)
	ctx := t.Context()
	target := runtime.Target{Aggregate: "ledger", ID: "1"}
	stream := target.Stream()

	rt := ledgerRuntime(t, f, "retention-a")
	total := 0
	_, err := rt.Execute(ctx, target, post{Amount: 1}, runtime.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	total++
	for i := 2; i <= 999; i++ {
		_, err := rt.Execute(ctx, target, post{Amount: i})
		require.NoError(t, err)
		total += i
	}
	first, err := runtime.ExecuteTyped[ledger](ctx, rt, target, post{Amount: 1000}, runtime.WithIdempotencyKey("k-1000"))
	require.NoError(t, err)
	total += 1000
	require.NoError(t, rt.Shutdown(ctx), "passivation snapshots the stream at its head")
	snap, err := f.snapshots.Load(ctx, stream, 1<<62)
	require.NoError(t, err)
	require.Equal(t, uint64(1000), snap.Version)
	var original []journal.Record
	for r, err := range f.journal.ReadStream(ctx, stream, 1, 0) {
		require.NoError(t, err)
		original = append(original, r)
	}
	require.Len(t, original, 1000)

	require.NoError(t, f.admin.Compact(ctx, false)) // a settled starting point
	before, err := f.admin.StorageSizes(ctx)
	require.NoError(t, err)

	policy := pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{"ledger": {KeepLast: 100}}}
	var reports []pgadmin.ArchiveProgress
	prog, err := f.admin.Archive(ctx, policy, pgadmin.ArchiveOptions{BatchSize: 250, Progress: func(p pgadmin.ArchiveProgress) { reports = append(reports, p) }})
	require.NoError(t, err)
	require.Equal(t, uint64(900), prog.Versions)
	require.Equal(t, uint64(900), prog.Events)
	require.Len(t, reports, 4, "900 versions in batches of 250")
	deleted, err := f.admin.StorageSizes(ctx)
	require.NoError(t, err)
	waitForHorizon(t, f.pool)
	require.NoError(t, f.admin.Compact(ctx, true))
	after, err := f.admin.StorageSizes(ctx)
	require.NoError(t, err)
	t.Logf("hot tables (events + event_tags, with indexes): %s before, %s after the archive's DELETEs, %s after VACUUM FULL (%.0f%% smaller); archive tables %s",
		mib(before.Hot()), mib(deleted.Hot()), mib(after.Hot()), 100*(1-float64(after.Hot())/float64(before.Hot())), mib(after.Archive()))
	t.Logf("events %s -> %s, event_tags %s -> %s", mib(before.Events), mib(after.Events), mib(before.EventTags), mib(after.EventTags))
	require.GreaterOrEqual(t, deleted.Hot(), before.Hot(), "DELETE alone returns no space to the files")
	require.Less(t, after.Hot()*3, before.Hot(), "90%% of the rows left: the hot tables shrink by more than two thirds")
	require.Greater(t, after.Archive(), int64(0))

	sum, err := f.journal.TagSummary(ctx, stream)
	require.NoError(t, err)
	require.Equal(t, journal.Checkpoint{Version: 900, Hash: original[899].Links[0].Hash, Position: original[899].Position}, sum.Cut)
	var ae *journal.ArchivedError
	for _, err := range f.journal.ReadStream(ctx, stream, 1, 0) {
		require.ErrorAs(t, err, &ae)
	}
	require.Equal(t, uint64(900), ae.CutVersion)

	// A new runtime recovers from the snapshot (State and an actor alike).
	rt2 := ledgerRuntime(t, f, "retention-b")
	st, err := runtime.State[ledger](ctx, rt2, target)
	require.NoError(t, err)
	require.Equal(t, ledger{Count: 1000, Total: total}, st.State)
	// A repeated idempotency key whose events were archived is refused,
	// never run twice.
	_, err = rt2.Execute(ctx, target, post{Amount: 1}, runtime.WithIdempotencyKey("k-1"))
	require.ErrorIs(t, err, journal.ErrArchived)
	// A repeated idempotency key answers its first outcome, whose state is
	// folded through the archive.
	dup, err := runtime.ExecuteTyped[ledger](ctx, rt2, target, post{Amount: 1000}, runtime.WithIdempotencyKey("k-1000"))
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, first.State, dup.State)
	require.Equal(t, uint64(1000), dup.Version)
	res, err := runtime.ExecuteTyped[ledger](ctx, rt2, target, post{Amount: 1})
	require.NoError(t, err)
	require.Equal(t, uint64(1001), res.Version)
	require.Equal(t, ledger{Count: 1001, Total: total + 1}, res.State)

	n, err := journal.VerifyStream(ctx, f.journal, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(101), n, "verified from the checkpoint")
	n, err = journal.VerifyArchive(ctx, f.journal, stream, sum.Cut)
	require.NoError(t, err)
	require.Equal(t, uint64(900), n)

	var all []journal.Record
	for r, err := range f.journal.ReadStreamWithArchive(ctx, stream, 1, 0) {
		require.NoError(t, err)
		all = append(all, r)
	}
	require.Len(t, all, 1001)
	require.Equal(t, original, all[:1000], "the archived events read back unchanged")
}

// TestRetiredAggregateRefusesCommands: a command for an aggregate whose
// stream was retired fails with journal.ErrStreamRetired, not retryable,
// whether its actor was active when the stream was retired or recovers after
// the stream was archived whole.
func TestRetiredAggregateRefusesCommands(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	target := runtime.Target{Aggregate: "ledger", ID: "closed"}
	rt := ledgerRuntime(t, f, "retired-a")
	for i := 1; i <= 3; i++ {
		_, err := rt.Execute(ctx, target, post{Amount: i})
		require.NoError(t, err)
	}
	_, err := f.admin.RetireStream(ctx, target.Stream())
	require.NoError(t, err)
	_, err = rt.Execute(ctx, target, post{Amount: 4})
	require.ErrorIs(t, err, journal.ErrStreamRetired, "the active actor's append is refused")
	require.False(t, runtime.IsRetryable(err))
	require.NoError(t, rt.Shutdown(ctx))

	_, err = f.admin.Archive(ctx, pgadmin.RetentionPolicy{}, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	rt2 := ledgerRuntime(t, f, "retired-b")
	_, err = rt2.Execute(ctx, target, post{Amount: 5})
	require.ErrorIs(t, err, journal.ErrStreamRetired, "a recovering actor reports the tombstone")
	require.False(t, runtime.IsRetryable(err))
	sum, err := f.journal.TagSummary(ctx, target.Stream())
	require.NoError(t, err)
	require.Equal(t, uint64(3), sum.Version)
}
