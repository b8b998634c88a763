package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
)

// summaryCols are the columns of a TagSummary (scanned by summaryRow), from
// streams aliased s: the recorded version, head and positions, the times of
// the first and newest events (one primary key lookup each, in events and,
// for an archived event, events_archive), the cut and the tombstone.
const summaryCols = `s.version, s.head_hash, s.first_commit, s.first_seq, s.last_commit, s.last_seq,
		coalesce((SELECT e.recorded_at FROM __S__.events e WHERE e.commit_xid = s.first_commit AND e.seq = s.first_seq),
			(SELECT e.recorded_at FROM __S__.events_archive e WHERE e.commit_xid = s.first_commit AND e.seq = s.first_seq)),
		coalesce((SELECT e.recorded_at FROM __S__.events e WHERE e.commit_xid = s.last_commit AND e.seq = s.last_seq),
			(SELECT e.recorded_at FROM __S__.events_archive e WHERE e.commit_xid = s.last_commit AND e.seq = s.last_seq)),
		s.cut_version, s.cut_hash, s.cut_commit, s.cut_seq, s.retired`

// tagSummarySQL reads a stream's summary (streams primary key).
const tagSummarySQL = `SELECT ` + summaryCols + ` FROM __S__.streams s WHERE s.partition = $1 AND s.tag = $2`

// tagsOfGroupSQL lists the streams of a tag group (streams_group), with the
// times of their first and newest events (primary key lookups per stream,
// never a scan of events).
const tagsOfGroupSQL = `SELECT s.tag, ` + summaryCols + ` FROM __S__.streams s
		WHERE s.partition = $1 AND s.tag_group = $2 AND s.version > 0 ORDER BY s.tag`

// TagSummary returns a stream's version, head hash and first and last
// positions, as its streams row records them.
func (j *Journal) TagSummary(ctx context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	if err := j.checkOpen(); err != nil {
		return journal.TagSummary{}, err
	}
	stream = stream.Normalize()
	out := journal.TagSummary{Stream: stream}
	var sr summaryRow
	err := j.pool.QueryRow(ctx, j.sql(tagSummarySQL), stream.Partition, string(stream.Tag)).Scan(sr.dest()...)
	if err == pgx.ErrNoRows {
		// An unknown stream: or one whose partition moved away.
		if merr := j.movedAway(ctx, stream.Partition); merr != nil {
			return journal.TagSummary{}, merr
		}
		return out, nil
	}
	if err != nil {
		return journal.TagSummary{}, j.translate("tag summary", err)
	}
	sr.fill(&out)
	return out, nil
}

// summaryRow receives the summaryCols of one stream.
type summaryRow struct {
	v, cutVersion          int64
	head, cutHash          []byte
	fc, fs, lc, ls, cc, cs *int64
	fa, la                 *time.Time
	retired                bool
}

// dest returns the scan destinations of summaryCols, in order.
func (r *summaryRow) dest() []any {
	return []any{&r.v, &r.head, &r.fc, &r.fs, &r.lc, &r.ls, &r.fa, &r.la, &r.cutVersion, &r.cutHash, &r.cc, &r.cs, &r.retired}
}

// fill sets out's fields (all but Stream) from the row.
func (r *summaryRow) fill(out *journal.TagSummary) {
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

// TagsOfGroup lists the streams (with at least one event) of a partition's tag
// group, ordered by tag (byte order).
func (j *Journal) TagsOfGroup(ctx context.Context, partition, group string) ([]journal.TagSummary, error) {
	if err := j.checkOpen(); err != nil {
		return nil, err
	}
	if partition == "" {
		partition = journal.DefaultPartition
	}
	rows, err := j.pool.Query(ctx, j.sql(tagsOfGroupSQL), partition, group)
	if err != nil {
		return nil, j.translate("tags of group", err)
	}
	defer rows.Close()
	var out []journal.TagSummary
	for rows.Next() {
		var tag string
		var sr summaryRow
		if err := rows.Scan(append([]any{&tag}, sr.dest()...)...); err != nil {
			return nil, j.translate("tags of group", err)
		}
		s := journal.TagSummary{Stream: journal.StreamID{Partition: partition, Tag: journal.Tag(tag)}}
		sr.fill(&s)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, j.translate("tags of group", err)
	}
	if len(out) == 0 {
		// No such streams: or the partition moved away.
		if merr := j.movedAway(ctx, partition); merr != nil {
			return nil, merr
		}
	}
	return out, nil
}

// TypeSummaries counts the stored (hot) events per type, ordered by type
// (byte order). It reads indexes only (see typeSummariesSQL): its cost grows
// with the number of events, about one index entry each, and never scans the
// table.
func (j *Journal) TypeSummaries(ctx context.Context) ([]journal.TypeSummary, error) {
	var out []journal.TypeSummary
	err := j.inspect(ctx, "type summaries", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, j.sql(typeSummariesSQL))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s journal.TypeSummary
			var n int64
			var first, last []int64
			if err := rows.Scan(&s.Type, &n, &first, &last, &s.FirstRecordedAt, &s.LastRecordedAt); err != nil {
				return err
			}
			s.Count = uint64(n)
			if len(first) == 2 && len(last) == 2 {
				s.FirstPosition = journal.Position{Commit: uint64(first[0]), Seq: uint64(first[1])}
				s.LastPosition = journal.Position{Commit: uint64(last[0]), Seq: uint64(last[1])}
			}
			s.FirstRecordedAt, s.LastRecordedAt = s.FirstRecordedAt.UTC(), s.LastRecordedAt.UTC()
			out = append(out, s)
		}
		return rows.Err()
	})
	return out, err
}

// CountAfter counts the visible events (gated like ReadAll) after position after.
func (j *Journal) CountAfter(ctx context.Context, after journal.Position) (uint64, error) {
	if err := j.checkOpen(); err != nil {
		return 0, err
	}
	var n int64
	err := j.gated(ctx, "count", j.sql(`SELECT count(*) FROM __S__.events WHERE (commit_xid, seq) > ($1::bigint, $2::bigint)
		AND commit_xid < `+gateSQL), []any{i64(after.Commit), i64(after.Seq)}, func(rows pgx.Rows) error { return rows.Scan(&n) })
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}
