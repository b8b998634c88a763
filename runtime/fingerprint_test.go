package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

type fpDeposited struct{ Amount int64 }
type fpDeposit struct{ Amount int64 }

// The state before and after a change of shape that keeps its schema
// version: Balance (units) became Cents.
type walletV1 struct{ Balance int64 }
type walletV2 struct{ Cents int64 }

// ignoredSnapshots reads scribe.snapshots.ignored from r.
func ignoredSnapshots(t *testing.T, r *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "scribe.snapshots.ignored" {
				var n int64
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					n += dp.Value
				}
				return n
			}
		}
	}
	return 0
}

// startWallet starts a runtime on j and snaps with the wallet aggregate
// folding into S, and returns a way to read the state and to stop it.
func startWallet[S any](t *testing.T, j *memory.Journal, snaps *snapshots.Memory, reader *sdkmetric.ManualReader, add func(S, int64) S) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(t.Context(), runtime.Config{Journal: j, Snapshots: snaps, NodeID: "n",
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	runtime.MustRegisterEvent[fpDeposited](rt, "Deposited", 1)
	runtime.MustRegisterAggregate(rt, runtime.Aggregate[S]{
		Name:    "wallet",
		Initial: func() S { var s S; return s },
		Decide:  func(_ S, c any) ([]any, error) { return []any{fpDeposited{Amount: c.(fpDeposit).Amount}}, nil },
		Evolve:  func(s S, ev any) S { return add(s, ev.(fpDeposited).Amount) },
	})
	return rt
}

// A state type that changed shape without a new SchemaVersion does not
// load its old snapshots: the stream is replayed and the state is right;
// an unchanged shape keeps using them.
func TestSnapshotOfAnotherStateShapeIsIgnored(t *testing.T) {
	j, snaps := memory.New(), snapshots.NewMemory()
	target := runtime.Target{Aggregate: "wallet", ID: "w"}
	r1 := sdkmetric.NewManualReader()
	rt := startWallet(t, j, snaps, r1, func(s walletV1, n int64) walletV1 { s.Balance += n; return s })
	for range 3 {
		_, err := rt.Execute(t.Context(), target, fpDeposit{Amount: 100})
		require.NoError(t, err)
	}
	require.NoError(t, rt.Shutdown(t.Context())) // passivation saves a snapshot
	infos, err := snaps.List(t.Context(), journal.StreamID{Partition: journal.DefaultPartition, Tag: target.Stream().Tag})
	require.NoError(t, err)
	require.Len(t, infos, 1, "the shutdown saved a snapshot at version 3")

	// The same shape again: the snapshot is used.
	r2 := sdkmetric.NewManualReader()
	rt = startWallet(t, j, snaps, r2, func(s walletV1, n int64) walletV1 { s.Balance += n; return s })
	st, err := runtime.State[walletV1](t.Context(), rt, target)
	require.NoError(t, err)
	require.Equal(t, int64(300), st.State.Balance)
	require.Zero(t, ignoredSnapshots(t, r2))
	require.NoError(t, rt.Shutdown(t.Context()))

	// Balance became Cents, SchemaVersion still 1: the old snapshot would
	// load as Cents 0 and fold nothing after version 3.
	r3 := sdkmetric.NewManualReader()
	rt = startWallet(t, j, snaps, r3, func(s walletV2, n int64) walletV2 { s.Cents += 100 * n; return s })
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	st2, err := runtime.State[walletV2](t.Context(), rt, target)
	require.NoError(t, err)
	require.Equal(t, int64(30000), st2.State.Cents, "replayed from the first event")
	res, err := rt.Execute(t.Context(), target, fpDeposit{Amount: 1})
	require.NoError(t, err)
	require.Equal(t, walletV2{Cents: 30100}, res.State, "the actor replayed too")
	require.GreaterOrEqual(t, ignoredSnapshots(t, r3), int64(2), "State and the actor each ignored the snapshot")
}
