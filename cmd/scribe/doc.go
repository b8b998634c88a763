// Command scribe is the operator's command line for a Scribe journal in
// Postgres: it migrates a schema, lists streams, tags, leases and snapshots,
// shows a stream's events, follows the global feed, reads events by type
// and time, prunes snapshots, reports and rebuilds projections, lists dead letters
// and asks running publishers to replay them, verifies
// every hash chain, retires old events into the archive by retention
// policy (or a closed stream whole, behind a tombstone), and erases data
// subjects (crypto-shredding: it destroys the subject's key in the erasure
// key store and records the erasure in the journal, where running services
// pick it up). It never prints key material.
//
// Install it with
//
//	go install github.com/scribe-es/scribe/cmd/scribe@latest
//
// and point it at a database with -db (or SCRIBE_DATABASE_URL) and, unless
// Scribe's tables live in the default schema "scribe", -schema:
//
//	scribe -db postgres://user@host/db migrate up
//	scribe migrate status
//	scribe streams list -partition default -tag-prefix account:
//	scribe stream show account:42
//	scribe tail -type MoneyDeposited
//	scribe events -type MoneyTransferred -since 1h -desc -limit 20
//	scribe verify
//	scribe verify -archive
//	scribe archive -policy account=keep:1000 -policy '$untagged=age:2160h' -dry-run
//	scribe archive -policy account=keep:1000 -confirm -compact
//	scribe retire-stream -confirm account:42
//	scribe leases
//	scribe snapshots list
//	scribe snapshots prune -keep 2
//	scribe tags account
//	scribe projections status
//	scribe projections rebuild -version 2 -confirm accounts
//	scribe projections dead-letters list -name events-to-nats
//	scribe projections dead-letters replay -name events-to-nats -confirm
//	scribe migrate keys -keys scribe_keys
//	scribe subjects -keys scribe_keys
//	scribe erase c-42 -confirm -by dpo-ticket-17
//
// The erasure key store's schema comes from -keys or SCRIBE_KEY_SCHEMA
// (default "scribe_keys"). Without -confirm, erase changes nothing and says
// what it would do.
//
// Output is an aligned table by default and one JSON object per line with
// -json. Exit status: 0 on success, 1 when a command fails (including a
// broken hash chain found by verify), 2 on a usage error.
package main
