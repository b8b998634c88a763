package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// runFaults runs the tests of the single-writer promise at its edges: lease
// validity, twin node IDs, failure isolation in group commit and
// backpressure, against the journal newEnv creates.
func runFaults(t *testing.T, newEnv func(t *testing.T) *env) {
	t.Run("LapsedLeaseAnswersNothing", func(t *testing.T) { t.Parallel(); testLapsedLeaseAnswersNothing(t, newEnv(t)) })
	t.Run("PausedNodeNeverServesStaleState", func(t *testing.T) { t.Parallel(); testPausedNodeNeverServesStale(t, newEnv(t)) })
	t.Run("TwinNodeIDExactlyOneServes", func(t *testing.T) { t.Parallel(); testTwinNodeID(t, newEnv(t)) })
	t.Run("BadMetadataFailsAlone", func(t *testing.T) { t.Parallel(); testBadMetadataFailsAlone(t, newEnv(t)) })
	t.Run("BatchFailureIsolatesTheOffender", func(t *testing.T) { t.Parallel(); testBatchSplit(t, newEnv(t)) })
	t.Run("QueueBound", func(t *testing.T) { t.Parallel(); testQueueBound(t, newEnv(t)) })
	t.Run("PendingBound", func(t *testing.T) { t.Parallel(); testPendingBound(t, newEnv(t)) })
	t.Run("DeadlineTooNearIsNotDecided", func(t *testing.T) { t.Parallel(); testDeadlineShedding(t, newEnv(t)) })
	t.Run("GroupCommitTakesTheQueue", func(t *testing.T) { t.Parallel(); testGroupCommitTakesTheQueue(t, newEnv(t)) })
}

func TestMemoryFaults(t *testing.T) {
	t.Parallel()
	runFaults(t, func(*testing.T) *env { return memoryEnv() })
}

func TestPostgresFaults(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	runFaults(t, postgresEnv)
}

// testLapsedLeaseAnswersNothing: once the node session's last confirmation is
// older than the session timeout minus the margin, the runtime neither decides
// nor answers from its cache; when renewals reach the store again (and no one
// took the streams), it serves again with its state intact.
func testLapsedLeaseAnswersNothing(t *testing.T, e *env) {
	ctx := context.Background()
	target := counter("lapse")
	wrap := e.crashable()
	rt := e.start(t, wrap.on, func(c *runtime.Config) { c.NodeID = "lapsing"; c.SessionTimeout = time.Second })
	mustExec(t, rt, target, Increment{By: 3})
	require.NoError(t, rt.Ready())

	wrap.frozen.Store(true) // renewals stop reaching the store
	require.Eventually(t, func() bool { return rt.Ready() != nil }, 10*time.Second, 5*time.Millisecond)
	require.ErrorIs(t, rt.Ready(), runtime.ErrLeaseLost)

	for _, cmd := range []any{Get{}, Increment{By: 1}} {
		_, err := rt.Execute(ctx, target, cmd)
		require.ErrorIs(t, err, runtime.ErrLeaseLost, "%T", cmd)
		require.True(t, runtime.IsRetryable(err))
	}
	sum, err := e.j.TagSummary(ctx, target.Stream())
	require.NoError(t, err)
	require.Equal(t, uint64(1), sum.Version, "nothing was decided while the lease was lapsed")

	wrap.frozen.Store(false) // the store is back before the session expired there
	require.Eventually(t, func() bool { return rt.Ready() == nil }, 10*time.Second, 5*time.Millisecond)
	got := mustExec(t, rt, target, Increment{By: 1})
	require.Equal(t, 4, got.State.Count)
	require.Equal(t, uint64(2), got.Version)
}

