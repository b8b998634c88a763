package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

type rcDeposited struct{ Amount int64 }
type rcDepositedV2 struct{ Cents int64 }
type rcDeposit struct{ Amount int64 }
type rcAccount struct{ Cents int64 }

// A journal written by one build, checked by the next: a version no
// upcaster reads fails the check, naming the type, the version and the
// first event; with the upcaster it passes.
func TestCheckStored(t *testing.T) {
	j := memory.New()
	old, err := runtime.New(t.Context(), runtime.Config{Journal: j, NodeID: "old"})
	require.NoError(t, err)
	runtime.MustRegisterEvent[rcDeposited](old, "Deposited", 1)
	runtime.MustRegisterAggregate(old, runtime.Aggregate[rcAccount]{
		Name: "account", Initial: func() rcAccount { return rcAccount{} },
		Decide: func(_ rcAccount, c any) ([]any, error) { return []any{rcDeposited{Amount: c.(rcDeposit).Amount}}, nil },
		Evolve: func(s rcAccount, ev any) rcAccount { s.Cents += 100 * ev.(rcDeposited).Amount; return s },
	})
	var first runtime.Result[any]
	for i := range 5 {
		res, err := old.Execute(t.Context(), runtime.Target{Aggregate: "account", ID: "a"}, rcDeposit{Amount: 1})
		require.NoError(t, err)
		if i == 0 {
			first = res
		}
	}
	require.NoError(t, old.Shutdown(t.Context()))

	newBuild := func(upcast bool) *runtime.Runtime {
		rt, err := runtime.New(t.Context(), runtime.Config{Journal: j, NodeID: "new"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Shutdown(t.Context()) })
		runtime.MustRegisterEvent[rcDepositedV2](rt, "Deposited", 2)
		if upcast {
			runtime.MustRegisterUpcaster(rt, "Deposited", 1, func(data json.RawMessage) (json.RawMessage, error) {
				var v1 rcDeposited
				if err := json.Unmarshal(data, &v1); err != nil {
					return nil, err
				}
				return json.Marshal(rcDepositedV2{Cents: 100 * v1.Amount})
			})
		}
		return rt
	}

	check, err := runtime.CheckStored(t.Context(), newBuild(false))
	require.NoError(t, err)
	require.Equal(t, uint64(5), check.Events)
	require.Equal(t, uint64(5), check.Failed)
	require.Len(t, check.Types, 1)
	tc := check.Types[0]
	require.Equal(t, "Deposited", tc.Type)
	require.Equal(t, 1, tc.SchemaVersion)
	require.NotNil(t, tc.FirstFailure)
	require.Equal(t, first.Records[0].ID, tc.FirstFailure.EventID)
	require.ErrorIs(t, check.Err(), runtime.ErrUnknownEvent)
	require.ErrorContains(t, check.Err(), "Deposited v1: 5 failed, first event "+first.Records[0].ID.String())

	sampled, err := runtime.CheckStored(t.Context(), newBuild(false), runtime.SamplePerVersion(2))
	require.NoError(t, err)
	require.Equal(t, uint64(5), sampled.Events)
	require.Equal(t, uint64(2), sampled.Checked)
	require.Equal(t, uint64(2), sampled.Failed)

	fixed, err := runtime.CheckStored(t.Context(), newBuild(true))
	require.NoError(t, err)
	require.NoError(t, fixed.Err())
	require.Equal(t, uint64(5), fixed.Checked)
}
