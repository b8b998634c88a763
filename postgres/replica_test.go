package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/metricread"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/journaltest"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection/projectiontest"
)

// replicaFixture is a migrated schema on a primary, pools on the primary and
// its streaming standby, and journals on both.
type replicaFixture struct {
	pool, rpool *pgxpool.Pool
	schema      string
	journal     *postgres.Journal
	replica     *postgres.Replica
}

// replicaServers is a primary and a pool on its streaming standby, shared by
// the subtests of TestReplica (each has a schema of its own).
type replicaServers struct {
	primary *throwawaypg.Server
	rpool   *pgxpool.Pool
}

func setupReplica(t *testing.T, srv replicaServers, cfg postgres.Config) *replicaFixture {
	t.Helper()
	f := &replicaFixture{rpool: srv.rpool}
	f.pool, f.schema = pgtest.PoolAt(t, srv.primary.URL(), nil)
	ctx := t.Context()
	cfg.Schema = f.schema
	require.NoError(t, postgres.Migrate(ctx, f.pool, cfg))
	var err error
	f.journal, err = postgres.NewJournal(f.pool, cfg)
	require.NoError(t, err)
	f.replica, err = postgres.NewReplica(f.rpool, f.journal)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.replica.Close()
		_ = f.journal.Close()
	})
	f.waitReplayed(t)
	return f
}

// waitReplayed waits until the standby has replayed everything the primary
// has written so far.
func (f *replicaFixture) waitReplayed(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, standbyCaughtUp(ctx, f.pool, f.rpool), "the standby replays the primary's WAL")
}

