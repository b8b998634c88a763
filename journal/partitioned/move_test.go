package partitioned_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/runtime"
)

// depositor drives deposits of 1 into the accounts of one partition from
// several goroutines until stop, retrying each retryable failure with the
// same idempotency key, and counts what was acknowledged.
type depositor struct {
	acked    []atomic.Int64 // per account
	total    atomic.Int64
	retries  atomic.Int64
	tick     chan struct{} // signalled (without blocking) on every ack
	failures chan error
}

func startDepositors(ctx context.Context, rt *runtime.Runtime, partition string, accounts, workers int, stop <-chan struct{}) (*depositor, *sync.WaitGroup) {
	d := &depositor{acked: make([]atomic.Int64, accounts), tick: make(chan struct{}, 1), failures: make(chan error, workers)}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := (w + i) % accounts
				key := fmt.Sprintf("w%d-op%d", w, i)
				target := runtime.Target{Partition: partition, Aggregate: "account", ID: fmt.Sprint(a)}
				for {
					_, err := rt.Execute(ctx, target, deposit{Amount: 1}, runtime.WithIdempotencyKey(key))
					if err == nil {
						break
					}
					if !runtime.IsRetryable(err) {
						d.failures <- fmt.Errorf("%s %s: %w", target, key, err)
						return
					}
					d.retries.Add(1)
					if ctx.Err() != nil {
						d.failures <- ctx.Err()
						return
					}
				}
				d.acked[a].Add(1)
				d.total.Add(1)
				select {
				case d.tick <- struct{}{}:
				default:
				}
			}
		}()
	}
	return d, &wg
}

// waitAcked waits until at least n deposits were acknowledged.
func (d *depositor) waitAcked(t *testing.T, ctx context.Context, n int64) {
	t.Helper()
	for d.total.Load() < n {
		select {
		case <-d.tick:
		case err := <-d.failures:
			t.Fatalf("a deposit failed: %v", err)
		case <-ctx.Done():
			t.Fatalf("waiting for %d acknowledged deposits (have %d): %v", n, d.total.Load(), ctx.Err())
		}
	}
}

