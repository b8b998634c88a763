// Package pgadmin is the operator's side of a Scribe schema on PostgreSQL:
// what the scribe command line, the console and operators' own tools run,
// and what no journal, session or snapshot contract asks for. A service
// needs only package postgres; an operator's tool builds an Admin from the
// same pool and postgres.Config:
//
//	a, err := pgadmin.New(pool, postgres.Config{Schema: "shop"})
//	plan, err := a.PlanArchive(ctx, policy)
//	prog, err := a.ArchivePlanned(ctx, plan, pgadmin.ArchiveOptions{})
//
// Partition moves (PlanPartitionMove, MovePartition) copy a partition to
// another database online, fenced for the cut-over; a journal follows a
// moved partition by itself (journal.ErrPartitionMoved).
//
// # Listings and inspection
//
// Streams (and ListStreams, an evidence.StreamLister), Leases, Nodes,
// Overview, Newest, CountAfterAtMost, UnchainedEvents and UnrecordedStreams
// only read, take no lock beyond a plain snapshot read, and are never on the
// append path. The inspection reads run with enable_seqscan off.
//
// # Retention and archiving
//
// Migration 0005 adds events_archive and event_tags_archive (the hot
// tables' columns) and, per stream, a cut (cut_version, cut_hash,
// cut_commit, cut_seq) and a tombstone (retired). Archive retires what a
// RetentionPolicy asks for (per tag group: keep:N, age:DURATION or up to
// the newest snapshot) in batch transactions that move rows from the hot
// tables to the archive tables and the cut forward together, under one
// archive lock per schema, so a crash loses nothing and a rerun resumes. A
// tag index row leaves with its stream's cut; an event row only when every
// chain it is linked to has cut past it, and every projection checkpointed
// in the schema has passed it (a closing sweep moves the rest later). An
// aggregate stream's cut may not pass its newest snapshot
// (journal.ErrSnapshotRequired), so recovery never needs archived events.
// The journal's ReadStream fails with *journal.ArchivedError below a cut;
// its ReadStreamWithArchive (journal.ArchiveReader) reads through it.
//
// RetireStream sets a stream's tombstone under the stream's append lock;
// the journal's write statement never claims a retired stream's row, so
// every later append naming it fails with *journal.StreamRetiredError.
// Deleted rows return no space to the files: Compact runs VACUUM, or VACUUM
// FULL (an exclusive lock: a maintenance window), and StorageSizes reports
// pg_total_relation_size.
package pgadmin
