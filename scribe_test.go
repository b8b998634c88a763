package scribe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/scribetest"
)

type (
	Counter     struct{ N int }
	CountCmd    interface{ countCmd() }
	Add         struct{ N int }
	Added       struct{ N int }
	CounterView struct{ Total int }
)

func (Add) countCmd() {}

var totals = projection.Collection[CounterView]{Name: "totals"}

func counters(t *testing.T, svc *scribe.Service) *runtime.Commands[Counter, CountCmd] {
	t.Helper()
	runtime.MustRegisterEvent[Added](svc.Runtime, "Added", 1)
	return runtime.MustRegisterAggregateOf(svc.Runtime, runtime.AggregateOf[Counter, CountCmd]{
		Name:    "counter",
		Initial: func() Counter { return Counter{} },
		Decide:  func(_ Counter, c CountCmd) ([]any, error) { return []any{Added{N: c.(Add).N}}, nil },
		Evolve:  func(s Counter, ev any) Counter { s.N += ev.(Added).N; return s },
	})
}

// totalsProjection sums every counter's events into one row per counter;
// fail, when set, makes its handler fail.
func totalsProjection(svc *scribe.Service, fail func() error) projection.RowProjection {
	return projection.RowProjection{
		Name: "totals", Version: 1,
		Query: journal.Query{Items: []journal.QueryItem{{Types: []string{"Added"}}}},
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			if fail != nil {
				if err := fail(); err != nil {
					return err
				}
			}
			for _, rec := range b.Records {
				ev, err := runtime.DecodeAs[Added](svc.Runtime, rec)
				if err != nil {
					return err
				}
				id := string(rec.Tags[0])
				v, _, err := totals.Get(ctx, rows, id)
				if err != nil {
					return err
				}
				v.Total += ev.N
				if err := totals.Put(ctx, rows, id, v); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func open(t *testing.T, cfg scribe.Config) *scribe.Service {
	t.Helper()
	svc, err := scribe.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, svc.Close(context.Background())) })
	return svc
}

// One call gives a service on memory or on Postgres: commands, a read model
// that follows them, readiness, and Close stopping everything.
func TestOpen(t *testing.T) {
	run := func(t *testing.T, cfg scribe.Config) {
		svc := open(t, cfg)
		cs := counters(t, svc)
		rm, err := svc.Project(totalsProjection(svc, nil))
		require.NoError(t, err)
		var last runtime.Result[Counter]
		for range 3 {
			last, err = cs.Execute(t.Context(), "a", Add{N: 2})
			require.NoError(t, err)
		}
		require.Equal(t, 6, last.State.N)
		require.NoError(t, rm.WaitFor(t.Context(), last.Records[0].Position))
		v, ok, err := totals.Get(t.Context(), rm.Rows(), "counter:a")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 6, v.Total)
		require.NoError(t, svc.Ready())
		// Erasure works out of the box: the key store is set up.
		_, err = svc.Runtime.Erase(t.Context(), "someone", "test")
		require.NoError(t, err)
		require.NoError(t, svc.Close(context.Background()))
		_, err = cs.Execute(t.Context(), "a", Add{N: 1})
		require.Error(t, err, "commands after Close fail")
		_, err = svc.Project(totalsProjection(svc, nil))
		require.Error(t, err, "a read model after Close is refused")
	}
	t.Run("Memory", func(t *testing.T) { t.Parallel(); run(t, scribe.Config{NodeID: "n1"}) })
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		url, schema := scribetest.Schema(t)
		run(t, scribe.Config{DatabaseURL: url, Schema: schema, NodeID: "n1"})
	})
}

// A read model whose handler keeps failing makes the service not ready,
// naming it; once the cause is gone the supervisor's restart clears it.
func TestReadModelFailureShowsInReadiness(t *testing.T) {
	svc := open(t, scribe.Config{NodeID: "n1"})
	cs := counters(t, svc)
	broken := make(chan bool, 1)
	broken <- true
	failing := func() error {
		b := <-broken
		broken <- b
		if b {
			return errors.New("the read model's database is broken")
		}
		return nil
	}
	rm, err := svc.Project(totalsProjection(svc, failing), projection.Options{MaxAttempts: 1, Backoff: time.Millisecond})
	require.NoError(t, err)
	res, err := cs.Execute(t.Context(), "a", Add{N: 1})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return svc.Ready() != nil }, 30*time.Second, 10*time.Millisecond, "the failing read model must make the service not ready")
	require.ErrorContains(t, svc.Ready(), `read model "totals"`)
	<-broken
	broken <- false
	// The supervisor starts the runner again (after 1 s), which retries the
	// record; WaitFor answers the failure until then.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return rm.WaitFor(ctx, res.Records[0].Position) == nil
	}, 30*time.Second, 50*time.Millisecond, "after its restart the read model catches up")
	require.Eventually(t, func() bool { return svc.Ready() == nil }, 30*time.Second, 10*time.Millisecond)
}

func TestOpenRefusesKeysWithoutDatabase(t *testing.T) {
	_, err := scribe.Open(t.Context(), scribe.Config{KeysDatabaseURL: "postgres://x@127.0.0.1/keys"})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.ErrorContains(t, err, "set both or neither")
}
