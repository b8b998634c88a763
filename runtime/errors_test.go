package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/tagconsistency"
)

// requireSurfaced checks that err, returned by the runtime, matches the
// runtime's sentinel and still the engine's, which stays in the chain.
func requireSurfaced(t *testing.T, err, sentinel, engine error) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	require.ErrorIs(t, err, engine, "the engine's error stays in the chain")
	require.NotSame(t, sentinel, engine)
}

// TestRuntimeErrorsOnTheirPaths walks each runtime error through a call
// that returns it (aggregate commands, DCB commands, after Shutdown): the
// runtime's sentinel matches (errors.Is) and the runtime's detail type is
// found (errors.As) while the engine's sentinel and type stay in the chain.
func TestRuntimeErrorsOnTheirPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("overload", func(t *testing.T) {
		t.Parallel()
		rt := memoryEnv().start(t, func(c *runtime.Config) { c.MaxQueue = 1 })
		touch := registerTouch(t, rt)
		target := gate("busy")
		release, done := hold(t, rt, "busy")
		queued := make(chan error, 1)
		go func() {
			_, err := rt.Execute(ctx, target, "queued")
			queued <- err
		}()
		require.Eventually(t, func() bool { return rt.Pending(target) == 1 }, 10*time.Second, time.Millisecond)

		_, err := rt.Execute(ctx, target, "refused")
		requireSurfaced(t, err, runtime.ErrOverloaded, actors.ErrOverloaded)
		require.Contains(t, err.Error(), "MaxQueue")
		require.True(t, runtime.IsRetryable(err))
		_, err = touch.Execute(ctx, Touch{Gate: "busy"})
		requireSurfaced(t, err, runtime.ErrOverloaded, actors.ErrOverloaded)

		release()
		require.NoError(t, <-done)
		require.NoError(t, <-queued)
	})

	t.Run("reservation timeout", func(t *testing.T) {
		t.Parallel()
		rt := memoryEnv().start(t, func(c *runtime.Config) { c.ReservationTimeout = 100 * time.Millisecond })
		touch := registerTouch(t, rt)
		release, done := hold(t, rt, "slow")
		_, err := touch.Execute(ctx, Touch{Gate: "slow"})
		requireSurfaced(t, err, runtime.ErrReservationTimeout, tagconsistency.ErrReservationTimeout)
		var te *runtime.ReservationTimeoutError
		require.ErrorAs(t, err, &te)
		require.Equal(t, gate("slow").Stream(), te.Stream)
		require.Equal(t, "Touch", te.Command)
		require.GreaterOrEqual(t, te.Waited, 100*time.Millisecond)
		var engine *tagconsistency.ReservationTimeoutError
		require.ErrorAs(t, err, &engine)
		require.Equal(t, engine.Error(), te.Error())
		release()
		require.NoError(t, <-done)
	})

	t.Run("conflict", func(t *testing.T) {
		t.Parallel()
		e := memoryEnv()
		a := startDCB(t, e)
		a.openWallets(t, 2, 100)
		bypass := journal.Event{ID: journal.NewEventID(), Type: "WalletCredited", SchemaVersion: 1,
			Tags: []journal.Tag{walletTag("0")}, Data: json.RawMessage(`{"amount":500}`)}
		_, err := e.j.Append(ctx, []journal.Event{bypass}, journal.AppendOptions{})
		require.NoError(t, err)
		_, err = a.transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 20})
		requireSurfaced(t, err, runtime.ErrConflict, tagconsistency.ErrConflict)
		var ce *runtime.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Command, "Transfer")
		require.Equal(t, []journal.StreamID{journal.Stream(walletTag("0")), journal.Stream(walletTag("1"))}, ce.Streams)
		require.True(t, errors.Is(ce.Err, journal.ErrAppendConditionFailed) || errors.Is(ce.Err, journal.ErrVersionMismatch), "%v", ce.Err)
		var engine *tagconsistency.ConflictError
		require.ErrorAs(t, err, &engine)
	})

	t.Run("invalid command", func(t *testing.T) {
		t.Parallel()
		rt := memoryEnv().start(t)
		untagged, err := runtime.RegisterDCB(rt, runtime.DCB[Touch, int]{
			Name: "Untagged",
			Query: func(Touch) journal.Query {
				return journal.Query{Items: []journal.QueryItem{{Types: []string{"Incremented"}}}}
			},
			Evolve: func(_ Touch, s int, _ runtime.DCBEvent) int { return s + 1 },
			Decide: func(Touch, int) ([]any, error) { return nil, nil },
		})
		require.NoError(t, err)
		_, err = untagged.Execute(ctx, Touch{Gate: "g"})
		requireSurfaced(t, err, runtime.ErrInvalidCommand, tagconsistency.ErrInvalidCommand)
	})

	t.Run("shutdown", func(t *testing.T) {
		t.Parallel()
		rt := memoryEnv().start(t)
		touch := registerTouch(t, rt)
		mustExec(t, rt, counter("s"), Increment{By: 1})
		require.NoError(t, rt.Shutdown(ctx))
		_, err := rt.Execute(ctx, counter("s"), Increment{By: 1})
		requireSurfaced(t, err, runtime.ErrShutdown, actors.ErrShutdown)
		_, err = touch.Execute(ctx, Touch{Gate: "s"})
		requireSurfaced(t, err, runtime.ErrShutdown, actors.ErrShutdown)
	})
}

// registerTouch registers the aggregate "gate", whose actor a Hold keeps
// busy, and the DCB command Touch, which reads gate Touch.Gate's stream and
// decides nothing.
func registerTouch(t *testing.T, rt *runtime.Runtime) *runtime.DCBCommand[Touch, int] {
	t.Helper()
	require.NoError(t, runtime.RegisterAggregate(rt, runtime.Aggregate[int]{
		Name:    "gate",
		Initial: func() int { return 0 },
		Decide: func(_ int, cmd any) ([]any, error) {
			if h, ok := cmd.(Hold); ok {
				close(h.Started)
				<-h.Release
			}
			return nil, nil
		},
		Evolve: func(s int, _ any) int { return s },
	}))
	touch, err := runtime.RegisterDCB(rt, runtime.DCB[Touch, int]{
		Name:   "Touch",
		Query:  func(c Touch) journal.Query { return journal.TagQuery(journal.NewTag("gate", c.Gate)) },
		Evolve: func(_ Touch, s int, _ runtime.DCBEvent) int { return s + 1 },
		Decide: func(Touch, int) ([]any, error) { return nil, nil },
	})
	require.NoError(t, err)
	return touch
}

func gate(id string) runtime.Target { return runtime.Target{Aggregate: "gate", ID: id} }

// hold keeps gate id's actor in a Decide until release is called; done
// receives that command's error.
func hold(t *testing.T, rt *runtime.Runtime, id string) (release func(), done <-chan error) {
	t.Helper()
	started, rel := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		_, err := rt.Execute(context.Background(), gate(id), Hold{Started: started, Release: rel})
		errs <- err
	}()
	<-started
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(release)
	return release, errs
}