// testPausedNodeNeverServesStale: a node whose session expired while another
// node took its stream over and wrote answers neither the old state nor a
// decision taken on it, but a retryable error, and after it re-validates it
// serves the current state or waits for the new owner, never the cache.
func testPausedNodeNeverServesStale(t *testing.T, e *env) {
	ctx := context.Background()
	target := counter("paused")
	wrap := e.crashable()
	paused := e.start(t, wrap.on, func(c *runtime.Config) { c.NodeID = "paused"; c.SessionTimeout = time.Second })
	require.Equal(t, 1, mustExec(t, paused, target, Increment{By: 1}).State.Count)

	wrap.frozen.Store(true) // as if SIGSTOPped: nothing reaches the store
	other := e.start(t, func(c *runtime.Config) { c.NodeID = "other"; c.OpenTimeout = 10 * time.Second })
	require.Equal(t, 11, mustExec(t, other, target, Increment{By: 10}).State.Count, "the other node took over after expiry")

	// "SIGCONT": the paused node's cache says Count 1; it must not say so.
	for _, cmd := range []any{Get{}, Increment{By: -1}, Increment{By: 100}} {
		res, err := runtime.ExecuteTyped[CounterState](ctx, paused, target, cmd)
		require.Error(t, err, "%T answered from a stale cache: %+v", cmd, res)
		require.True(t, runtime.IsRetryable(err), "%T: %v", cmd, err)
		require.NotErrorIs(t, err, errNegative, "no domain decision on stale state")
	}
	wrap.frozen.Store(false)
	// It re-validates: its old session expired, so it reopens; the stream
	// belongs to the other node now, so it waits, never serving old state.
	require.Eventually(t, func() bool { return paused.Ready() == nil }, 10*time.Second, 5*time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err := runtime.ExecuteTyped[CounterState](cctx, paused, target, Get{})
	if err == nil {
		require.Equal(t, 11, res.State.Count, "served the current state")
	} else {
		require.True(t, runtime.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded), "%v", err)
	}
	sum, err := e.j.TagSummary(ctx, target.Stream())
	require.NoError(t, err)
	require.Equal(t, uint64(2), sum.Version)
	requireGapFree(t, e.j, target.Stream(), 2)
}

// testTwinNodeID: two live runtimes opened with one NodeID. The newer one
// serves; the older stops serving for good (not ready, retryable errors) and
// never claims the node ID back, so the two do not flap.
func testTwinNodeID(t *testing.T, e *env) {
	ctx := context.Background()
	// Renewals every 667 ms: long enough that a loaded machine never lets a
	// live lease lapse (the newer must serve every command), short enough to
	// watch several renewal periods.
	const timeout = 2 * time.Second
	older := e.start(t, func(c *runtime.Config) { c.NodeID = "twin"; c.SessionTimeout = timeout })
	target := counter("twinned")
	mustExec(t, older, target, Increment{By: 1})
	newer := e.start(t, func(c *runtime.Config) { c.NodeID = "twin"; c.SessionTimeout = timeout })

	require.Eventually(t, func() bool { return errors.Is(older.Ready(), journal.ErrNodeSuperseded) }, 10*time.Second, 5*time.Millisecond)
	require.ErrorIs(t, older.Ready(), runtime.ErrLeaseLost)
	require.Contains(t, older.Ready().Error(), `"twin"`, "the error names the node ID")

	// Over several renewal periods: the newer serves every command, the older
	// none, and the older stays not ready (no flapping).
	served := 0
	deadline := time.Now().Add(timeout + timeout/2)
	for time.Now().Before(deadline) {
		_, err := newer.Execute(ctx, target, Increment{By: 1})
		require.NoError(t, err, "the newer process serves without interruption")
		served++
		_, err = older.Execute(ctx, target, Increment{By: 1000})
		require.ErrorIs(t, err, journal.ErrNodeSuperseded)
		require.True(t, runtime.IsRetryable(err))
		require.Error(t, older.Ready())
		require.NoError(t, newer.Ready())
	}
	got := mustExec(t, newer, target, Get{})
	require.Equal(t, 1+served, got.State.Count, "only the newer process's commands were applied")
}

// poisonID marks the one command of testBatchSplit whose append the backend
// rejects (a reason one command causes, that validation did not catch).
const poisonID = "poison"

// poisoned fails every append carrying an event whose UserID is poisonID,
// with an error that is not a journal sentinel, and can hold appends until
// the test lets them go.
type poisoned struct {
	journal.Journal
	hold    chan struct{} // closed to let appends through
	entered atomic.Int64  // appends that reached the wrapper
	appends atomic.Int64  // appends that went past the hold
}

func (p *poisoned) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	p.entered.Add(1)
	select {
	case <-p.hold:
	case <-ctx.Done():
		return journal.AppendResult{}, ctx.Err()
	}
	p.appends.Add(1)
	for _, ev := range events {
		if ev.Metadata.UserID == poisonID {
			return journal.AppendResult{}, errors.New("backend: the row is malformed")
		}
	}
	return p.Journal.Append(ctx, events, opts)
}

// startHeld starts a runtime whose appends wait until the returned release
// is called; appends counts the appends that reached the wrapper.
func (e *env) startHeld(t *testing.T, mutate ...func(*runtime.Config)) (*runtime.Runtime, *poisoned, func()) {
	p := &poisoned{Journal: e.j, hold: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(p.hold) }) }
	rt := e.start(t, append([]func(*runtime.Config){func(c *runtime.Config) { c.Journal = p }}, mutate...)...)
	// Registered after start's shutdown, so it runs before it (cleanups run
	// last first): a test that fails while appends are held does not leave
	// the shutdown waiting for them.
	t.Cleanup(release)
	return rt, p, release
}

