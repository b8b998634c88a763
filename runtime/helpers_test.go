package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/internal/metricread"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The counter aggregate used by the done-when tests.

type Increment struct{ By int }
type Block struct{ Release <-chan struct{} } // Decide waits: holds the actor's turn
type Explode struct{}
type Get struct{} // decides no events: reads the state

type Incremented struct {
	By int `json:"by"`
}

type CounterState struct {
	Count int `json:"count"`
	// Schema2 is set only by the v2 state codec test.
	Events int `json:"events"`
}

var errNegative = errors.New("counter: negative increment")

func counterAggregate(schema int) runtime.Aggregate[CounterState] {
	return runtime.Aggregate[CounterState]{
		Name:    "counter",
		Initial: func() CounterState { return CounterState{} },
		Decide: func(s CounterState, cmd any) ([]any, error) {
			switch c := cmd.(type) {
			case Increment:
				if c.By < 0 {
					return nil, fmt.Errorf("%w: %d", errNegative, c.By)
				}
				return []any{Incremented{By: c.By}}, nil
			case Block:
				<-c.Release
				return nil, nil
			case Explode:
				panic("counter exploded")
			case Get:
				return nil, nil
			}
			return nil, fmt.Errorf("counter: unknown command %T", cmd)
		},
		Evolve: func(s CounterState, ev any) CounterState {
			switch e := ev.(type) {
			case Incremented:
				s.Count += e.By
				s.Events++
			}
			return s
		},
		SchemaVersion: schema,
	}
}

// env is a journal (and snapshot store) shared by the runtimes of a test.
type env struct {
	j     journal.Journal
	s     journal.Sessions
	snaps snapshots.Store
	// streamRows counts the rows of the Postgres schema's streams table;
	// nil on the memory journal.
	streamRows func(t testing.TB) int
	// engine reads the Postgres journal's engine metrics (postgres.Metric…)
	// when the journal was given its Provider; nil otherwise.
	engine *metricread.Reader
}

func memoryEnv() *env {
	m := memory.New()
	return &env{j: m, s: m, snaps: snapshots.NewMemory()}
}

// start creates a runtime with the counter aggregate registered; it is shut
// down at cleanup (again, harmlessly, when the test did it already).
func (e *env) start(t testing.TB, mutate ...func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	return e.startSchema(t, 1, mutate...)
}

// startSchema is start with the counter state at the given schema version.
func (e *env) startSchema(t testing.TB, schema int, mutate ...func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	cfg := runtime.Config{Journal: e.j, Sessions: e.s, Snapshots: e.snaps, NodeID: "node-1"}
	for _, m := range mutate {
		m(&cfg)
	}
	rt, err := runtime.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	require.NoError(t, runtime.RegisterEvent[Incremented](rt, "Incremented", 1))
	require.NoError(t, runtime.RegisterAggregate(rt, counterAggregate(schema)))
	return rt
}

func counter(id string) runtime.Target { return runtime.Target{Aggregate: "counter", ID: id} }

func mustExec(t testing.TB, rt *runtime.Runtime, target runtime.Target, cmd any, opts ...runtime.ExecuteOption) runtime.Result[CounterState] {
	t.Helper()
	res, err := runtime.ExecuteTyped[CounterState](context.Background(), rt, target, cmd, opts...)
	require.NoError(t, err)
	return res
}

// hammer runs callers goroutines, each executing each increments of 1 on
// target, and returns the number of failed Executes (there are no retries).
func hammer(t testing.TB, rt *runtime.Runtime, target runtime.Target, callers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for range each {
				if _, err := rt.Execute(context.Background(), target, Increment{By: 1}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// requireGapFree checks that the stream holds versions 1..n with no gap.
func requireGapFree(t testing.TB, j journal.Journal, stream journal.StreamID, n uint64) {
	t.Helper()
	var v uint64
	for r, err := range j.ReadStream(context.Background(), stream, 1, 0) {
		require.NoError(t, err)
		v++
		require.Equal(t, v, r.Version(stream.Tag))
	}
	require.Equal(t, n, v)
}

// errCrashed is what a crashed process's journal calls "return": nothing
// reaches the database any more.
var errCrashed = errors.New("test: this runtime's process crashed")

// crashable wraps a journal and its sessions for one runtime so a test can
// freeze its session renewals (the node session then expires) or crash it
// (no call reaches the store any more), without Shutdown.
type crashable struct {
	journal.Journal
	sessions journal.Sessions
	frozen   atomic.Bool
	crashed  atomic.Bool
}

func (e *env) crashable() *crashable { return &crashable{Journal: e.j, sessions: e.s} }

func (c *crashable) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	if c.crashed.Load() {
		return journal.AppendResult{}, errCrashed
	}
	return c.Journal.Append(ctx, events, opts)
}

func (c *crashable) OpenNode(ctx context.Context, nodeID string, timeout time.Duration) (journal.NodeSession, error) {
	if c.crashed.Load() {
		return journal.NodeSession{}, errCrashed
	}
	return c.sessions.OpenNode(ctx, nodeID, timeout)
}

func (c *crashable) RenewNode(ctx context.Context, node journal.NodeSession) (journal.NodeSession, error) {
	if c.crashed.Load() || c.frozen.Load() {
		return journal.NodeSession{}, errCrashed
	}
	return c.sessions.RenewNode(ctx, node)
}

func (c *crashable) CloseNode(ctx context.Context, node journal.NodeSession) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.sessions.CloseNode(ctx, node)
}

func (c *crashable) Acquire(ctx context.Context, node journal.NodeSession, stream journal.StreamID, wait time.Duration) (journal.Lease, error) {
	if c.crashed.Load() {
		return journal.Lease{}, errCrashed
	}
	return c.sessions.Acquire(ctx, node, stream, wait)
}

func (c *crashable) Release(ctx context.Context, lease journal.Lease) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.sessions.Release(ctx, lease)
}

// on makes a runtime use the wrapper.
func (c *crashable) on(cfg *runtime.Config) { cfg.Journal, cfg.Sessions = c, c }
