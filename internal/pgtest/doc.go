// Package pgtest gives Postgres-backed tests a connection pool and a fresh,
// private schema.
//
// Tests read the database URL from SCRIBE_TEST_DATABASE_URL. Without it they
// are skipped with a loud message, except when SCRIBE_REQUIRE_POSTGRES=1 (CI),
// where they fail. Each call to [Pool] creates a new, uniquely named schema
// and drops it (CASCADE) when the test ends, so tests can run in parallel
// against one database without seeing each other's data.
package pgtest
