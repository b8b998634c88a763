package partitioned_test

import (
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// seen is what the counting projection keeps of each record it applied:
// its partition and its place (1, 2, …) among the records of its partition
// the projection applied.
type seen struct {
	Partition string `json:"partition"`
	N         int    `json:"n"`
}

var (
	seenRows  = projection.Collection[seen]{Name: "seen"}
	countRows = projection.Collection[int]{Name: "count"}
)

// countingProjection numbers the records of each partition in the order it
// applies them, in its read model (rows committed with the checkpoint), and
// fails a record it already applied: a projection that repeats a record
// stops with a *projection.FailedError.
func countingProjection() projection.RowProjection {
	return projection.RowProjection{
		Name: "across", Version: 1,
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			counts := map[string]int{}
			for _, rec := range b.Records {
				p := rec.Partition()
				if _, ok := counts[p]; !ok {
					n, _, err := countRows.Get(ctx, rows, p)
					if err != nil {
						return err
					}
					counts[p] = n
				}
				prev, dup, err := seenRows.Get(ctx, rows, rec.ID.String())
				if err != nil {
					return err
				}
				if dup {
					return fmt.Errorf("event %s of partition %s applied again (it was number %d)", rec.ID, p, prev.N)
				}
				counts[p]++
				if err := seenRows.Put(ctx, rows, rec.ID.String(), seen{Partition: p, N: counts[p]}); err != nil {
					return err
				}
			}
			for p, n := range counts {
				if err := countRows.Put(ctx, rows, p, n); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// acrossRunner runs the counting projection over the router on store until
// stop; done receives Run's result.
type acrossRunner struct {
	cancel context.CancelFunc
	done   chan error
}

func startAcross[Tx any](ctx context.Context, t *testing.T, r *partitioned.Router, store projection.RowStore[Tx], owner string, progress chan<- struct{}) *acrossRunner {
	t.Helper()
	p := projection.Bind(store, countingProjection())
	run, err := projection.NewRunner(r, store, p, projection.Options{
		Owner: owner, LeaseTTL: 2 * time.Second, BatchSize: 64, Backoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Committed: func(projection.Batch) {
			select {
			case progress <- struct{}{}:
			default:
			}
		},
	})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	ar := &acrossRunner{cancel: cancel, done: make(chan error, 1)}
	go func() { ar.done <- run.Run(rctx) }()
	return ar
}

func (ar *acrossRunner) stop(t *testing.T) {
	t.Helper()
	ar.cancel()
	require.NoError(t, <-ar.done)
}

// partitionEvents reads partition p in its order from the member serving it.
func partitionEvents(t *testing.T, ctx context.Context, r *partitioned.Router, p string) []journal.Record {
	t.Helper()
	var out []journal.Record
	for rec, err := range r.Read(ctx, journal.Query{Partition: p, All: true}, journal.ReadOptions{}) {
		require.NoError(t, err)
		out = append(out, rec)
	}
	return out
}

// acrossCase is one run of TestProjectionAcrossDatabases: partition "p"
// starts on member "one" and moves to each of moves in turn while writers
// append to "p" and to "q" (on "two", never moved); the runner is stopped
// before move number restartAt (-1: never) and started again after it.
type acrossCase struct {
	members   []string
	moves     []string
	restartAt int
}

// runAcross runs c with the projection's checkpoints and read model in
// store, and checks that the projection applied every event of each
// partition exactly once, in the partition's order.
func runAcross[Tx any](t *testing.T, c acrossCase, store func(dbs map[string]*database) projection.RowStore[Tx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	url := pgtest.URL(t)
	dbs := map[string]*database{}
	var members []partitioned.Member
	for _, name := range c.members {
		dbs[name] = openDatabase(t, url)
		members = append(members, dbs[name].member(name))
	}
	r, err := partitioned.New(partitioned.Config{Members: members, Partitions: map[string]string{"p": "one", "q": "two"}, Default: "one"})
	require.NoError(t, err)
	st := store(dbs)
	rt, _ := accountRuntime(t, ctx, r, snapshotsOf(t, r, dbs), "writer")
	defer func() { require.NoError(t, rt.Shutdown(context.WithoutCancel(ctx))) }()

	stop := make(chan struct{})
	dp, wgp := startDepositors(ctx, rt, "p", 6, 3, stop)
	dq, wgq := startDepositors(ctx, rt, "q", 4, 2, stop)
	progress := make(chan struct{}, 1)
	runner := startAcross(ctx, t, r, st, "runner-1", progress)
	key := projection.Key{Name: "across", Version: 1}
	reader := st.ReadRows(key)
	applied := func(p string) int {
		n, _, err := countRows.Get(ctx, reader, p)
		require.NoError(t, err)
		return n
	}
	// waitApplied waits until the projection applied at least n records of
	// p, failing when it stopped.
	waitApplied := func(p string, n int) {
		t.Helper()
		for applied(p) < n {
			select {
			case <-progress:
			case err := <-runner.done:
				t.Fatalf("the projection stopped while %d records of %s were applied (want %d): %v", applied(p), p, n, err)
			case <-ctx.Done():
				t.Fatalf("waiting for the projection to apply %d records of %s (has %d): %v", n, p, applied(p), ctx.Err())
			}
		}
	}

	dp.waitAcked(t, ctx, 40)
	dq.waitAcked(t, ctx, 20)
	waitApplied("p", 20)
	from := "one"
	for i, to := range c.moves {
		if i == c.restartAt {
			runner.stop(t)
		}
		_, err := pgadmin.MovePartition(ctx, pgadmin.PartitionMove{
			Partition: "p", Source: dbs[from].pool, SourceSchema: dbs[from].cfg.Schema,
			Target: dbs[to].pool, TargetSchema: dbs[to].cfg.Schema, To: to, BatchSize: 25,
		})
		require.NoError(t, err, "moving p from %s to %s", from, to)
		from = to
		if i == c.restartAt {
			runner = startAcross(ctx, t, r, st, fmt.Sprintf("runner-%d", i+2), progress)
		}
		// Writers go on on the new member, and the projection follows:
		// it applies every event stored when the move ended and more.
		moved := len(partitionEvents(t, ctx, r, "p"))
		dp.waitAcked(t, ctx, dp.total.Load()+30)
		waitApplied("p", moved+10)
		member, err := r.MemberOf("p")
		require.NoError(t, err)
		require.Equal(t, to, member, "the router follows the move")
	}
	close(stop)
	wgp.Wait()
	wgq.Wait()
	close(dp.failures)
	close(dq.failures)
	for err := range dp.failures {
		require.NoError(t, err)
	}
	for err := range dq.failures {
		require.NoError(t, err)
	}

	for _, p := range []string{"p", "q"} {
		events := partitionEvents(t, ctx, r, p)
		acked := dp.total.Load()
		if p == "q" {
			acked = dq.total.Load()
		}
		require.Len(t, events, int(acked), "every acknowledged deposit of %s is stored once", p)
		waitApplied(p, len(events))
		require.Equal(t, len(events), applied(p), "the projection applied each record of %s once", p)
		ids := make([]string, len(events))
		for i, rec := range events {
			ids[i] = rec.ID.String()
		}
		got, err := seenRows.GetMany(ctx, reader, ids)
		require.NoError(t, err)
		for i, rec := range events {
			s, ok := got[rec.ID.String()]
			require.True(t, ok, "record %d of %s (%s) was never applied", i+1, p, rec.ID)
			require.Equal(t, seen{Partition: p, N: i + 1}, s, "record %d of %s was applied in another place: out of the partition's order", i+1, p)
		}
	}
	runner.stop(t)
}

// TestProjectionAcrossDatabases: one projection, its checkpoints and read
// model in one store, reads partition "p" (which moves between members
// while writers append to it) and "q" (on another member, not moving), and
// applies every event of each exactly once in the partition's order: live
// through the moves (memory store), and resuming after a move with the
// runner stopped across it (Postgres store, in member one's database).
// Positions change with each move; the checkpoints follow by event ID.
func TestProjectionAcrossDatabases(t *testing.T) {
	cases := map[string]acrossCase{
		"there and back": {members: []string{"one", "two"}, moves: []string{"two", "one"}, restartAt: -1},
		"through three":  {members: []string{"one", "two", "three"}, moves: []string{"two", "three"}, restartAt: -1},
	}
	for name, c := range cases {
		t.Run(name+"/memory store", func(t *testing.T) {
			t.Parallel()
			runAcross(t, c, func(map[string]*database) projection.RowStore[projection.NoTx] { return projection.NewMemoryStore() })
		})
		restarted := c
		restarted.restartAt = 1
		t.Run(name+"/postgres store, restarted across a move", func(t *testing.T) {
			t.Parallel()
			runAcross(t, restarted, func(dbs map[string]*database) projection.RowStore[pgx.Tx] {
				st, err := postgres.NewProjectionStore(dbs["one"].pool, dbs["one"].cfg)
				require.NoError(t, err)
				return st
			})
		})
	}
}

// TestFollowPartitionAcrossMoves: a live subscription to one partition
// (Router.FollowPartition) while writers append to it and it moves from
// member to member yields every event of the partition once, in the
// partition's order, and tells each member it reads from.
func TestFollowPartitionAcrossMoves(t *testing.T) {
	cases := map[string][]string{"there and back": {"two", "one"}, "through three": {"two", "three"}}
	for name, moves := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			url := pgtest.URL(t)
			dbs := map[string]*database{}
			var members []partitioned.Member
			for _, m := range []string{"one", "two", "three"} {
				dbs[m] = openDatabase(t, url)
				members = append(members, dbs[m].member(m))
			}
			r, err := partitioned.New(partitioned.Config{Members: members, Partitions: map[string]string{"p": "one"}, Default: "one"})
			require.NoError(t, err)
			rt, _ := accountRuntime(t, ctx, r, snapshotsOf(t, r, dbs), "writer")
			defer func() { require.NoError(t, rt.Shutdown(context.WithoutCancel(ctx))) }()
			stop := make(chan struct{})
			d, wg := startDepositors(ctx, rt, "p", 6, 3, stop)

			type got struct {
				rec    journal.Record
				member string
				err    error
			}
			feed := make(chan got, 1024)
			sctx, scancel := context.WithCancel(ctx)
			defer scancel()
			go func() {
				member := ""
				located := func(m string, _ journal.Position) { member = m }
				for rec, err := range r.FollowPartition(sctx, journal.Query{Partition: "p", All: true}, "", journal.Position{}, [16]byte{}, located) {
					select {
					case feed <- got{rec, member, err}:
					case <-sctx.Done():
						return
					}
					if err != nil {
						return
					}
				}
			}()
			var ids []string
			var readFrom []string
			// receive waits until n records were received.
			receive := func(n int) {
				t.Helper()
				for len(ids) < n {
					select {
					case g := <-feed:
						require.NoError(t, g.err)
						ids = append(ids, g.rec.ID.String())
						if len(readFrom) == 0 || readFrom[len(readFrom)-1] != g.member {
							readFrom = append(readFrom, g.member)
						}
					case <-ctx.Done():
						t.Fatalf("waiting for %d records (have %d): %v", n, len(ids), ctx.Err())
					}
				}
			}
			d.waitAcked(t, ctx, 30)
			receive(20)
			from := "one"
			for _, to := range moves {
				_, err := pgadmin.MovePartition(ctx, pgadmin.PartitionMove{
					Partition: "p", Source: dbs[from].pool, SourceSchema: dbs[from].cfg.Schema,
					Target: dbs[to].pool, TargetSchema: dbs[to].cfg.Schema, To: to, BatchSize: 25,
				})
				require.NoError(t, err, "moving p from %s to %s", from, to)
				from = to
				moved := len(partitionEvents(t, ctx, r, "p"))
				d.waitAcked(t, ctx, d.total.Load()+30)
				receive(moved + 10)
			}
			close(stop)
			wg.Wait()
			close(d.failures)
			for err := range d.failures {
				require.NoError(t, err)
			}
			events := partitionEvents(t, ctx, r, "p")
			require.Len(t, events, int(d.total.Load()))
			receive(len(events))
			want := make([]string, len(events))
			for i, rec := range events {
				want[i] = rec.ID.String()
			}
			require.Equal(t, want, ids, "every event once, in the partition's order")
			require.Equal(t, append([]string{"one"}, moves...), readFrom, "read from each member in turn")
			select {
			case g := <-feed:
				t.Fatalf("a record after the last: %v %v", g.rec.ID, g.err)
			default:
			}
		})
	}
}

// TestSubscriptionEndsWhenItsPartitionMovedAwayAndBack: a Postgres
// subscription to one partition that read everything, then sat still while
// the partition moved to another database and back (its events are here
// again at new positions), ends with journal.ErrPartitionMoved instead of
// yielding the copies again; one whose partition moved away for good ends
// with it once it has read what was here.
func TestSubscriptionEndsWhenItsPartitionMovedAwayAndBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := pgtest.URL(t)
	one, two := openDatabase(t, url), openDatabase(t, url)
	r, err := partitioned.New(partitioned.Config{Members: []partitioned.Member{one.member("one"), two.member("two")}, Partitions: map[string]string{"p": "one"}, Default: "one"})
	require.NoError(t, err)
	const n = 5
	for range n {
		_, err := r.Append(ctx, []journal.Event{event("p", "Deposited", "account:1")}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	move := func(from, to *database, name string) {
		t.Helper()
		_, err := pgadmin.MovePartition(ctx, pgadmin.PartitionMove{Partition: "p", Source: from.pool, SourceSchema: from.cfg.Schema,
			Target: to.pool, TargetSchema: to.cfg.Schema, To: name})
		require.NoError(t, err)
	}

	next, stop := iter.Pull2(one.journal.Subscribe(ctx, journal.Query{Partition: "p", All: true}, journal.Position{}))
	defer stop()
	for i := range n {
		_, err, ok := next()
		require.True(t, ok)
		require.NoError(t, err, "record %d", i+1)
	}
	move(one, two, "two")
	move(two, one, "one")
	_, err = r.Append(ctx, []journal.Event{event("p", "Deposited", "account:1")}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err, ok := next()
	require.True(t, ok)
	require.ErrorIs(t, err, journal.ErrPartitionMoved, "the copies are not yielded again")

	// Moved away for good: the subscription on the source ends.
	move(one, two, "two")
	next2, stop2 := iter.Pull2(one.journal.Subscribe(ctx, journal.Query{Partition: "p", All: true}, journal.Position{}))
	defer stop2()
	_, err, ok = next2()
	require.True(t, ok)
	var pm *journal.PartitionMoveError
	require.ErrorAs(t, err, &pm)
	require.True(t, pm.Moved)
	require.Equal(t, "two", pm.To)
}
