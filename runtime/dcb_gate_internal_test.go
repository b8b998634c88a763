package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// TestDCBCommandsShareTheRuntimesGate: three DCB command types on one
// runtime. While a Hold command holds boxes b and d (blocked in Decide), a
// Move a→b waits at the runtime's gate without reserving box a at its actor,
// so a Move2 a→c (another command type, so another executor) completes
// meanwhile. With a gate per command type, or none, Move a→b would hold box
// a's actor while it queues at b's, and Move2 a→c would queue behind it
// until Hold ends.
func TestDCBCommandsShareTheRuntimesGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, hold, move1, move2, deciding, release := gateRuntime(t, Config{Journal: memory.New(), NodeID: "gate"})

	run := func(cmd *DCBCommand[boxMoved, DCBStates], m boxMoved) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := cmd.Execute(ctx, m)
			done <- err
		}()
		return done
	}
	held := run(hold, boxMoved{From: "b", To: "d", N: 1})
	<-deciding
	queued := run(move1, boxMoved{From: "a", To: "b", N: 2})
	require.Eventually(t, func() bool { return rt.dcbGate.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	select {
	case err := <-run(move2, boxMoved{From: "a", To: "c", N: 3}):
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Move2 a→c queued behind Move a→b, which waits for box b")
	}
	close(release)
	require.NoError(t, <-held)
	require.NoError(t, <-queued)

	for id, want := range map[string]int{"a": 10 - 2 - 3, "b": 10 - 1 + 2, "c": 10 + 3, "d": 10 + 1} {
		st, err := State[box](ctx, rt, Target{Aggregate: "box", ID: id})
		require.NoError(t, err)
		require.Equal(t, want, st.State.N, "box %s", id)
	}
}

// TestDCBGateWaitEndsAtTheReservationTimeout: a DCB command kept at the gate
// by another DCB command of the runtime fails after the runtime's
// ReservationTimeout with ErrReservationTimeout naming the busy tag, as it
// would waiting at the tag's actor, and writes nothing.
func TestDCBGateWaitEndsAtTheReservationTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := Config{Journal: memory.New(), NodeID: "gate-timeout"}
	cfg.ReservationTimeout = 200 * time.Millisecond
	rt, hold, move1, _, deciding, release := gateRuntime(t, cfg)
	held := make(chan error, 1)
	go func() {
		_, err := hold.Execute(ctx, boxMoved{From: "b", To: "d", N: 1})
		held <- err
	}()
	<-deciding
	_, err := move1.Execute(ctx, boxMoved{From: "a", To: "b", N: 2})
	require.ErrorIs(t, err, ErrReservationTimeout)
	var te *ReservationTimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "box:b", string(te.Stream.Tag))
	require.Zero(t, rt.dcbGate.Waiting())
	close(release)
	require.NoError(t, <-held)
	st, err := State[box](ctx, rt, Target{Aggregate: "box", ID: "a"})
	require.NoError(t, err)
	require.Equal(t, 10, st.State.N, "the timed-out move wrote nothing")
}

// gateRuntime starts a runtime of boxes a, b, c and d (10 each) with three
// DCB commands moving between two boxes: Hold (whose Decide reports on
// deciding and waits for release to close), Move and Move2.
func gateRuntime(t *testing.T, cfg Config) (rt *Runtime, hold, move1, move2 *DCBCommand[boxMoved, DCBStates], deciding chan struct{}, release chan struct{}) {
	t.Helper()
	ctx := context.Background()
	rt = startBoxes(t, cfg)
	boxes, err := Uses[box](rt, "box")
	require.NoError(t, err)
	deciding, release = make(chan struct{}), make(chan struct{})
	move := func(name string, block bool) *DCBCommand[boxMoved, DCBStates] {
		cmd, err := RegisterDCB(rt, DCB[boxMoved, DCBStates]{
			Name:  name,
			Uses:  []AggregateUse{boxes},
			Query: func(m boxMoved) journal.Query { return journal.Query{Items: boxes.Items(m.From, m.To)} },
			Decide: func(m boxMoved, _ DCBStates) ([]any, error) {
				if block {
					deciding <- struct{}{}
					<-release
				}
				return []any{m}, nil
			},
		})
		require.NoError(t, err)
		return cmd
	}
	hold, move1, move2 = move("Hold", true), move("Move", false), move("Move2", false)
	for _, id := range []string{"a", "b", "c", "d"} {
		_, err := rt.Execute(ctx, Target{Aggregate: "box", ID: id}, boxAdded{ID: id, N: 10})
		require.NoError(t, err)
	}
	return rt, hold, move1, move2, deciding, release
}
