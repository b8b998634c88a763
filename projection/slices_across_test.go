package projection_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// A sliced projection across several databases: its slices are partition ×
// tag slice, each reading its partition whole and applying the records of
// its tag slice. These tests run one over a router of two members, with
// several runners, a runner killed, and (on Postgres) a partition moved
// there and back while writers append, and check that every delivery
// (record, tag slice) is applied exactly once, in its partition's and
// stream's order, and that each slice's checkpoint ends on the last record
// of its partition (it moves past the records it skips).

// acrossSlicing is the slicing of the tests' projection.
var acrossSlicing = projection.Slicing{Group: "acct", Count: 4}

// acrossDelivery is what the read model keeps of one delivery: the slice
// it was applied in and its place (1, 2, …) among the slice's deliveries.
type acrossDelivery struct {
	Slice int `json:"slice"`
	N     int `json:"n"`
}

var (
	acrossApplied = projection.Collection[acrossDelivery]{Name: "applied"} // "<event ID>/<tag slice>"
	acrossStreams = projection.Collection[uint64]{Name: "streams"}         // tag → last version applied
	acrossCounts  = projection.Collection[int]{Name: "count"}              // slice → deliveries applied
)

// acrossProjection applies a batch into rows: it fails a delivery it
// already applied and a stream version out of order, so a projection that
// repeats or reorders stops with a *projection.FailedError.
func acrossProjection(name string, sl projection.Slicing) projection.RowProjection {
	return projection.RowProjection{Name: name, Version: 1, Slicing: &sl,
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			counts := map[int]int{}
			for i, rec := range b.Records {
				s := b.Slices[i]
				if _, ok := counts[s]; !ok {
					n, _, err := acrossCounts.Get(ctx, rows, strconv.Itoa(s))
					if err != nil {
						return err
					}
					counts[s] = n
				}
				key := fmt.Sprintf("%s/%d", rec.ID, s%sl.Count)
				if prev, dup, err := acrossApplied.Get(ctx, rows, key); err != nil {
					return err
				} else if dup {
					return fmt.Errorf("event %s applied again in slice %d (it was number %d of slice %d)", rec.ID, s, prev.N, prev.Slice)
				}
				tags := sl.TagsIn(rec, s)
				if len(tags) == 0 {
					return fmt.Errorf("event %s delivered to slice %d, which none of its tags %v is in", rec.ID, s, rec.Tags)
				}
				for _, tag := range tags {
					last, _, err := acrossStreams.Get(ctx, rows, string(tag))
					if err != nil {
						return err
					}
					if v := rec.Version(tag); v != last+1 {
						return fmt.Errorf("%s v%d applied after v%d (slice %d)", tag, v, last, s)
					}
					if err := acrossStreams.Put(ctx, rows, string(tag), rec.Version(tag)); err != nil {
						return err
					}
				}
				counts[s]++
				if err := acrossApplied.Put(ctx, rows, key, acrossDelivery{Slice: s, N: counts[s]}); err != nil {
					return err
				}
			}
			for s, n := range counts {
				if err := acrossCounts.Put(ctx, rows, strconv.Itoa(s), n); err != nil {
					return err
				}
			}
			return nil
		}}
}

// killableStore is a store whose runner can be killed: after kill it
// neither releases its leases nor leaves the live runners, as a process
// that died.
type killableStore[Tx any] struct {
	projection.RowStore[Tx]
	dead atomic.Bool
}

func (s *killableStore[Tx]) Release(ctx context.Context, ls []projection.Lease) error {
	if s.dead.Load() {
		return nil
	}
	return s.RowStore.Release(ctx, ls)
}

func (s *killableStore[Tx]) Leave(ctx context.Context, k projection.Key, owner string) error {
	if s.dead.Load() {
		return nil
	}
	return s.RowStore.Leave(ctx, k, owner)
}

// acrossRunner is one running runner of the projection.
type acrossRunner struct {
	owner  string
	store  interface{ kill() }
	cancel context.CancelFunc
	done   chan error
}

func (s *killableStore[Tx]) kill() { s.dead.Store(true) }

// kill stops the runner as a crash would: its leases and membership stay
// until they lapse.
func (ar *acrossRunner) kill(t *testing.T) {
	t.Helper()
	ar.store.kill()
	ar.cancel()
	require.NoError(t, <-ar.done)
}