// standbyCaughtUp waits until the standby has replayed the primary's WAL up
// to where it was when called (by WAL position, not by what the catch-up
// gate shows).
func standbyCaughtUp(ctx context.Context, primary, standby *pgxpool.Pool) error {
	var lsn string
	if err := primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	for {
		var done bool
		if err := standby.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the standby has not replayed the primary's WAL up to %s: %w", lsn, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func replicaEvent(tag string, n int) journal.Event {
	return journal.Event{ID: journal.NewEventID(), Type: "Noted", SchemaVersion: 1, Tags: []journal.Tag{journal.Tag(tag)}, Data: []byte(fmt.Sprintf(`{"n":%d}`, n))}
}

// TestReplica runs the replica cases on one primary and one streaming standby
// of it, started by the test.
func TestReplica(t *testing.T) {
	primary, rpool := startPrimaryAndStandby(t)
	srv := replicaServers{primary: primary, rpool: rpool}
	t.Run("RefusesWrites", func(t *testing.T) { t.Parallel(); replicaRefusesWrites(t, srv) })
	t.Run("CatchUpIsGapFree", func(t *testing.T) { t.Parallel(); replicaCatchUpIsGapFree(t, srv) })
	t.Run("ReaderAtFallsBack", func(t *testing.T) { replicaReaderAtFallsBack(t, srv) })
}

// replicaRefusesWrites: a replica journal never writes; the error says where
// writes go.
func replicaRefusesWrites(t *testing.T, srv replicaServers) {
	f := setupReplica(t, srv, postgres.Config{})
	ctx := t.Context()
	_, err := f.replica.Append(ctx, []journal.Event{replicaEvent("note:a", 1)}, journal.AppendOptions{})
	require.ErrorIs(t, err, postgres.ErrReplicaReadOnly)
	require.ErrorContains(t, err, "through the primary journal")
	_, err = f.replica.OpenNode(ctx, "n1", 10*time.Second)
	require.ErrorIs(t, err, postgres.ErrReplicaReadOnly)
	err = f.replica.RecordTypes(ctx, nil, journal.BuildTypes{Build: "b1"})
	require.ErrorIs(t, err, postgres.ErrReplicaReadOnly)
	require.Same(t, f.journal, f.replica.Primary())

	_, err = postgres.NewReplica(f.pool, f.journal)
	require.ErrorContains(t, err, "the pool is the primary's own")
	_, err = postgres.NewReplica(f.rpool, f.replica.Journal)
	require.ErrorContains(t, err, "is itself a replica")
}

// replicaCatchUpIsGapFree: on a standby, a catch-up reader is never shown
// a position that a later commit undercuts. An append is held uncommitted
// (its position assigned, its rows written and streamed to the standby),
// later appends commit and are replayed; the replica shows none of them until
// the held one commits, and then shows all of them, in order. A subscriber on
// the replica sees every event of concurrent appenders exactly once, in
// position order.
func replicaCatchUpIsGapFree(t *testing.T, srv replicaServers) {
	f := setupReplica(t, srv, postgres.Config{})
	ctx := t.Context()

	first, err := f.journal.Append(ctx, []journal.Event{replicaEvent("note:first", 0)}, journal.AppendOptions{})
	require.NoError(t, err)
	hold, err := f.journal.HoldAppend(ctx, []journal.Event{replicaEvent("note:held", 1)}, journal.AppendOptions{})
	require.NoError(t, err)
	var once sync.Once
	release := func() (res journal.AppendResult, err error) {
		once.Do(func() { res, err = hold() })
		return res, err
	}
	t.Cleanup(func() { _, _ = release() }) // a failed check must not leave the transaction open
	var later []journal.AppendResult
	for i := range 3 {
		res, err := f.journal.Append(ctx, []journal.Event{replicaEvent(fmt.Sprintf("note:later-%d", i), i)}, journal.AppendOptions{})
		require.NoError(t, err)
		later = append(later, res)
	}
	f.waitReplayed(t)
	sum, err := f.replica.TagSummary(ctx, journal.Stream("note:later-2"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), sum.Version, "the later appends are on the standby")

	var seen []journal.Position
	for r, err := range f.replica.ReadAll(ctx, journal.Position{}, 0) {
		require.NoError(t, err)
		seen = append(seen, r.Position)
	}
	require.Equal(t, []journal.Position{first.Last()}, seen, "while the held append is open, the replica shows nothing after the position it will commit at")
	ok, err := f.replica.Replayed(ctx, later[0].Last())
	require.NoError(t, err)
	require.False(t, ok)

	held, err := release()
	require.NoError(t, err)
	require.True(t, held.Last().Before(later[0].Last()), "the held append's position is below the later ones'")
	f.waitReplayed(t)
	// The standby's gate is its snapshot's xmin: a transaction of the
	// primary's server that took an ID between the appends (the journal's
	// own NOTIFY transactions do) and whose end the standby has not replayed
	// yet holds the gate back for a moment. Until then the replica shows a
	// prefix of the positions, never a gap; then all of them, in order.
	want := []journal.Position{first.Last(), held.Last(), later[0].Last(), later[1].Last(), later[2].Last()}
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen = seen[:0]
		for r, err := range f.replica.ReadAll(ctx, journal.Position{}, 0) {
			require.NoError(t, err)
			seen = append(seen, r.Position)
		}
		require.LessOrEqual(t, len(seen), len(want), "the replica shows %v", seen)
		require.Equal(t, want[:len(seen)], seen, "the replica shows a prefix of the positions, in order")
		if len(seen) == len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, want, seen)

	// Concurrent appenders on the primary, one subscriber on the replica.
	const writers, each = 4, 50
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan journal.Record, writers*each+8)
	subErr := make(chan error, 1)
	go func() {
		for r, err := range f.replica.Subscribe(sub, journal.Query{Items: []journal.QueryItem{{Types: []string{"Noted"}}}}, seen[len(seen)-1]) {
			if err != nil {
				subErr <- err
				return
			}
			got <- r
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := f.journal.Append(ctx, []journal.Event{replicaEvent(fmt.Sprintf("note:w%d", w), i)}, journal.AppendOptions{})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var prev journal.Position
	ids := map[string]bool{}
	timeout := time.After(60 * time.Second)
	for len(ids) < writers*each {
		select {
		case r := <-got:
			require.True(t, prev.Before(r.Position), "position %s after %s: the replica's subscription went back", r.Position, prev)
			prev = r.Position
			require.False(t, ids[r.ID.String()], "event %s delivered twice", r.ID)
			ids[r.ID.String()] = true
		case err := <-subErr:
			t.Fatalf("the replica's subscription failed: %v", err)
		case <-timeout:
			t.Fatalf("the replica's subscription delivered %d of %d events in 60 s", len(ids), writers*each)
		}
	}
}

// replicaReaderAtFallsBack: a read that must include a position reads the
// replica once it has replayed it, and the primary when it has not within
// Config.ReplicaWait (here the standby's replay is paused: it is not
// parallel, so it ends, replay resumed, before the parallel cases start).
// The fallback is counted in MetricReplicaFallbacks, on the schema's data
// point that the primary's counters share.
func replicaReaderAtFallsBack(t *testing.T, srv replicaServers) {
	r := metricread.New()
	f := setupReplica(t, srv, postgres.Config{ReplicaWait: 300 * time.Millisecond, MeterProvider: r.Provider})
	ctx := t.Context()
	res, err := f.journal.Append(ctx, []journal.Event{replicaEvent("note:a", 1)}, journal.AppendOptions{})
	require.NoError(t, err)
	rd, err := f.replica.ReaderAt(ctx, res.Last())
	require.NoError(t, err)
	require.Same(t, f.replica.Journal, rd, "the standby replays an append within the wait")
	require.Zero(t, f.replica.EngineStats().ReplicaFallbacks)

	_, err = f.rpool.Exec(ctx, "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
	res, err = f.journal.Append(ctx, []journal.Event{replicaEvent("note:a", 2)}, journal.AppendOptions{})
	require.NoError(t, err)
	rd, err = f.replica.ReaderAt(ctx, res.Last())
	require.NoError(t, err)
	require.Same(t, f.journal, rd, "a paused standby: the read goes to the primary")
	require.Equal(t, int64(1), f.replica.EngineStats().ReplicaFallbacks)
	sums, err := r.Sums(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), sums.Int(postgres.MetricReplicaFallbacks))
	require.Equal(t, int64(2), sums.Int(postgres.MetricBatchAppends), "the primary's appends")
	sum, err := rd.TagSummary(ctx, journal.Stream("note:a"))
	require.NoError(t, err)
	require.Equal(t, uint64(2), sum.Version)
	sum, err = f.replica.TagSummary(ctx, journal.Stream("note:a"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), sum.Version, "the paused standby is behind")

	_, err = f.rpool.Exec(ctx, "SELECT pg_wal_replay_resume()")
	require.NoError(t, err)
	rd, err = f.replica.ReaderAt(ctx, res.Last())
	require.NoError(t, err)
	require.Same(t, f.replica.Journal, rd, "replay resumed: the replica serves the read again")
}

// replicaSuiteJournal is the journal the conformance suite sees in
// TestJournalConformanceOnReplica: appends go to a primary journal and
// return once the replica shows them (its gap-free head is at or past their
// position); every read, subscription and summary goes to the replica.
type replicaSuiteJournal struct {
	*postgres.Replica
	primary *postgres.Journal
	// caughtUp waits until the standby has replayed what the primary
	// committed; RecordTypes calls it after recording on the primary.
	caughtUp func(context.Context) error
}

// RecordTypes records on the primary (the replica refuses: a test below)
// and returns once the standby shows it.
func (r replicaSuiteJournal) RecordTypes(ctx context.Context, schemas []journal.TypeSchema, build journal.BuildTypes) error {
	if err := r.primary.RecordTypes(ctx, schemas, build); err != nil {
		return err
	}
	return r.caughtUp(ctx)
}

func (r replicaSuiteJournal) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	res, err := r.primary.Append(ctx, events, opts)
	if err != nil {
		return res, err
	}
	for poll := time.Millisecond; ; poll = min(2*poll, 20*time.Millisecond) {
		ok, err := r.Replayed(ctx, res.Last())
		if err != nil {
			return res, fmt.Errorf("waiting for the replica to show the append: %w", err)
		}
		if ok {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("waiting for the replica to show the append at %s: %w", res.Last(), ctx.Err())
		case <-time.After(poll):
		}
	}
}

