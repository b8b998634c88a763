package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// tagSummarySQL reads a stream's summary (streams primary key).
const tagSummarySQL = `SELECT ` + pgschema.SummaryCols + ` FROM __S__.streams s WHERE s.partition = $1 AND s.tag = $2`

// tagsOfGroupSQL lists the streams of a tag group (streams_group), with the
// times of their first and newest events (primary key lookups per stream,
// never a scan of events).
const tagsOfGroupSQL = `SELECT s.tag, ` + pgschema.SummaryCols + ` FROM __S__.streams s
		WHERE s.partition = $1 AND s.tag_group = $2 AND s.version > 0 ORDER BY s.tag`

// TagSummary returns a stream's version, head hash and first and last
// positions, as its streams row records them.
func (j *Journal) TagSummary(ctx context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	if err := j.checkOpen(); err != nil {
		return journal.TagSummary{}, err
	}
	stream = stream.Normalize()
	out := journal.TagSummary{Stream: stream}
	var sr pgschema.SummaryRow
	err := j.pool.QueryRow(ctx, j.sql(tagSummarySQL), stream.Partition, string(stream.Tag)).Scan(sr.Dest()...)
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
	sr.Fill(&out)
	return out, nil
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
		var sr pgschema.SummaryRow
		if err := rows.Scan(append([]any{&tag}, sr.Dest()...)...); err != nil {
			return nil, j.translate("tags of group", err)
		}
		s := journal.TagSummary{Stream: journal.StreamID{Partition: partition, Tag: journal.Tag(tag)}}
		sr.Fill(&s)
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

// TypeSummaries counts the stored (hot) events per type, ordered by type,
// from indexes only (about one index entry per event, never a table scan).
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
		AND commit_xid < `+pgschema.GateSQL), []any{i64(after.Commit), i64(after.Seq)}, func(rows pgx.Rows) error { return rows.Scan(&n) })
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

const (
	// typeSummariesSQL: the types by a loose index scan of
	// events_type_recorded; per type its count and first and last
	// recorded_at from that index, and its first and last positions from
	// events_partition_type_pos, probed once per partition (the partitions by
	// a loose scan of streams_pkey: every event is in a chain of its
	// partition).
	typeSummariesSQL = `WITH RECURSIVE t AS (
			(SELECT type FROM __S__.events ORDER BY type LIMIT 1)
			UNION ALL
			SELECT (SELECT e.type FROM __S__.events e WHERE e.type > t.type ORDER BY e.type LIMIT 1)
			FROM t WHERE t.type IS NOT NULL),
		p AS (
			(SELECT partition FROM __S__.streams ORDER BY partition LIMIT 1)
			UNION ALL
			SELECT (SELECT s.partition FROM __S__.streams s WHERE s.partition > p.partition ORDER BY s.partition LIMIT 1)
			FROM p WHERE p.partition IS NOT NULL)
		SELECT t.type,
			(SELECT count(*) FROM __S__.events e WHERE e.type = t.type),
			(SELECT min(f.pos) FROM p, LATERAL (SELECT ARRAY[e.commit_xid, e.seq] AS pos FROM __S__.events e
				WHERE e.partition = p.partition AND e.type = t.type ORDER BY e.commit_xid, e.seq LIMIT 1) f WHERE p.partition IS NOT NULL),
			(SELECT max(l.pos) FROM p, LATERAL (SELECT ARRAY[e.commit_xid, e.seq] AS pos FROM __S__.events e
				WHERE e.partition = p.partition AND e.type = t.type ORDER BY e.commit_xid DESC, e.seq DESC LIMIT 1) l WHERE p.partition IS NOT NULL),
			(SELECT min(e.recorded_at) FROM __S__.events e WHERE e.type = t.type),
			(SELECT max(e.recorded_at) FROM __S__.events e WHERE e.type = t.type)
		FROM t WHERE t.type IS NOT NULL ORDER BY t.type`
)

// inspect runs fn in a read-only transaction that may not scan a table
// sequentially where an index can answer (enable_seqscan off): the
// inspection queries an operator runs against a production journal read
// indexes only, however large the event tables are.
func (j *Journal) inspect(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	if err := j.checkOpen(); err != nil {
		return err
	}
	return j.translate(op, pgschema.Inspect(ctx, j.pool, fn))
}
