package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

type moneyDeposited struct{ Amount int64 }
type moneyDepositedV2 struct{ Cents int64 }

// Registering an event again at another schema version says how to evolve
// it: one registration at the newer version and an upcaster from the older.
func TestReRegisteringAnEventAtAnotherVersionPointsToUpcasters(t *testing.T) {
	rt, err := runtime.New(t.Context(), runtime.Config{Journal: memory.New(), NodeID: "n"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Shutdown(t.Context()) })
	require.NoError(t, runtime.RegisterEvent[moneyDeposited](rt, "MoneyDeposited", 1))
	err = runtime.RegisterEvent[moneyDepositedV2](rt, "MoneyDeposited", 2)
	require.ErrorIs(t, err, runtime.ErrRegistration)
	require.ErrorContains(t, err, `register it once, at 2, and read stored version 1 with RegisterUpcaster(rt, "MoneyDeposited", 1, fn)`)
	require.LessOrEqual(t, len(err.Error()), 200)
	err = runtime.RegisterEvent[moneyDepositedV2](rt, "MoneyDeposited", 1)
	require.ErrorContains(t, err, "is already registered (Go type")
}
