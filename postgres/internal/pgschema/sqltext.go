package pgschema

import (
	"time"

	"github.com/scribe-es/scribe/journal"
)

// SQL text that both the journal and the operator tooling run. "__S__."
// stands for the schema's qualifier (Schema.SQL).

// SummaryCols are the columns of a TagSummary (scanned by SummaryRow), from
// streams aliased s: the recorded version, head and positions, the times of
// the first and newest events (one primary key lookup each, in events and,
// for an archived event, events_archive), the cut and the tombstone.
const SummaryCols = `s.version, s.head_hash, s.first_commit, s.first_seq, s.last_commit, s.last_seq,
		coalesce((SELECT e.recorded_at FROM __S__.events e WHERE e.commit_xid = s.first_commit AND e.seq = s.first_seq),
			(SELECT e.recorded_at FROM __S__.events_archive e WHERE e.commit_xid = s.first_commit AND e.seq = s.first_seq)),
		coalesce((SELECT e.recorded_at FROM __S__.events e WHERE e.commit_xid = s.last_commit AND e.seq = s.last_seq),
			(SELECT e.recorded_at FROM __S__.events_archive e WHERE e.commit_xid = s.last_commit AND e.seq = s.last_seq)),
		s.cut_version, s.cut_hash, s.cut_commit, s.cut_seq, s.retired`

// LockSQL takes transaction-scoped advisory locks in the given (sorted) order,
// exclusive or shared per key. unnest yields the array in order, and the
// select list is evaluated row by row, so the locks are taken in key order and
// two appends never wait for each other in a cycle.
const LockSQL = `SELECT CASE WHEN x THEN pg_advisory_xact_lock(k) ELSE pg_advisory_xact_lock_shared(k) END
FROM unnest($1::bigint[], $2::bool[]) AS u(k, x)`

// ArchiveCols are the events columns shared by events and events_archive,
// in recordCols order, unqualified.
const ArchiveCols = `commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes, data, metadata, recorded_at`

// GateSQL is the visibility gate of catch-up reads, set by GateSetSQL in the
// statement just before (same round trip, a later snapshot): only rows with
// commit_xid below it are shown.
const GateSQL = `current_setting('scribe.gate')::bigint`

// GateSetSQL computes the gate and stores it in the session setting
// scribe.gate. With S1 this statement's snapshot, the gate is the smallest of
// S1's xmax, the transaction IDs of every session that holds ROW EXCLUSIVE
// on this schema's events table when the statement reads pg_locks (after S1),
// and the IDs S1 saw running whose lock pg_locks does not show and that are
// still in progress after it was read (pending, below).
// Every append takes that lock before its transaction gets an ID and keeps it
// until its commit has ended. So an append with ID w below the gate was
// assigned before S1 (w < xmax) and, had it still been running when the
// following read's snapshot S2 was taken, would have held the lock while
// pg_locks was read, putting the gate at or below w. Hence every row below the
// gate that will ever commit is visible to S2: no reader is ever shown a
// position that a later commit undercuts. Unlike pg_snapshot_xmin, only
// appends to this journal hold the gate back, not every transaction in the
// cluster.
//
// pending closes a window of that argument: Postgres publishes a new
// transaction ID (snapshots count it as running) a moment before it enters
// the ID's lock in the lock table (AssignTransactionId). An append caught
// there by pg_locks shows its events lock without its ID, and the gate
// would pass over it; its rows, committed later below positions a reader
// had passed, were skipped for good (a subscription missed events about
// once in five runs of 6 leased writers and 4 subscribers,
// TestSubscribersMissNoEventOfConcurrentAppends). So every ID in S1's
// running list that has no lock in pg_locks and is still in progress when
// pg_xact_status is asked (after pg_locks was read) holds the gate at or
// below it: such an ID is in that window (an append's or another
// transaction's, which holds the gate for this one read only), while one
// that ended since is visible to S2 when committed.
//
// pg_locks shows transaction IDs as 32-bit xids, while positions hold the
// 64-bit IDs of pg_current_xact_id() (epoch and xid). Each xid is widened with
// the epoch of the snapshot's xmax, one epoch less when that would put it 2^31
// or more past xmax (a transaction that was running when the snapshot was
// taken has an ID below xmax, within 2^31 of it). An append whose widened ID
// is at or past xmax by less than 2^31 got its ID after the snapshot was taken
// (pg_locks is read after it): it is ignored, since the gate is below its ID
// anyway. Widening it into the previous epoch instead would put the gate 2^32
// below every position, and readers would see nothing new until their next
// wake-up. Comparing the bare 32-bit xid would put the gate below every
// position once the database has used 2^32 transaction IDs, and readers would
// see nothing new while any append is pending.
const GateSetSQL = `WITH l AS MATERIALIZED (
	SELECT pid, locktype, database, relation, mode, granted, transactionid FROM pg_locks
), xm AS MATERIALIZED (
	SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS v
), w AS (
	SELECT ((SELECT v FROM xm) >> 32 << 32) + x.transactionid::text::bigint AS f
	FROM l r JOIN l x ON x.pid = r.pid AND x.locktype = 'transactionid' AND x.granted AND x.mode = 'ExclusiveLock'
	WHERE r.locktype = 'relation' AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND r.relation = '__S__.events'::regclass AND r.mode = 'RowExclusiveLock' AND r.granted
), pending AS (
	SELECT s.xid::text::bigint AS f FROM pg_snapshot_xip(pg_current_snapshot()) AS s(xid)
	WHERE NOT EXISTS (SELECT FROM l x WHERE x.locktype = 'transactionid'
		AND x.transactionid::text::bigint = (s.xid::text::bigint & 4294967295))
	  AND pg_xact_status(s.xid) = 'in progress'
)
SELECT set_config('scribe.gate', least((SELECT v FROM xm),
	(SELECT min(` + GateWriterSQL + `) FROM w), (SELECT min(f) FROM pending))::text, false)`

