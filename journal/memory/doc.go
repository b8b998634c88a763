// Package memory is the complete in-memory implementation of the journal
// contract: a [Journal] implements journal.Journal and journal.Sessions, is
// safe for concurrent use and passes the same conformance suite
// (journal/journaltest) as the Postgres journal. It keeps every event in
// process memory, never archives and has no tombstones, so it suits tests,
// examples and benchmarks, not durable storage.
package memory
