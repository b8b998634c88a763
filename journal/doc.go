// Package journal defines Scribe's storage contract: events, records, global
// positions, tags and tag streams, DCB queries and append conditions, session
// leases used for fencing, and the sentinel errors every backend returns.
//
// A stream is a tag. An aggregate stream is the tag "account:42"; a Dynamic
// Consistency Boundary (DCB) command reads and writes events that carry several
// tags. Every event carries zero or more tags and gets, for each of its tags, a
// per-tag version: 1, 2, 3 … without gaps within that tag's stream. An event
// without tags is found by its type, as the DCB model defines it.
//
// Each tag stream is a SHA-256 hash chain (see [CanonicalBytes], [ChainHash],
// [VerifyStream]). An event without tags is covered by the chain of its
// partition's untagged events of its type ([UntaggedChain], tag
// "$untagged:<type>"), so every event is in at least one chain; each chain's
// newest version and hash are recorded with it ([TagSummary] Version and
// HeadHash), so removing a chain's newest events is detected as well as
// altering, removing or re-ordering events inside it.
//
// Retention is a backend capability. A backend that retires old events into
// an archive records each stream's cut ([Checkpoint], [TagSummary] Cut): a
// read at or below it fails with an [*ArchivedError] ([ErrArchived]) instead
// of silently returning less history, [ArchiveReader] reads through it on
// request, [VerifyStream] verifies a stream from its checkpoint and
// [VerifyArchive] its archived part against it. A stream closed for good
// behind a tombstone ([TagSummary] Retired) refuses every append naming it
// with a [*StreamRetiredError] ([ErrStreamRetired]). The Postgres journal
// implements both; the in-memory journal keeps every event, never archives
// and has no tombstones (its cuts are always zero).
//
// Backends implement [Journal] and [Sessions]. Package journal/memory holds
// the complete, concurrency-safe in-memory implementation; package postgres
// holds the durable one. Both pass the conformance suite in package journaltest; package
// journal/backend holds the helpers backends share beyond this contract.
package journal