// startPrimaryAndStandby starts a primary and a streaming standby of it (a
// parallel test; skipped with -short) and returns the primary and a pool on
// the standby.
func startPrimaryAndStandby(t *testing.T) (*throwawaypg.Server, *pgxpool.Pool) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	t.Parallel()
	primary := throwawaypg.Start(t)
	standby := primary.StartStandby(t)
	rpool, err := pgxpool.New(t.Context(), standby.URL())
	require.NoError(t, err)
	t.Cleanup(rpool.Close)
	return primary, rpool
}

// TestJournalConformanceOnReplica runs the conformance suite with every read
// served by a streaming standby (started by the test) while appends, sessions
// and fences go to the primary: reads, DCB conditions' reads, catch-up and
// live subscriptions, summaries and chain checks must behave on a replica
// exactly as on the primary once the replica shows an append. HoldCommit is
// not given (a held transaction would keep every parallel case's appends from
// showing on the standby, whose gate is cluster-wide): TestReplica holds one
// on its own.
func TestJournalConformanceOnReplica(t *testing.T) {
	primary, rpool := startPrimaryAndStandby(t)
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		f := setupAt(t, primary.URL(), 0)
		replayed := func(ctx context.Context) error { return standbyCaughtUp(ctx, f.pool, rpool) }
		require.NoError(t, replayed(t.Context()), "the standby has the migrated schema")
		replica := func(primary *postgres.Journal) replicaSuiteJournal {
			r, err := postgres.NewReplica(rpool, primary)
			require.NoError(t, err)
			t.Cleanup(func() { _ = r.Close() })
			return replicaSuiteJournal{Replica: r, primary: primary, caughtUp: replayed}
		}
		peer, err := postgres.NewJournal(f.pool, f.cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = peer.Close() })
		thenReplay := func(err error, ctx context.Context) error {
			if err != nil {
				return err
			}
			return replayed(ctx)
		}
		return journaltest.Harness{
			Journal:     replica(f.journal),
			Peer:        replica(peer),
			Sessions:    f.journal,
			MaxDataSize: f.cfg.MaxDataSize,
			Alter: func(ctx context.Context, id uuid.UUID, what journaltest.Alteration) error {
				return thenReplay(f.alter(ctx, id, what), ctx)
			},
			Remove: func(ctx context.Context, id uuid.UUID) error { return thenReplay(f.remove(ctx, id), ctx) },
			Swap: func(ctx context.Context, stream journal.StreamID, v, w uint64) error {
				return thenReplay(f.swap(ctx, stream, v, w), ctx)
			},
		}
	})
}

