// Package scribetest is Scribe's test kit for a service's own tests, usable
// from any module:
//
//   - Memory: a single-node runtime on an in-memory journal, snapshot store
//     and key store, in one line, shut down when the test ends.
//   - DatabaseURL, Schema, Postgres, PostgresRuntime: a throwaway, migrated Postgres
//     schema (with its key store) on the database $SCRIBE_TEST_DATABASE_URL
//     names, dropped when the test ends; without the variable the test is
//     skipped with a message saying what to set, or fails when $CI is "true"
//     or $SCRIBE_REQUIRE_POSTGRES is "1", so a CI run cannot pass by
//     skipping.
//   - Aggregate and DCB: given/when/then fixtures. Given events (appended
//     through the stream's actor with runtime.Seed), when a command, then
//     these events, this rejection, or this state.
//
// A fixture of a typed aggregate (runtime.AggregateOf):
//
//	rt := scribetest.Memory(t)
//	accounts := runtime.MustRegisterAggregateOf(rt, account) // after its events
//	scribetest.Aggregate(t, rt, accounts).
//		Given("42", Opened{ID: "42"}, Deposited{Amount: 100}).
//		When(Withdraw{Amount: 30}).
//		ThenEvents(Withdrawn{Amount: 30})
//
// Every check reports a failure through the test (t.Errorf) with what was
// expected and what happened, and fixtures never retry.
package scribetest
