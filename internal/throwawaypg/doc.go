// Package throwawaypg starts a private PostgreSQL server for a test that must
// stop the database (an outage test) without touching the shared server:
// initdb into a temporary directory with the installed server binaries, a
// free port on 127.0.0.1, a database named "test", trust authentication.
// Stop and Start stop and restart it on the same port and data directory, so
// clients and pools reconnect to the same address. Everything is removed when
// the test ends.
//
// The binaries are the newest /usr/lib/postgresql/*/bin, else initdb on PATH.
// initdb refuses to run as root: as root the server runs as user postgres (or
// nobody) through runuser. Without binaries the test is skipped loudly, or
// fails when SCRIBE_REQUIRE_POSTGRES=1.
package throwawaypg