// stop stops the runner cleanly.
func (ar *acrossRunner) stop(t *testing.T) {
	t.Helper()
	ar.cancel()
	require.NoError(t, <-ar.done)
}

// startSlicedAcross runs the projection over src on store as owner;
// applied is signalled after each batch.
func startSlicedAcross[Tx any](t *testing.T, src projection.Source, store projection.RowStore[Tx], name, owner string, applied *batchLog) *acrossRunner {
	t.Helper()
	ks := &killableStore[Tx]{RowStore: store}
	r, err := projection.NewRunner(src, projection.Store[Tx](ks), projection.Bind(projection.RowStore[Tx](ks), acrossProjection(name, acrossSlicing)), projection.Options{
		Owner: owner, LeaseTTL: time.Second, BatchSize: 16, Backoff: 5 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Committed: func(projection.Batch) { applied.add(owner) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ar := &acrossRunner{owner: owner, store: ks, cancel: cancel, done: make(chan error, 1)}
	exited := make(chan struct{})
	go func() { ar.done <- r.Run(ctx); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })
	return ar
}

// batchLog counts the batches each runner applied.
type batchLog struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{}
}

func newBatchLog() *batchLog { return &batchLog{n: map[string]int{}, changed: make(chan struct{})} }

func (l *batchLog) add(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[owner]++
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait waits until owner applied more than n batches (deadline: a
// minute) and returns how many it applied.
func (l *batchLog) wait(t *testing.T, owner string, n int) int {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		l.mu.Lock()
		got, ch := l.n[owner], l.changed
		l.mu.Unlock()
		if got > n {
			return got
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%s applied %d batches within a minute, want more than %d", owner, got, n)
		}
	}
}

// waitMore waits until owner applies another batch.
func (l *batchLog) waitMore(t *testing.T, owner string) {
	t.Helper()
	l.mu.Lock()
	n := l.n[owner]
	l.mu.Unlock()
	l.wait(t, owner, n)
}

// acrossWriters appends to partitions while running, as the runtime's
// stream actors do, under leases (only leased appends are fenced by a
// partition move): writer w of partition p appends to stream acct:p-w with
// an expected version; every fourth of its events is a transfer that also
// carries acct:p-tw (another tag slice, usually), and every fifth event is
// a note of stream note:p-w with no tag of the group (a record no slice
// applies). Each writer appends through a router of its own (routerOf), so
// that the writers' appends are not committed together.
type acrossWriters struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	retries atomic.Int64
	acked   atomic.Int64
	tick    chan struct{}
}

func startAcrossWriters(t *testing.T, routerOf func() *partitioned.Router, perPartition map[string]int) *acrossWriters {
	t.Helper()
	aw := &acrossWriters{stop: make(chan struct{}), tick: make(chan struct{}, 1)}
	for p, n := range perPartition {
		for w := range n {
			r := routerOf()
			node, err := r.OpenNode(context.Background(), fmt.Sprintf("writer-%s-%d", p, w), 10*time.Minute)
			require.NoError(t, err)
			aw.wg.Add(1)
			go func() {
				defer aw.wg.Done()
				defer func() { aw.fail(p, w, r.CloseNode(context.Background(), node)) }()
				acct := journal.Tag(fmt.Sprintf("acct:%s-%d", p, w))
				other := journal.Tag(fmt.Sprintf("acct:%s-t%d", p, w))
				note := journal.Tag(fmt.Sprintf("note:%s-%d", p, w))
				leases := map[journal.Tag]journal.Lease{}
				var v, notes uint64
				for i := 0; ; i++ {
					select {
					case <-aw.stop:
						return
					default:
					}
					ev := journal.Event{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1, Tags: []journal.Tag{acct}, Data: []byte(`{}`),
						Metadata: journal.Metadata{Partition: p}}
					expect := map[journal.Tag]uint64{acct: v}
					switch {
					case i%5 == 4:
						ev.Type, ev.Tags, expect = "Noted", []journal.Tag{note}, map[journal.Tag]uint64{note: notes}
						notes++
					case v%4 == 3:
						ev.Type, ev.Tags = "Transferred", []journal.Tag{acct, other}
						v++
					default:
						v++
					}
					if err := aw.append(r, node, p, ev, expect, leases); err != nil {
						aw.fail(p, w, err)
						return
					}
					aw.acked.Add(1)
					select {
					case aw.tick <- struct{}{}:
					default:
					}
					time.Sleep(time.Millisecond) // pacing, not ordering: the runners keep up
				}
			}()
		}
	}
	return aw
}

// append appends ev under the leases of its streams (acquired when
// missing), retrying while its partition moves: the errors a move causes
// (journal.ErrUnavailable, which ErrPartitionMoving matches,
// journal.ErrPartitionMoved, and a lease the move revoked,
// journal.ErrInvalidSession) drop the leases and acquire them again, which
// follows the partition to its new member; any other error fails the
// writer. A retry that finds the event stored (an earlier attempt's
// outcome was unknown) counts as done.
func (aw *acrossWriters) append(r *partitioned.Router, node journal.NodeSession, p string, ev journal.Event, expect map[journal.Tag]uint64, leases map[journal.Tag]journal.Lease) error {
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	retryable := func(err error) bool {
		return errors.Is(err, journal.ErrUnavailable) || errors.Is(err, journal.ErrPartitionMoved) || errors.Is(err, journal.ErrInvalidSession)
	}
	for {
		var err error
		var ls []journal.Lease
		for _, tag := range ev.Tags {
			l, ok := leases[tag]
			if !ok {
				if l, err = r.Acquire(ctx, node, journal.StreamID{Partition: p, Tag: tag}, 5*time.Second); err != nil {
					break
				}
				leases[tag] = l
			}
			ls = append(ls, l)
		}
		if err == nil {
			_, err = r.Append(ctx, []journal.Event{ev}, journal.AppendOptions{Expect: expect, Leases: ls})
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, journal.ErrVersionMismatch):
			if _, rerr := r.ReadEvent(ctx, ev.ID); rerr == nil {
				return nil // stored by an attempt whose answer was lost
			}
			return err
		case !retryable(err):
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("still refused after a minute: %w", err)
		}
		aw.retries.Add(1)
		clear(leases)
		time.Sleep(5 * time.Millisecond) // a pause between retries, not an ordering
	}
}

