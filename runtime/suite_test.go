package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// runDoneWhen runs the done-when tests of the runtime against the journal
// that newEnv creates (a fresh one per subtest).
func runDoneWhen(t *testing.T, newEnv func(t *testing.T) *env) {
	t.Run("Counter64x1000", func(t *testing.T) { t.Parallel(); testCounter64x1000(t, newEnv(t)) })
	t.Run("RestartWithoutSnapshots", func(t *testing.T) { t.Parallel(); testRestartWithoutSnapshots(t, newEnv(t)) })
	t.Run("RestartWithSnapshots", func(t *testing.T) { t.Parallel(); testRestartWithSnapshots(t, newEnv(t)) })
	t.Run("RaceForOneStream", func(t *testing.T) { t.Parallel(); testRaceForOneStream(t, newEnv(t)) })
	t.Run("LoserWaitsThenServes", func(t *testing.T) { t.Parallel(); testLoserWaitsThenServes(t, newEnv(t)) })
	t.Run("ForcedLeaseExpiry", func(t *testing.T) { t.Parallel(); testForcedLeaseExpiry(t, newEnv(t)) })
	t.Run("CrashTakeoverSameNodeID", func(t *testing.T) { t.Parallel(); testCrashTakeoverSameNodeID(t, newEnv(t)) })
	t.Run("CrashTakeoverOtherNodeIDWaits", func(t *testing.T) { t.Parallel(); testCrashTakeoverOtherNodeWaits(t, newEnv(t)) })
	t.Run("IdempotencyAcrossRestart", func(t *testing.T) { t.Parallel(); testIdempotencyAcrossRestart(t, newEnv(t)) })
	t.Run("Panic", func(t *testing.T) { t.Parallel(); testPanic(t, newEnv(t)) })
	t.Run("ContextBeforeDecision", func(t *testing.T) { t.Parallel(); testContextBeforeDecision(t, newEnv(t)) })
	t.Run("LeaseFreeState", func(t *testing.T) { t.Parallel(); testLeaseFreeState(t, newEnv(t)) })
}

func TestMemory(t *testing.T) {
	t.Parallel()
	runDoneWhen(t, func(*testing.T) *env { return memoryEnv() })
}

// metricReader returns a MeterProvider option and a function collecting its metrics.
func metricReader(t testing.TB) (*sdkmetric.MeterProvider, func() metricdata.ResourceMetrics) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, func() metricdata.ResourceMetrics {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		return rm
	}
}

