package scribetest_test

import (
	"testing"

	"github.com/scribe-es/scribe/scribetest"
)

// A service's own test of its aggregate's rules: given the stream's events,
// when a command, then these events, this rejection or this state. It runs
// on a runtime in memory; scribetest.PostgresRuntime(t) runs the same on a
// throwaway Postgres schema.
func TestWithdrawRules(t *testing.T) {
	rt := scribetest.Memory(t)
	accounts, _ := setup(t, rt) // registers the events, the account aggregate and the transfer

	f := scribetest.Aggregate(t, rt, accounts)
	f.Given("42", Opened{ID: "42", Owner: "ada"}, Deposited{Amount: 100}).
		When(Withdraw{Amount: 30}).
		ThenEvents(Withdrawn{Amount: 30}).
		ThenState(Account{ID: "42", Owner: "ada", Balance: 70})
	f.Given("43", Opened{ID: "43", Owner: "bob"}).
		When(Withdraw{Amount: 1}).
		ThenError(errNoFunds) // and nothing was appended
}