// fail records writer w of p's error (nil: none).
func (aw *acrossWriters) fail(p string, w int, err error) {
	if err == nil {
		return
	}
	aw.mu.Lock()
	defer aw.mu.Unlock()
	aw.err = errors.Join(aw.err, fmt.Errorf("writer %s-%d: %w", p, w, err))
}

// waitAcked waits until the writers have n acknowledged appends.
func (aw *acrossWriters) waitAcked(t *testing.T, n int64) {
	t.Helper()
	timeout := time.After(time.Minute)
	for aw.acked.Load() < n {
		select {
		case <-aw.tick:
		case <-timeout:
			t.Fatalf("the writers have %d appends, want %d", aw.acked.Load(), n)
		}
	}
}

// finish stops the writers and fails on any writer error.
func (aw *acrossWriters) finish(t *testing.T) {
	t.Helper()
	close(aw.stop)
	aw.wg.Wait()
	require.NoError(t, aw.err)
}

// partitionRecords reads partition p in its order through the router.
func partitionRecords(t *testing.T, r *partitioned.Router, p string) []journal.Record {
	t.Helper()
	var out []journal.Record
	for rec, err := range r.Read(context.Background(), journal.Query{Partition: p, All: true}, journal.ReadOptions{}) {
		require.NoError(t, err)
		out = append(out, rec)
	}
	return out
}

