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