func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// sumOf returns the total of an int64 counter (all attribute sets).
func sumOf(t testing.TB, rm metricdata.ResourceMetrics, name string) int64 {
	t.Helper()
	m, ok := findMetric(rm, name)
	if !ok {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is not an int64 sum", name)
	var n int64
	for _, dp := range sum.DataPoints {
		n += dp.Value
	}
	return n
}

func testCounter64x1000(t *testing.T, e *env) {
	mp, collect := metricReader(t)
	rt := e.start(t, func(c *runtime.Config) { c.MeterProvider = mp })
	target := counter("hot")
	const callers, each = 64, 1000
	hammer(t, rt, target, callers, each) // every Execute must succeed at its first attempt
	res := mustExec(t, rt, target, Get{})
	require.Equal(t, callers*each, res.State.Count)
	require.Equal(t, uint64(callers*each), res.Version)
	requireGapFree(t, e.j, target.Stream(), callers*each)

	rm := collect()
	m, ok := findMetric(rm, otelx.MetricBatchSize)
	require.True(t, ok)
	h := m.Data.(metricdata.Histogram[int64])
	var count uint64
	var sum int64
	for _, dp := range h.DataPoints {
		count += dp.Count
		sum += dp.Sum
	}
	require.Equal(t, int64(callers*each), sum, "every command is in exactly one append")
	mean := float64(sum) / float64(count)
	// How many commands share an append depends on the machine's timing;
	// that group commit takes the whole queue is asserted deterministically
	// by GroupCommitTakesTheQueue (faults_test.go).
	t.Logf("%d commands in %d appends: mean batch size %.1f", sum, count, mean)
	require.Equal(t, int64(callers*each+1), sumOf(t, rm, otelx.MetricCommands))
}

func testRestartWithoutSnapshots(t *testing.T, e *env) {
	e.snaps = nil
	target := counter("restart-plain")
	rt1 := e.start(t)
	for i := range 150 {
		mustExec(t, rt1, target, Increment{By: i})
	}
	want := mustExec(t, rt1, target, Get{}).State
	require.NoError(t, rt1.Shutdown(context.Background()))

	rt2 := e.start(t)
	got := mustExec(t, rt2, target, Get{})
	require.Equal(t, want, got.State)
	require.Equal(t, uint64(150), got.Version)
}

func testRestartWithSnapshots(t *testing.T, e *env) {
	ctx := context.Background()
	target := counter("restart-snap")
	stream := target.Stream()
	rt1 := e.start(t)
	for range 250 {
		mustExec(t, rt1, target, Increment{By: 2})
	}
	want := mustExec(t, rt1, target, Get{}).State
	require.Equal(t, CounterState{Count: 500, Events: 250}, want)
	require.NoError(t, rt1.Shutdown(ctx))
	infos, err := e.snaps.List(ctx, stream)
	require.NoError(t, err)
	require.Len(t, infos, 3, "snapshots at 100 and 200 by policy, 250 on passivation")
	require.Equal(t, uint64(250), infos[2].Version)

	// Identical state after restart.
	rt2 := e.start(t, func(c *runtime.Config) { c.NodeID = "node-2" })
	got := mustExec(t, rt2, target, Get{})
	require.Equal(t, want, got.State)
	require.Equal(t, uint64(250), got.Version)
	require.NoError(t, rt2.Shutdown(ctx))

	// The snapshot is really used: mark the newest one and see the mark.
	snapshotAt(t, e, stream, 250, 1, CounterState{Count: 500, Events: 9999})
	rt3 := e.start(t, func(c *runtime.Config) { c.NodeID = "node-3" })
	got = mustExec(t, rt3, target, Increment{By: 1})
	require.Equal(t, CounterState{Count: 501, Events: 10000}, got.State)
	require.NoError(t, rt3.Shutdown(ctx))

	// A runtime whose state schema is 2 ignores the schema-1 snapshots and
	// replays every event.
	rt4 := e.startSchema(t, 2, func(c *runtime.Config) { c.NodeID = "node-4"; c.SnapshotPolicy = &snapshots.Policy{} })
	got = mustExec(t, rt4, target, Get{})
	require.Equal(t, CounterState{Count: 501, Events: 251}, got.State, "replayed from the journal")
	require.NoError(t, rt4.Shutdown(ctx))

	// With an older schema-2 snapshot it starts from that one and replays the tail.
	snapshotAt(t, e, stream, 100, 2, CounterState{Count: 200, Events: 7777})
	rt5 := e.startSchema(t, 2, func(c *runtime.Config) { c.NodeID = "node-5"; c.SnapshotPolicy = &snapshots.Policy{} })
	got = mustExec(t, rt5, target, Get{})
	require.Equal(t, CounterState{Count: 501, Events: 7777 + 151}, got.State, "schema-2 snapshot at 100 plus 151 replayed events")
}

func snapshotAt(t *testing.T, e *env, stream journal.StreamID, version uint64, schema int, s CounterState) CounterState {
	t.Helper()
	data, err := runtime.SnapshotState(nil, s)
	require.NoError(t, err)
	require.NoError(t, e.snaps.Save(context.Background(), snapshots.Snapshot{
		Stream: stream, Version: version, SchemaVersion: schema, State: data, CreatedAt: time.Now().UTC(),
	}))
	return s
}

func testRaceForOneStream(t *testing.T, e *env) {
	target := counter("raced")
	short := func(id string) func(*runtime.Config) {
		return func(c *runtime.Config) {
			c.NodeID = id
			c.OpenTimeout = 300 * time.Millisecond
			c.IdleTimeout = 30 * time.Millisecond
		}
	}
	a, b := e.start(t, short("race-a")), e.start(t, short("race-b"))
	var ok, timeouts atomic.Int64
	var wg sync.WaitGroup
	for _, rt := range []*runtime.Runtime{a, b} {
		for range 8 {
			wg.Go(func() {
				for range 40 {
					_, err := rt.Execute(context.Background(), target, Increment{By: 1})
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, journal.ErrOpenTimeout):
						timeouts.Add(1)
					default:
						t.Errorf("unexpected error: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d executed, %d open timeouts", ok.Load(), timeouts.Load())
	require.Positive(t, ok.Load())
	// Whoever served, every acknowledged command is in the journal exactly
	// once and the versions have no gap: the two runtimes never both appended.
	sum, err := e.j.TagSummary(context.Background(), target.Stream())
	require.NoError(t, err)
	require.Equal(t, uint64(ok.Load()), sum.Version)
	requireGapFree(t, e.j, target.Stream(), sum.Version)
}

func testLoserWaitsThenServes(t *testing.T, e *env) {
	target := counter("contended")
	a := e.start(t, func(c *runtime.Config) { c.NodeID = "holder" })
	b := e.start(t, func(c *runtime.Config) { c.NodeID = "loser"; c.OpenTimeout = 200 * time.Millisecond })
	mustExec(t, a, target, Increment{By: 1})
	_, err := b.Execute(context.Background(), target, Increment{By: 1})
	require.ErrorIs(t, err, journal.ErrOpenTimeout)

	// The loser waits (up to its open timeout) while the holder lets go.
	b2 := e.start(t, func(c *runtime.Config) { c.NodeID = "patient"; c.OpenTimeout = 10 * time.Second })
	done := make(chan runtime.Result[CounterState], 1)
	go func() { done <- mustExec(t, b2, target, Increment{By: 10}) }()
	require.NoError(t, a.Shutdown(context.Background())) // releases the lease
	got := <-done
	require.Equal(t, 11, got.State.Count)
	require.Equal(t, uint64(2), got.Version)
}

func testForcedLeaseExpiry(t *testing.T, e *env) {
	target := counter("expiring")
	mp, collect := metricReader(t)
	wrap := e.crashable()
	stale := e.start(t, wrap.on, func(c *runtime.Config) {
		c.NodeID = "stale"
		c.SessionTimeout = time.Second
		c.MeterProvider = mp
	})
	mustExec(t, stale, target, Increment{By: 1})
	wrap.frozen.Store(true) // its renewals stop reaching the store: the session expires

	fresh := e.start(t, func(c *runtime.Config) { c.NodeID = "fresh"; c.OpenTimeout = 10 * time.Second })
	got := mustExec(t, fresh, target, Increment{By: 10}) // waits for the stale session to expire
	require.Equal(t, 11, got.State.Count)

	// The stale actor still holds the stream's old state, but its node
	// session was not confirmed for longer than the session timeout: it
	// decides nothing (ErrLeaseLost), so nothing reaches the store to fence.
	_, err := stale.Execute(context.Background(), target, Increment{By: 100})
	require.ErrorIs(t, err, runtime.ErrLeaseLost)
	// Once its renewals reach the store again, it learns that its session
	// expired: every actor stops (a fence rejection) and it opens a new one.
	wrap.frozen.Store(false)
	require.Eventually(t, func() bool { return stale.ActiveStreams() == 0 && stale.Ready() == nil }, 5*time.Second, 5*time.Millisecond)
	require.GreaterOrEqual(t, sumOf(t, collect(), otelx.MetricFenceRejections), int64(1))

	sum, err := e.j.TagSummary(context.Background(), target.Stream())
	require.NoError(t, err)
	require.Equal(t, uint64(2), sum.Version)
	require.Equal(t, 12, mustExec(t, fresh, target, Increment{By: 1}).State.Count)
}

func testCrashTakeoverSameNodeID(t *testing.T, e *env) {
	wrap := e.crashable()
	crashed := e.start(t, wrap.on, func(c *runtime.Config) { c.NodeID = "phoenix"; c.SessionTimeout = 30 * time.Second })
	targets := []runtime.Target{counter("c1"), counter("c2"), counter("c3")}
	for i, tg := range targets {
		mustExec(t, crashed, tg, Increment{By: i + 1})
	}
	wrap.crashed.Store(true) // the process is gone; its leases are still live for 30 s

	start := time.Now()
	restarted := e.start(t, func(c *runtime.Config) { c.NodeID = "phoenix" })
	for i, tg := range targets {
		got := mustExec(t, restarted, tg, Increment{By: 10})
		require.Equal(t, i+11, got.State.Count)
	}
	elapsed := time.Since(start)
	t.Logf("same node ID served %d streams %s after the crash", len(targets), elapsed)
	require.Less(t, elapsed, time.Second)
}

func testCrashTakeoverOtherNodeWaits(t *testing.T, e *env) {
	wrap := e.crashable()
	const timeout = 2 * time.Second
	crashed := e.start(t, wrap.on, func(c *runtime.Config) { c.NodeID = "mortal"; c.SessionTimeout = timeout })
	target := counter("orphan")
	mustExec(t, crashed, target, Increment{By: 5})
	wrap.crashed.Store(true)
	start := time.Now()

	impatient := e.start(t, func(c *runtime.Config) { c.NodeID = "impatient"; c.OpenTimeout = 300 * time.Millisecond })
	_, err := impatient.Execute(context.Background(), target, Increment{By: 1})
	require.ErrorIs(t, err, journal.ErrOpenTimeout, "the crashed node's lease is live until its session expires")

	other := e.start(t, func(c *runtime.Config) { c.NodeID = "other"; c.OpenTimeout = 10 * time.Second })
	got := mustExec(t, other, target, Increment{By: 1})
	elapsed := time.Since(start)
	t.Logf("another node ID served %s after the crash (session timeout %s)", elapsed, timeout)
	require.Equal(t, 6, got.State.Count)
	require.Greater(t, elapsed, timeout/2, "another node waits for the session to expire")
}

func testIdempotencyAcrossRestart(t *testing.T, e *env) {
	ctx := context.Background()
	target := counter("idem")
	rt1 := e.start(t)
	first := mustExec(t, rt1, target, Increment{By: 7}, runtime.WithIdempotencyKey("pay-1"))
	require.False(t, first.Duplicate)
	again := mustExec(t, rt1, target, Increment{By: 7}, runtime.WithIdempotencyKey("pay-1"))
	require.True(t, again.Duplicate)
	require.Equal(t, first.Records[0].ID, again.Records[0].ID)
	require.NoError(t, rt1.Shutdown(ctx))

	// Push the key out of the replayed tail: a snapshot at 100, then 121 on passivation.
	rt2 := e.start(t, func(c *runtime.Config) { c.NodeID = "idem-late" })
	for range 120 {
		mustExec(t, rt2, target, Increment{By: 1})
	}
	require.NoError(t, rt2.Shutdown(ctx))
	rt3 := e.start(t, func(c *runtime.Config) { c.NodeID = "idem-3" })
	dup := mustExec(t, rt3, target, Increment{By: 7}, runtime.WithIdempotencyKey("pay-1"))
	require.True(t, dup.Duplicate)
	require.Equal(t, first.Records, dup.Records)
	require.Equal(t, 7, dup.State.Count, "a duplicate returns the state right after the first execution")
	require.Equal(t, uint64(1), dup.Version, "and its version")
	sum, err := e.j.TagSummary(ctx, target.Stream())
	require.NoError(t, err)
	require.Equal(t, uint64(121), sum.Version)
}

func testPanic(t *testing.T, e *env) {
	rt := e.start(t)
	target := counter("boom")
	mustExec(t, rt, target, Increment{By: 3})
	_, err := rt.Execute(context.Background(), target, Explode{})
	require.ErrorIs(t, err, runtime.ErrPanic)
	var pe *runtime.PanicError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, err.Error(), "counter exploded")
	require.Equal(t, 4, mustExec(t, rt, target, Increment{By: 1}).State.Count)
	// Domain errors come back as is.
	_, err = rt.Execute(context.Background(), target, Increment{By: -1})
	require.ErrorIs(t, err, errNegative)
}

func testContextBeforeDecision(t *testing.T, e *env) {
	rt := e.start(t)
	target := counter("ctx")
	release := make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		_, err := rt.Execute(context.Background(), target, Block{Release: release})
		blocked <- err
	}()
	// The blocking command holds the actor's turn; the next one queues.
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	require.Eventually(t, func() bool { return rt.ActiveStreams() == 1 }, 5*time.Second, time.Millisecond)
	go func() {
		_, err := rt.Execute(ctx, target, Increment{By: 100})
		waiting <- err
	}()
	require.Eventually(t, func() bool { return rt.Pending(target) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-waiting, context.Canceled)
	close(release)
	require.NoError(t, <-blocked)
	got := mustExec(t, rt, target, Increment{By: 1})
	require.Equal(t, 1, got.State.Count, "the cancelled command was never executed")
	require.Equal(t, uint64(1), got.Version)
}