// checkSlicedAcross waits until every slice's checkpoint is the last
// record of its partition (also past the records the slice skipped) on
// the member serving it, then checks the read model: each (record, tag
// slice) applied once, in the slice of its partition, in the partition's
// order; and each slice's Events equal to its deliveries.
func checkSlicedAcross[Tx any](t *testing.T, r *partitioned.Router, store projection.RowStore[Tx], k projection.Key) {
	t.Helper()
	ctx := context.Background()
	sl := acrossSlicing
	parts := r.FeedPartitions()
	recs := map[string][]journal.Record{}
	for _, p := range parts {
		recs[p] = partitionRecords(t, r, p)
	}
	var sts []projection.SliceStatus
	var layout projection.Layout
	require.Eventually(t, func() bool {
		var err error
		sts, layout, err = store.Slices(ctx, k)
		require.NoError(t, err)
		if len(sts) != len(parts)*sl.Count {
			return false
		}
		for _, st := range sts {
			last := uuid.Nil
			if rs := recs[st.Partition]; len(rs) > 0 {
				last = rs[len(rs)-1].ID
			}
			if st.EventID != last {
				return false
			}
		}
		return true
	}, 2*time.Minute, 20*time.Millisecond, "every slice's checkpoint ends on its partition's last record")
	require.Equal(t, sl.Group, layout.Group)
	require.Equal(t, sl.Count, layout.Count)
	require.ElementsMatch(t, parts, layout.Partitions)

	reader := store.ReadRows(k)
	deliveries := 0
	for i, st := range sts {
		require.Equal(t, i, st.Slice)
		require.Equal(t, layout.Partitions[i/sl.Count], st.Partition, "slice %d is tag slice %d of partition %d", i, i%sl.Count, i/sl.Count)
		if rs := recs[st.Partition]; len(rs) > 0 {
			member, err := r.MemberOf(st.Partition)
			require.NoError(t, err)
			require.Equal(t, member, st.Member, "slice %d's checkpoint is on the member serving %s", i, st.Partition)
			require.Equal(t, rs[len(rs)-1].Position, st.Checkpoint, "slice %d's checkpoint is its partition's last position there", i)
		}
		var keys []string
		var want []journal.Record
		for _, rec := range recs[st.Partition] {
			in := false
			for _, tag := range rec.Tags {
				if s, ok := sl.SliceOf(tag); ok && s == i%sl.Count {
					in = true
				}
			}
			if in {
				keys, want = append(keys, fmt.Sprintf("%s/%d", rec.ID, i%sl.Count)), append(want, rec)
			}
		}
		got, err := acrossApplied.GetMany(ctx, reader, keys)
		require.NoError(t, err)
		for j, key := range keys {
			d, ok := got[key]
			require.True(t, ok, "record %s of %s was never applied in slice %d", want[j].ID, st.Partition, i)
			require.Equal(t, acrossDelivery{Slice: i, N: j + 1}, d, "record %s of %s: applied in another slice or out of the partition's order", want[j].ID, st.Partition)
		}
		n, _, err := acrossCounts.Get(ctx, reader, strconv.Itoa(i))
		require.NoError(t, err)
		require.Equal(t, len(keys), n, "slice %d applied its deliveries and no more", i)
		require.Equal(t, uint64(len(keys)), st.Events, "slice %d's Events count its deliveries", i)
		deliveries += len(keys)
	}
	all := 0
	for _, p := range parts {
		all += len(recs[p])
	}
	t.Logf("%d records in %d partitions, %d deliveries over %d slices", all, len(parts), deliveries, len(sts))
	require.Greater(t, deliveries, 0)
}

// memRouterOf returns a router over two memory journals: "one" serves the
// default partition and "p", "two" serves "q".
func memRouterOf(t *testing.T) *partitioned.Router {
	t.Helper()
	a, b := memory.New(), memory.New()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	r, err := partitioned.New(partitioned.Config{
		Members:    []partitioned.Member{{Name: "one", Journal: a}, {Name: "two", Journal: b}},
		Partitions: map[string]string{"p": "one", "q": "two"}, Default: "one",
	})
	require.NoError(t, err)
	return r
}

