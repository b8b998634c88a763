// Package journal defines Scribe's storage contract: events, records, global
// positions, tags and tag streams, DCB queries and append conditions, session
// leases used for fencing, and the sentinel errors every backend returns.
//
// A stream is a tag. An aggregate stream is the tag "account:42"; a Dynamic
// Consistency Boundary (DCB) command reads and writes events that carry several
// tags. Every event carries one or more tags and gets, for each of its tags, a
// per-tag version: 1, 2, 3 … without gaps within that tag's stream.
//
// Each tag stream is a SHA-256 hash chain (see [CanonicalBytes], [ChainHash],
// [VerifyStream]). Because an append is rejected unless every event carries a
// tag, every event is covered by at least one chain; each stream's newest
// version and hash are recorded with the stream ([TagSummary] Version and
// HeadHash), so removing a stream's newest events is detected as well as
// altering, removing or re-ordering events inside it.
//
// Backends implement [Journal] and [Sessions]. [NewMemory] is a complete,
// concurrency-safe in-memory implementation; package postgres holds the durable
// one. Both pass the conformance suite in package journaltest.
package journal