// outcome is the result of the i-th command (-1: the first).
type outcome struct {
	i   int
	res runtime.Result[CounterState]
	err error
}

// queueBehindFirst executes first on target and waits until its append is
// held by p, then starts cmds and waits until all of them are queued at the
// stream's actor. Results arrive on the returned channel.
func queueBehindFirst(t *testing.T, rt *runtime.Runtime, p *poisoned, target runtime.Target, first any, cmds []any, opts [][]runtime.ExecuteOption) chan outcome {
	t.Helper()
	out := make(chan outcome, len(cmds)+1)
	held := p.entered.Load() + 1
	go func() {
		res, err := runtime.ExecuteTyped[CounterState](context.Background(), rt, target, first)
		out <- outcome{i: -1, res: res, err: err}
	}()
	require.Eventually(t, func() bool { return p.entered.Load() == held }, 10*time.Second, time.Millisecond)
	for i, c := range cmds {
		var o []runtime.ExecuteOption
		if opts != nil {
			o = opts[i]
		}
		go func() {
			res, err := runtime.ExecuteTyped[CounterState](context.Background(), rt, target, c, o...)
			out <- outcome{i: i, res: res, err: err}
		}()
	}
	require.Eventually(t, func() bool { return rt.Pending(target) == len(cmds) }, 10*time.Second, time.Millisecond)
	return out
}

// testBatchSplit: 16 innocent commands and one whose append the backend
// rejects are decided in one batch; the actor appends again in halves until
// the offender fails alone and all 16 innocent commands are acknowledged.
func testBatchSplit(t *testing.T, e *env) {
	target := counter("split")
	rt, p, release := e.startHeld(t)
	cmds := make([]any, 17)
	opts := make([][]runtime.ExecuteOption, 17)
	for i := range cmds {
		cmds[i] = Increment{By: 1}
		if i == 11 {
			opts[i] = []runtime.ExecuteOption{runtime.WithMetadata(journal.Metadata{UserID: poisonID})}
		}
	}
	out := queueBehindFirst(t, rt, p, target, Increment{By: 1}, cmds, opts)
	release()
	failed := 0
	for range 18 {
		o := <-out
		if o.i == 11 {
			require.Error(t, o.err)
			require.Contains(t, o.err.Error(), "malformed")
			failed++
			continue
		}
		require.NoError(t, o.err, "command %d is innocent", o.i)
	}
	require.Equal(t, 1, failed)
	got := mustExec(t, rt, target, Get{})
	require.Equal(t, 17, got.State.Count, "the first command and the 16 innocent ones")
	requireGapFree(t, e.j, target.Stream(), 17)
	t.Logf("%d appends to isolate one offender among 17 commands", p.appends.Load())
}

// testBadMetadataFailsAlone: the measurement of the issue: 16 clients deposit
// on one stream while one sends a correlation ID over the journal's limit.
// Every innocent command succeeds; only the offender fails, with
// journal.ErrInvalidEvent naming the field.
func testBadMetadataFailsAlone(t *testing.T, e *env) {
	target := counter("bad-metadata")
	rt := e.start(t)
	const clients, each = 16, 50
	var wg sync.WaitGroup
	var innocentFailures, offenderFailures atomic.Int64
	stop := make(chan struct{})
	wg.Go(func() {
		bad := runtime.WithMetadata(journal.Metadata{CorrelationID: strings.Repeat("c", 3200)})
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := rt.Execute(context.Background(), target, Increment{By: 1000}, bad)
			if err == nil {
				t.Error("a 3,200-byte correlation ID was accepted")
				return
			}
			if !errors.Is(err, journal.ErrInvalidEvent) || !strings.Contains(err.Error(), "CorrelationID") {
				t.Errorf("the offender's error does not name the field: %v", err)
				return
			}
			offenderFailures.Add(1)
		}
	})
	var clientsWG sync.WaitGroup
	for range clients {
		clientsWG.Go(func() {
			for range each {
				if _, err := rt.Execute(context.Background(), target, Increment{By: 1}); err != nil {
					innocentFailures.Add(1)
					t.Errorf("an innocent command failed: %v", err)
				}
			}
		})
	}
	clientsWG.Wait()
	close(stop)
	wg.Wait()
	t.Logf("innocent failures: %d of %d; offender attempts rejected: %d", innocentFailures.Load(), clients*each, offenderFailures.Load())
	require.Zero(t, innocentFailures.Load())
	require.Positive(t, offenderFailures.Load())
	require.Equal(t, clients*each, mustExec(t, rt, target, Get{}).State.Count)
}