// TestSlicedProjectionAcrossDatabasesMemory: a sliced projection over two
// memory journals (three partitions × four tag slices) with three runners
// while writers append; one runner is killed (its leases lapse) and the
// others take its slices. Every delivery is applied once, in order, and
// each slice's checkpoint ends on its partition's last record.
func TestSlicedProjectionAcrossDatabasesMemory(t *testing.T) {
	t.Parallel()
	r := memRouterOf(t)
	store := projection.NewMemoryStore()
	applied := newBatchLog()
	aw := startAcrossWriters(t, func() *partitioned.Router { return r }, map[string]int{"p": 3, "q": 3, journal.DefaultPartition: 1})
	runners := []*acrossRunner{
		startSlicedAcross(t, r, store, "across", "r1", applied),
		startSlicedAcross(t, r, store, "across", "r2", applied),
		startSlicedAcross(t, r, store, "across", "r3", applied),
	}
	for _, ar := range runners {
		applied.wait(t, ar.owner, 0)
	}
	runners[0].kill(t)
	aw.waitAcked(t, aw.acked.Load()+200)
	applied.waitMore(t, "r2")
	aw.finish(t)
	k := projection.Key{Name: "across", Version: 1}
	checkSlicedAcross(t, r, projection.RowStore[projection.NoTx](store), k)
	st, err := store.Status(context.Background(), k)
	require.NoError(t, err)
	require.Equal(t, 12, st.Slices)
	require.Equal(t, 2, st.SliceOwners, "the killed runner's slices are held by the two others")
	for _, ar := range runners[1:] {
		ar.stop(t)
	}
}

// TestSlicedProjectionAcrossDatabasesRefusesAnotherLayout: a version
// stored with one layout refuses a runner that asks for another: sliced
// across databases after unsliced across databases, another Count, and
// the same projection on one database.
func TestSlicedProjectionAcrossDatabasesRefusesAnotherLayout(t *testing.T) {
	t.Parallel()
	r := memRouterOf(t)
	store := projection.NewMemoryStore()
	k := projection.Key{Name: "layout", Version: 1}
	ctx := context.Background()
	_, err := store.Join(ctx, k, projection.Layout{Partitions: r.FeedPartitions()}, "x", time.Second)
	require.NoError(t, err)
	run := func(src projection.Source, sl projection.Slicing) error {
		p := projection.Projection[projection.NoTx]{Name: k.Name, Version: k.Version, Slicing: &sl,
			Handle: func(context.Context, projection.NoTx, projection.Batch) error { return nil }}
		run, err := projection.NewRunner(src, store, p, projection.Options{LeaseTTL: time.Second})
		require.NoError(t, err)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return run.Run(rctx)
	}
	err = run(r, acrossSlicing)
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.ErrorContains(t, err, "sliced by partition")

	k.Version = 2
	_, err = store.Join(ctx, k, projection.Layout{Group: "acct", Count: 4, Partitions: r.FeedPartitions()}, "x", time.Second)
	require.NoError(t, err)
	other := acrossSlicing
	other.Count = 8
	err = run(r, other)
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.ErrorContains(t, err, "into 4 slices of each partition")
	err = run(memory.New(), acrossSlicing)
	require.ErrorIs(t, err, journal.ErrConfiguration, "the same slicing on one database is another layout")
}

// TestSlicedProjectionAcrossDatabasesPostgres: a sliced projection over two
// Postgres databases with three runners while writers append to "p" (which
// moves one → two → one) and "q" (on two); one runner is killed after the
// first move. Its checkpoints and read model live in the memory store, or
// in the Postgres store in database one. Every delivery is applied exactly
// once, in its partition's and stream's order; each slice's checkpoint
// ends on its partition's last record on the member serving it, with its
// Events right; on the Postgres store every slice's lag is zero.
func TestSlicedProjectionAcrossDatabasesPostgres(t *testing.T) {
	t.Run("memory store", func(t *testing.T) {
		t.Parallel()
		runSlicedAcrossMoves(t, func(*pgxPoolDB) projection.RowStore[projection.NoTx] { return projection.NewMemoryStore() }, nil)
	})
	t.Run("postgres store", func(t *testing.T) {
		t.Parallel()
		var st *postgres.ProjectionStore
		var admin *pgadmin.Admin
		runSlicedAcrossMoves(t, func(one *pgxPoolDB) projection.RowStore[pgx.Tx] {
			var err error
			st, err = postgres.NewProjectionStore(one.pool, one.cfg)
			require.NoError(t, err)
			admin, err = pgadmin.New(one.pool, one.cfg)
			require.NoError(t, err)
			return st
		}, func(t *testing.T, k projection.Key) {
			lags, err := admin.SliceLags(context.Background(), k, 0)
			require.NoError(t, err)
			require.Len(t, lags, 12)
			for i, l := range lags {
				require.Zero(t, l.Events, "slice %d lags", i)
			}
			// Another tag slicing of the same version is refused at once.
			_, err = st.Join(context.Background(), k, projection.Layout{Group: "acct", Count: 8, Partitions: []string{"default", "p", "q"}}, "x", time.Second)
			require.ErrorIs(t, err, projection.ErrSlicingChanged)
		})
	})
}