// TestPartitionMoveUnderLoad moves partition "p" from the shared server to a
// throwaway one while deposits run against it: the router sends the
// partition's commands to the first server, the move fences it, copies,
// verifies and switches, and the router finds the partition's new member by
// itself (the source names it). Commands meanwhile get retryable errors and
// are retried with their idempotency keys; afterwards every acknowledged
// deposit is on the target exactly once, the source holds nothing of the
// partition, every chain verifies and a fresh runtime folds the balances.
func TestPartitionMoveUnderLoad(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	one, two, r := twoDatabases(t, map[string]string{"p": "one"})
	rt, _ := accountRuntime(t, ctx, r, snapshotsOf(t, r, map[string]*database{"one": one, "two": two}), "load-node")

	const accounts, workers = 8, 6
	stop := make(chan struct{})
	d, wg := startDepositors(ctx, rt, "p", accounts, workers, stop)
	d.waitAcked(t, ctx, 60)

	var steps []string
	var fenced, switched time.Time
	start := time.Now()
	rep, err := pgadmin.MovePartition(ctx, pgadmin.PartitionMove{
		Partition: "p", Source: one.pool, SourceSchema: one.cfg.Schema, Target: two.pool, TargetSchema: two.cfg.Schema,
		To: "two", BatchSize: 50,
		Progress: func(p pgadmin.MoveProgress) {
			steps = append(steps, fmt.Sprintf("%s %d/%d", p.Step, p.Copied, p.Total))
			switch p.Step {
			case pgadmin.MoveFence:
				fenced = time.Now()
			case pgadmin.MoveSwitch:
				switched = time.Now()
			}
		},
	})
	require.NoError(t, err)
	t.Logf("moved %d events, %d streams, %d snapshots in %s; fenced after %s, cut-over (fence to switch) %s; steps: %v",
		rep.Events, rep.Streams, rep.Snapshots, time.Since(start), fenced.Sub(start), switched.Sub(fenced), steps)
	movedAt := d.total.Load()
	d.waitAcked(t, ctx, movedAt+60) // the load goes on, on the target
	close(stop)
	wg.Wait()
	close(d.failures)
	for err := range d.failures {
		require.NoError(t, err)
	}
	t.Logf("%d deposits acknowledged (%d before the move ended), %d retries", d.total.Load(), movedAt, d.retries.Load())
	require.NoError(t, rt.Shutdown(ctx))

	member, err := r.MemberOf("p")
	require.NoError(t, err)
	require.Equal(t, "two", member, "the router learned the move from the source")
	total := int(d.total.Load())
	require.Equal(t, total, two.count(t, `SELECT count(*) FROM %s.events WHERE partition = 'p'`), "every acknowledged deposit is on the target exactly once")
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.events WHERE partition = 'p'`), "the source's copy is retired")
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.streams WHERE partition = 'p'`))
	require.Equal(t, 1, one.count(t, `SELECT count(*) FROM %s.partition_fences WHERE partition = 'p' AND state = 'moved' AND moved_to = 'two'`))
	require.Zero(t, two.count(t, `SELECT count(*) FROM %s.partition_fences`), "the target serves the partition")
	for a := range accounts {
		n, err := journal.VerifyStream(ctx, two.journal, journal.StreamID{Partition: "p", Tag: journal.NewTag("account", fmt.Sprint(a))})
		require.NoError(t, err)
		require.EqualValues(t, d.acked[a].Load(), n)
	}

	// Nodes configured before the move (p on "one") find the partition on
	// "two" by themselves, whichever call reaches the old member first.
	newStale := func() *partitioned.Router {
		s, err := partitioned.New(partitioned.Config{
			Members:    []partitioned.Member{one.member("one"), two.member("two")},
			Partitions: map[string]string{"p": "one"},
		})
		require.NoError(t, err)
		return s
	}
	byRead, n := newStale(), 0
	for _, err := range byRead.Read(ctx, journal.Query{Partition: "p", All: true}, journal.ReadOptions{}) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, total, n, "a DCB read follows the move")
	byGroup := newStale()
	tags, err := byGroup.TagsOfGroup(ctx, "p", "account")
	require.NoError(t, err)
	require.Len(t, tags, accounts, "a group listing follows the move")
	byStream := newStale()
	for _, err := range byStream.ReadStream(ctx, journal.StreamID{Partition: "p", Tag: "account:0"}, 1, 0) {
		require.NoError(t, err)
	}
	for _, s := range []*partitioned.Router{byRead, byGroup, byStream} {
		m, err := s.MemberOf("p")
		require.NoError(t, err)
		require.Equal(t, "two", m)
	}
	// And a runtime on such a node folds every acknowledged deposit.
	stale, err := partitioned.New(partitioned.Config{
		Members:    []partitioned.Member{one.member("one"), two.member("two")},
		Partitions: map[string]string{"p": "one"},
		Default:    "one",
	})
	require.NoError(t, err)
	rt2, _ := accountRuntime(t, ctx, stale, snapshotsOf(t, stale, map[string]*database{"one": one, "two": two}), "late-node")
	for a := range accounts {
		res, err := runtime.ExecuteTyped[balance](ctx, rt2, runtime.Target{Partition: "p", Aggregate: "account", ID: fmt.Sprint(a)}, deposit{Amount: 0})
		require.NoError(t, err)
		require.EqualValues(t, d.acked[a].Load(), res.State.Total, "account %d", a)
	}
	// Its snapshots follow the partition too: the passivation snapshots
	// (Shutdown) land in "two" at each stream's version, none in "one".
	require.NoError(t, rt2.Shutdown(ctx))
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.snapshots WHERE partition = 'p'`))
	for a := range accounts {
		stream := journal.StreamID{Partition: "p", Tag: journal.NewTag("account", fmt.Sprint(a))}
		n, err := journal.VerifyStream(ctx, two.journal, stream)
		require.NoError(t, err)
		snap, err := two.snaps.Load(ctx, stream, math.MaxUint64)
		require.NoError(t, err, "account %d", a)
		require.Equal(t, n, snap.Version, "account %d", a)
	}
}

// TestPartitionMoveResumesAfterInterruption stops a move in the middle of its
// copy (the context is cancelled after the second batch, as a crash would
// stop it) and runs it again: it resumes from the recorded progress and
// every event is on the target exactly once. While it is stopped in the
// pre-copy, the source still serves the partition and the target refuses it.
// Once finished, running it again is refused: there is nothing to resume.
func TestPartitionMoveResumesAfterInterruption(t *testing.T) {
	ctx := context.Background()
	one, two, r := twoDatabases(t, map[string]string{"q": "one"})
	rt, move := accountRuntime(t, ctx, r, snapshotsOf(t, r, map[string]*database{"one": one, "two": two}), "resume-node")
	for i := range 40 {
		_, err := rt.Execute(ctx, runtime.Target{Partition: "q", Aggregate: "account", ID: fmt.Sprint(i % 5)}, deposit{Amount: 10})
		require.NoError(t, err)
	}
	_, err := move.Execute(ctx, moveFunds{Partition: "q", From: "0", To: "1", Amount: 5})
	require.NoError(t, err)
	require.NoError(t, rt.Shutdown(ctx))

	cctx, cancel := context.WithCancel(ctx)
	batches := 0
	spec := pgadmin.PartitionMove{Partition: "q", Source: one.pool, SourceSchema: one.cfg.Schema, Target: two.pool, TargetSchema: two.cfg.Schema,
		To: "two", BatchSize: 7}
	first := spec
	first.Progress = func(p pgadmin.MoveProgress) {
		if p.Step == pgadmin.MovePrecopy || p.Step == pgadmin.MoveCopy {
			if batches++; batches == 2 {
				cancel()
			}
		}
	}
	_, err = pgadmin.MovePartition(cctx, first)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 14, two.count(t, `SELECT copied FROM %s.partition_moves WHERE partition = 'q'`))
	require.Equal(t, "precopy", two.text(t, `SELECT state FROM %s.partition_moves WHERE partition = 'q'`))
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.partition_fences WHERE partition = 'q'`), "the pre-copy does not fence the source")

	// Meanwhile the source serves the partition and the target refuses it,
	// retryably.
	node, err := one.journal.OpenNode(ctx, "probe", time.Minute)
	require.NoError(t, err)
	l, err := one.journal.Acquire(ctx, node, journal.StreamID{Partition: "q", Tag: "account:0"}, 0)
	require.NoError(t, err)
	require.NoError(t, one.journal.Release(ctx, l))
	require.NoError(t, one.journal.CloseNode(ctx, node))
	node, err = two.journal.OpenNode(ctx, "probe", time.Minute)
	require.NoError(t, err)
	_, err = two.journal.Acquire(ctx, node, journal.StreamID{Partition: "q", Tag: "account:0"}, 0)
	require.ErrorIs(t, err, journal.ErrPartitionMoving, "the target refuses the partition until the move ends")
	require.True(t, runtime.IsRetryable(err))
	require.NoError(t, two.journal.CloseNode(ctx, node))

	rep, err := pgadmin.MovePartition(ctx, spec)
	require.NoError(t, err)
	require.True(t, rep.Resumed)
	require.EqualValues(t, 41, rep.Events)
	require.Equal(t, 41, two.count(t, `SELECT count(*) FROM %s.events WHERE partition = 'q'`))
	require.Equal(t, 41, two.count(t, `SELECT count(DISTINCT id) FROM %s.events WHERE partition = 'q'`))
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.events WHERE partition = 'q'`))

	// Running it once more is refused: the move is finished, and the
	// source names where the partition went; nothing is written.
	_, err = pgadmin.MovePartition(ctx, spec)
	require.ErrorIs(t, err, pgadmin.ErrMoveRefused)
	require.Contains(t, err.Error(), `partition "q" was moved away from the source to two`)
	require.Contains(t, err.Error(), "nothing was written on either database")
	var me *pgadmin.MoveError
	require.True(t, errors.As(err, &me))
	require.False(t, me.Rerun)
	require.Zero(t, two.count(t, `SELECT count(*) FROM %s.partition_moves`))
	node, err = one.journal.OpenNode(ctx, "probe", time.Minute)
	require.NoError(t, err)
	_, err = one.journal.Acquire(ctx, node, journal.StreamID{Partition: "q", Tag: "account:0"}, 0)
	var moved *journal.PartitionMoveError
	require.True(t, errors.As(err, &moved), "%v", err)
	require.True(t, moved.Moved)
	require.Equal(t, "two", moved.To)
	require.NoError(t, one.journal.CloseNode(ctx, node))
}

// TestPartitionMoveCarriesAnUnfencedAppend appends to the moving partition
// without a lease (bypassing the runtime, which the fence cannot stop)
// after the copy was verified: the switch recounts the source under the
// partition's lock, finds the extra event and sends the move back to copy
// it, instead of retiring a source that holds an event the target lacks;
// the move ends with every event on the target, none on the source.
func TestPartitionMoveCarriesAnUnfencedAppend(t *testing.T) {
	ctx := context.Background()
	one := openDatabase(t, pgtest.URL(t))
	two := openDatabase(t, secondServer(t))
	for i := range 5 {
		_, err := one.journal.Append(ctx, []journal.Event{event("u", "Deposited", journal.NewTag("account", fmt.Sprint(i)))}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	appended := false
	rep, err := pgadmin.MovePartition(ctx, pgadmin.PartitionMove{
		Partition: "u", Source: one.pool, SourceSchema: one.cfg.Schema, Target: two.pool, TargetSchema: two.cfg.Schema, To: "two",
		Progress: func(p pgadmin.MoveProgress) {
			if p.Step == pgadmin.MoveVerify && !appended {
				appended = true
				_, err := one.journal.Append(ctx, []journal.Event{event("u", "Deposited", "account:late")}, journal.AppendOptions{})
				require.NoError(t, err)
			}
		},
	})
	require.NoError(t, err)
	require.EqualValues(t, 6, rep.Events)
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.events WHERE partition = 'u'`))
	require.Equal(t, "moved", one.text(t, `SELECT state FROM %s.partition_fences WHERE partition = 'u'`))
	require.Equal(t, 6, two.count(t, `SELECT count(*) FROM %s.events WHERE partition = 'u'`))
	n, err := journal.VerifyStream(ctx, two.journal, journal.StreamID{Partition: "u", Tag: "account:late"})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}
