package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/runtime"
)

// testLeaseFreeState: State folds a stream on another runtime (another node
// ID) while the owner's actor holds the lease, without taking the lease or
// creating anything; AtLeastVersion waits for a write; a stream without
// events reads as Initial at version 0 and stays without a row.
func testLeaseFreeState(t *testing.T, e *env) {
	ctx := context.Background()
	owner := e.start(t)
	reader := e.start(t, func(c *runtime.Config) { c.NodeID = "reader" })
	target := counter("state-1")
	var last runtime.Result[CounterState]
	for i := 1; i <= 30; i++ {
		last = mustExec(t, owner, target, Increment{By: i})
	}
	got, err := runtime.State[CounterState](ctx, reader, target)
	require.NoError(t, err)
	require.Equal(t, last.State.Count, got.State.Count)
	require.Equal(t, last.Version, got.Version)
	require.True(t, got.Exists)

	// The owner keeps its lease: its next command needs no takeover.
	next := mustExec(t, owner, target, Increment{By: 1})
	require.Equal(t, last.Version+1, next.Version)

	// Read your writes: wait for a version the owner has not written yet.
	done := make(chan runtime.StateResult[CounterState], 1)
	waitErr := make(chan error, 1)
	go func() {
		r, err := runtime.State[CounterState](ctx, reader, target, runtime.AtLeastVersion(next.Version+1))
		waitErr <- err
		done <- r
	}()
	after := mustExec(t, owner, target, Increment{By: 100})
	require.NoError(t, <-waitErr)
	r := <-done
	require.GreaterOrEqual(t, r.Version, next.Version+1)
	require.Equal(t, after.State.Count, r.State.Count)

	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err = runtime.State[CounterState](short, reader, target, runtime.AtLeastVersion(after.Version+10))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "waited for")

	// A stream without events: Initial, version 0, nothing created.
	ghost, err := runtime.State[CounterState](ctx, reader, counter("ghost"))
	require.NoError(t, err)
	require.Zero(t, ghost.Version)
	require.False(t, ghost.Exists, "a stream without events does not exist")
	require.Zero(t, ghost.State.Count)
	sum, err := e.j.TagSummary(ctx, counter("ghost").Stream())
	require.NoError(t, err)
	require.Zero(t, sum.Version)
	// Neither stream was leased by the reader: a third node gets the ghost at
	// once, and the owner's stream stays with the owner (it serves below).
	third, err := e.s.OpenNode(ctx, "third", time.Minute)
	require.NoError(t, err)
	l, err := e.s.Acquire(ctx, third, counter("ghost").Stream(), 0)
	require.NoError(t, err, "the ghost stream was not leased by State")
	require.NoError(t, e.s.Release(ctx, l))
	require.Equal(t, after.Version+1, mustExec(t, owner, target, Increment{By: 1}).Version)

	// Bad input.
	_, err = runtime.State[int](ctx, reader, target)
	require.ErrorContains(t, err, "another type")
	_, err = runtime.State[CounterState](ctx, reader, runtime.Target{Aggregate: "nope", ID: "1"})
	require.True(t, errors.Is(err, runtime.ErrUnknownAggregate))
	_, err = runtime.State[CounterState](ctx, reader, counter(""))
	require.ErrorContains(t, err, "ID is empty")
}