// pgxPoolDB is one migrated schema on the test server.
type pgxPoolDB struct {
	pool    *pgxpool.Pool
	cfg     postgres.Config
	journal *postgres.Journal
}

func openAcrossDB(t *testing.T, url string) *pgxPoolDB {
	t.Helper()
	pool, schema := pgtest.PoolAt(t, url, nil)
	cfg := postgres.Config{Schema: schema, PollInterval: 20 * time.Millisecond}
	require.NoError(t, postgres.Migrate(context.Background(), pool, cfg))
	db := &pgxPoolDB{pool: pool, cfg: cfg}
	db.journal = db.newJournal(t)
	return db
}

// newJournal returns another journal of db's schema.
func (db *pgxPoolDB) newJournal(t *testing.T) *postgres.Journal {
	t.Helper()
	j, err := postgres.NewJournal(db.pool, db.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// runSlicedAcrossMoves runs the projection over two Postgres members with
// its store from store (given member one), moving "p" one → two → one
// while writers append, killing a runner after the first move; after is
// called with the projection's key once the checks passed.
func runSlicedAcrossMoves[Tx any](t *testing.T, store func(one *pgxPoolDB) projection.RowStore[Tx], after func(t *testing.T, k projection.Key)) {
	url := pgtest.URL(t)
	dbs := map[string]*pgxPoolDB{"one": openAcrossDB(t, url), "two": openAcrossDB(t, url)}
	routerOf := func(one, two journal.Journal) *partitioned.Router {
		r, err := partitioned.New(partitioned.Config{
			Members: []partitioned.Member{
				{Name: "one", Journal: one},
				{Name: "two", Journal: two},
			},
			Partitions: map[string]string{"p": "one", "q": "two"}, Default: "one",
		})
		require.NoError(t, err)
		return r
	}
	r := routerOf(dbs["one"].journal, dbs["two"].journal)
	writerRouter := func() *partitioned.Router {
		return routerOf(dbs["one"].newJournal(t), dbs["two"].newJournal(t))
	}
	st := store(dbs["one"])
	applied := newBatchLog()
	aw := startAcrossWriters(t, writerRouter, map[string]int{"p": 4, "q": 2, journal.DefaultPartition: 1})
	runners := []*acrossRunner{
		startSlicedAcross(t, r, st, "across", "r1", applied),
		startSlicedAcross(t, r, st, "across", "r2", applied),
		startSlicedAcross(t, r, st, "across", "r3", applied),
	}
	for _, ar := range runners {
		applied.wait(t, ar.owner, 0)
	}
	from := "one"
	for i, to := range []string{"two", "one"} {
		aw.waitAcked(t, aw.acked.Load()+100)
		_, err := pgadmin.MovePartition(context.Background(), pgadmin.PartitionMove{
			Partition: "p", Source: dbs[from].pool, SourceSchema: dbs[from].cfg.Schema,
			Target: dbs[to].pool, TargetSchema: dbs[to].cfg.Schema, To: to, BatchSize: 50,
		})
		require.NoError(t, err, "moving p from %s to %s", from, to)
		from = to
		if i == 0 {
			runners[0].kill(t)
		}
		// Writers go on on the new member, and the runners with them.
		aw.waitAcked(t, aw.acked.Load()+100)
		applied.waitMore(t, "r2")
		applied.waitMore(t, "r3")
	}
	aw.finish(t)
	k := projection.Key{Name: "across", Version: 1}
	checkSlicedAcross(t, r, st, k)
	member, err := r.MemberOf("p")
	require.NoError(t, err)
	require.Equal(t, "one", member, "the runners followed p back")
	t.Logf("%d appends, %d retried while p moved", aw.acked.Load(), aw.retries.Load())
	if after != nil {
		after(t, k)
	}
	for _, ar := range runners[1:] {
		ar.stop(t)
	}
}