// TestProjectionConformanceOnReplica runs the projection suite with the
// runners reading the feed from a streaming standby (started by the test)
// while the projection store, its checkpoints, fences and the read model are
// on the primary: catch-up then live, exactly once into the read model,
// restarts, stand-bys, blue-green rebuilds and dead letters hold when the
// events come from a replica.
func TestProjectionConformanceOnReplica(t *testing.T) {
	primary, rpool := startPrimaryAndStandby(t)
	projectiontest.Run(t, func(t *testing.T) projectiontest.Harness[pgx.Tx] {
		f := setupAt(t, primary.URL(), 0, func(c *postgres.Config) { c.PollInterval = 50 * time.Millisecond })
		store, err := postgres.NewProjectionStore(f.pool, f.cfg)
		require.NoError(t, err)
		table := pgx.Identifier{f.cfg.Schema, "rm_applied"}.Sanitize()
		_, err = f.pool.Exec(t.Context(), `CREATE TABLE `+table+` (model text, id uuid, n int NOT NULL, PRIMARY KEY (model, id))`)
		require.NoError(t, err)
		require.NoError(t, standbyCaughtUp(t.Context(), f.pool, rpool), "the standby has the migrated schema")
		r, err := postgres.NewReplica(rpool, f.journal)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		h := readModelHarness(f.pool, table)
		caughtUp := func(ctx context.Context) error { return standbyCaughtUp(ctx, f.pool, rpool) }
		h.Journal, h.Store = replicaSuiteJournal{Replica: r, primary: f.journal, caughtUp: caughtUp}, store
		return h
	})
}
