package pgadmin

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// Overview summarizes a journal for an operator's first look.
type Overview struct {
	// Events counts the hot (not archived) events: exactly up to
	// ExactEventsLimit, beyond it the table's row estimate from Postgres's
	// statistics (EventsEstimated is then set). Streams counts the tag
	// streams (every chain, untagged ones included); Partitions lists the
	// partitions that have streams, in byte order.
	Events          uint64
	EventsEstimated bool
	Streams         uint64
	Partitions      []string
	// Types counts the event types of the hot events.
	Types int
	// Head is the newest visible position.
	Head journal.Position
}

// NewestEvent is where one of the newest events is and what it is, without
// its data.
type NewestEvent struct {
	ID         uuid.UUID
	Position   journal.Position
	Partition  string
	Type       string
	Tags       []journal.Tag
	RecordedAt time.Time
}

// The inspection statements. Each reads indexes only (TestReadPathsUseIndexes
// checks their plans with enable_seqscan off, as inspect runs them).
const (
	// overviewCountsSQL counts the events exactly up to $1 (an index-only
	// scan of at most $1 entries), gives the planner's row estimate of the
	// table beside it, and counts the streams.
	overviewCountsSQL = `SELECT (SELECT count(*) FROM (SELECT 1 FROM __S__.events LIMIT $1) x),
		(SELECT reltuples::bigint FROM pg_class WHERE oid = '__S__.events'::regclass),
		(SELECT count(*) FROM __S__.streams)`
	// partitionsSQL is a loose index scan of streams_pkey: one probe per
	// partition, however many streams each has.
	partitionsSQL = `WITH RECURSIVE p AS (
			(SELECT partition FROM __S__.streams ORDER BY partition LIMIT 1)
			UNION ALL
			SELECT (SELECT s.partition FROM __S__.streams s WHERE s.partition > p.partition ORDER BY s.partition LIMIT 1)
			FROM p WHERE p.partition IS NOT NULL)
		SELECT partition FROM p WHERE partition IS NOT NULL`
	// typeCountSQL counts the types by a loose index scan of
	// events_type_recorded.
	typeCountSQL = `WITH RECURSIVE t AS (
			(SELECT type FROM __S__.events ORDER BY type LIMIT 1)
			UNION ALL
			SELECT (SELECT e.type FROM __S__.events e WHERE e.type > t.type ORDER BY e.type LIMIT 1)
			FROM t WHERE t.type IS NOT NULL)
		SELECT count(*) FROM t WHERE type IS NOT NULL`
	countAfterAtMostSQL = `SELECT count(*) FROM (SELECT 1 FROM __S__.events
		WHERE (commit_xid, seq) > ($1::bigint, $2::bigint) ORDER BY commit_xid, seq LIMIT $3) x`
	newestSQL = `SELECT id, commit_xid, seq, partition, type, tags, recorded_at
		FROM __S__.events ORDER BY commit_xid DESC, seq DESC LIMIT $1`
)

// ExactEventsLimit is how many events Overview counts exactly before it
// reports the table's estimate instead.
const ExactEventsLimit = 100_000

// Overview counts the hot events (exactly up to ExactEventsLimit), the
// streams, the partitions and the event types, and reads the feed's head, by
// index reads whose cost does not grow with the events beyond that limit (the
// streams count grows with the streams).
func (a *Admin) Overview(ctx context.Context) (Overview, error) {
	var o Overview
	err := a.inspect(ctx, "overview", func(tx pgx.Tx) error {
		var events, estimate, streams int64
		if err := tx.QueryRow(ctx, a.sql(overviewCountsSQL), ExactEventsLimit).Scan(&events, &estimate, &streams); err != nil {
			return err
		}
		o.Events, o.Streams = uint64(events), uint64(streams)
		if events == ExactEventsLimit {
			o.Events, o.EventsEstimated = uint64(max(estimate, ExactEventsLimit)), true
		}
		rows, err := tx.Query(ctx, a.sql(partitionsSQL))
		if err != nil {
			return err
		}
		if o.Partitions, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		return tx.QueryRow(ctx, a.sql(typeCountSQL)).Scan(&o.Types)
	})
	if err != nil {
		return Overview{}, err
	}
	if o.Head, err = a.journal.Head(ctx); err != nil {
		return Overview{}, err
	}
	return o, nil
}

// CountAfterAtMost counts the events after position after, stopping at
// limit (it returns limit when there are at least that many): a projection's
// lag read through the primary key's index, in time bounded by limit rather
// than by the table.
func (a *Admin) CountAfterAtMost(ctx context.Context, after journal.Position, limit int) (uint64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: CountAfterAtMost limit %d: give a positive limit", journal.ErrInvalidQuery, limit)
	}
	var n int64
	err := a.inspect(ctx, "count after", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, a.sql(countAfterAtMostSQL), pgschema.I64(after.Commit), pgschema.I64(after.Seq), limit).Scan(&n)
	})
	return uint64(n), err
}

// Newest returns the n newest hot events, newest first, by a backward scan
// of the primary key's index. An event whose transaction commits later at a
// lower position (see Read's gating) can appear below events listed before.
func (a *Admin) Newest(ctx context.Context, n int) ([]NewestEvent, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: Newest n %d: give a positive number", journal.ErrInvalidQuery, n)
	}
	var out []NewestEvent
	err := a.inspect(ctx, "newest events", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, a.sql(newestSQL), n)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e      NewestEvent
				c, s   int64
				tags   []string
				record time.Time
			)
			if err := rows.Scan(&e.ID, &c, &s, &e.Partition, &e.Type, &tags, &record); err != nil {
				return err
			}
			e.Position = journal.Position{Commit: uint64(c), Seq: uint64(s)}
			e.RecordedAt = record.UTC()
			for _, t := range tags {
				e.Tags = append(e.Tags, journal.Tag(t))
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}