// GateWriterSQL is what a running append's widened ID f contributes to the
// gate, given xm, the snapshot's xmax (see GateSetSQL): f itself, f one
// epoch less, or nothing (NULL) for an append that got its ID after the
// snapshot was taken.
const GateWriterSQL = `CASE WHEN f >= (SELECT v FROM xm) + 2147483648 THEN f - 4294967296
		WHEN f >= (SELECT v FROM xm) THEN NULL ELSE f END`

// LockEventsSQL marks the transaction as an appender of this journal before it
// gets a transaction ID: catch-up reads gate on the IDs of the sessions holding
// this lock (see GateSetSQL).
const LockEventsSQL = `LOCK TABLE __S__.events IN ROW EXCLUSIVE MODE`

// SummaryRow receives the SummaryCols of one stream.
type SummaryRow struct {
	v, cutVersion          int64
	head, cutHash          []byte
	fc, fs, lc, ls, cc, cs *int64
	fa, la                 *time.Time
	retired                bool
}

// Dest returns the scan destinations of SummaryCols, in order.
func (r *SummaryRow) Dest() []any {
	return []any{&r.v, &r.head, &r.fc, &r.fs, &r.lc, &r.ls, &r.fa, &r.la, &r.cutVersion, &r.cutHash, &r.cc, &r.cs, &r.retired}
}

// Fill sets out's fields (all but Stream) from the row.
func (r *SummaryRow) Fill(out *journal.TagSummary) {
	out.Version = uint64(r.v)
	copy(out.HeadHash[:], r.head)
	if r.fa != nil {
		out.FirstRecordedAt = r.fa.UTC()
	}
	if r.la != nil {
		out.LastRecordedAt = r.la.UTC()
	}
	if r.fc != nil && r.fs != nil {
		out.FirstPosition = journal.Position{Commit: uint64(*r.fc), Seq: uint64(*r.fs)}
	}
	if r.lc != nil && r.ls != nil {
		out.LastPosition = journal.Position{Commit: uint64(*r.lc), Seq: uint64(*r.ls)}
	}
	out.Cut = journal.Checkpoint{Version: uint64(r.cutVersion)}
	copy(out.Cut.Hash[:], r.cutHash)
	if r.cc != nil && r.cs != nil {
		out.Cut.Position = journal.Position{Commit: uint64(*r.cc), Seq: uint64(*r.cs)}
	}
	out.Retired = r.retired
}