// testQueueBound: with MaxQueue commands waiting at a stream, the next
// Execute fails at once with ErrOverloaded and queues nothing; the waiting
// commands all succeed.
func testQueueBound(t *testing.T, e *env) {
	const bound = 8
	target := counter("bounded")
	rt, p, release := e.startHeld(t, func(c *runtime.Config) { c.MaxQueue = bound })
	cmds := make([]any, bound)
	for i := range cmds {
		cmds[i] = Increment{By: 1}
	}
	out := queueBehindFirst(t, rt, p, target, Increment{By: 1}, cmds, nil)
	start := time.Now()
	_, err := rt.Execute(context.Background(), target, Increment{By: 1})
	require.ErrorIs(t, err, runtime.ErrOverloaded)
	require.True(t, runtime.IsRetryable(err))
	require.Contains(t, err.Error(), "MaxQueue")
	t.Logf("overload answered in %s", time.Since(start))
	require.Equal(t, bound, rt.Pending(target), "the rejected command was not queued")
	release()
	for range bound + 1 {
		require.NoError(t, (<-out).err)
	}
	require.Equal(t, bound+1, mustExec(t, rt, target, Get{}).State.Count)
}

// testPendingBound: MaxPending bounds the commands waiting over all streams.
func testPendingBound(t *testing.T, e *env) {
	rt, p, release := e.startHeld(t, func(c *runtime.Config) { c.MaxPending = 4 })
	a, b := counter("pending-a"), counter("pending-b")
	outA := queueBehindFirst(t, rt, p, a, Increment{By: 1}, []any{Increment{By: 1}, Increment{By: 1}}, nil)
	outB := queueBehindFirst(t, rt, p, b, Increment{By: 1}, []any{Increment{By: 1}, Increment{By: 1}}, nil)
	for _, tg := range []runtime.Target{a, b, counter("pending-c")} {
		_, err := rt.Execute(context.Background(), tg, Increment{By: 1})
		require.ErrorIs(t, err, runtime.ErrOverloaded, tg.ID)
		require.Contains(t, err.Error(), "MaxPending")
	}
	release()
	for range 3 {
		require.NoError(t, (<-outA).err)
		require.NoError(t, (<-outB).err)
	}
}

// slow makes every append take at least delay: a stream whose appends are
// known to be slow.
type slow struct {
	journal.Journal
	delay time.Duration
}

func (s *slow) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	time.Sleep(s.delay)
	return s.Journal.Append(ctx, events, opts)
}

// testDeadlineShedding: when the stream's appends take 100 ms, a command whose
// deadline is 20 ms away is never decided (it would be work for a caller who
// has gone): the caller learns it was not executed, and nothing is appended.
func testDeadlineShedding(t *testing.T, e *env) {
	target := counter("impatient")
	rt := e.start(t, func(c *runtime.Config) { c.Journal = &slow{Journal: e.j, delay: 100 * time.Millisecond} })
	for range 3 { // the stream's appends are measured: ≥ 100 ms each
		mustExec(t, rt, target, Increment{By: 1})
	}
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := rt.Execute(ctx, target, Increment{By: 1})
		cancel()
		require.Error(t, err)
		require.NotErrorIs(t, err, journal.ErrOutcomeUnknown, "the command must not have been decided")
		require.True(t, errors.Is(err, runtime.ErrOverloaded) || errors.Is(err, context.DeadlineExceeded), "%v", err)
	}
	sum, err := e.j.TagSummary(context.Background(), target.Stream())
	require.NoError(t, err)
	require.Equal(t, uint64(3), sum.Version, "no work was done for callers who left")
	// A patient caller is served.
	require.Equal(t, 4, mustExec(t, rt, target, Increment{By: 1}).State.Count)
}

// testGroupCommitTakesTheQueue: the commands queued while an append is in
// flight are decided and appended together in the next append (a
// deterministic version of "group commit batches concurrent callers").
func testGroupCommitTakesTheQueue(t *testing.T, e *env) {
	target := counter("grouped")
	// Deadlines far beyond any hold: the batch is never cut for time.
	rt, p, release := e.startHeld(t, func(c *runtime.Config) { c.RequestTimeout = time.Hour })
	const queued = 63
	cmds := make([]any, queued)
	for i := range cmds {
		cmds[i] = Increment{By: 1}
	}
	out := queueBehindFirst(t, rt, p, target, Increment{By: 1}, cmds, nil)
	release()
	versions := map[uint64]bool{}
	for range queued + 1 {
		o := <-out
		require.NoError(t, o.err)
		versions[o.res.Version] = true
	}
	require.Len(t, versions, queued+1)
	require.Equal(t, int64(2), p.appends.Load(), "the first command alone, then all %d queued commands in one append", queued)
}
