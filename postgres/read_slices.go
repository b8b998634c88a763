package postgres

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"

	"github.com/scribe-es/scribe/journal"
)

// sliceTagsSQL is the scan of event_tags_group_slice (migration 9) that a
// sliced read runs: the tags of group $2 in partition $1 after a position,
// gated like every catch-up read, whose slice is one of $5; the expressions
// match the index's exactly so that the planner uses it. The slice test runs
// on the index entries: only the selected events are fetched.
const sliceTagsSQL = `SELECT et.commit_xid, et.seq FROM __S__.event_tags et
	WHERE et.partition = $1 AND split_part(et.tag, ':', 1) = $2
	  AND et.commit_xid >= $3::bigint AND (et.commit_xid, et.seq) > ($3::bigint, $4::bigint)
	  AND et.commit_xid < ` + gateSQL + `
	  AND __S__.scribe_slice(et.tag) = ANY($5::int[])`

// readSlicesSQL returns the gated statement of one page of a sliced read: at
// most limit tag entries, their events once each, in position order.
func (j *Journal) readSlicesSQL(q journal.SliceQuery, after journal.Position, limit int) (string, []any) {
	a := args{q.PartitionOrDefault(), q.Group, i64(after.Commit), i64(after.Seq), q.Slices}
	tags := j.sql(sliceTagsSQL)
	if len(q.Types) > 0 {
		tags += " AND et.type = ANY(" + a.add(q.Types) + "::text[])"
	}
	tags += " ORDER BY et.commit_xid, et.seq LIMIT " + strconv.Itoa(limit)
	return "SELECT " + recordCols + " FROM " + j.t("events") + " e JOIN (SELECT DISTINCT x.commit_xid, x.seq FROM (" + tags +
		") x) m ON e.commit_xid = m.commit_xid AND e.seq = m.seq ORDER BY e.commit_xid, e.seq", a
}

// SubscribeSlices implements journal.SliceSubscriber: catch-up page by page,
// then live, woken like Subscribe. A page ends after PageSize tag entries, so
// an event with several tags in the slices counts several times toward it;
// a page that is not empty is followed by another read at once, the first
// empty one waits for an append.
func (j *Journal) SubscribeSlices(ctx context.Context, q journal.SliceQuery, after journal.Position) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	q.Slices, q.Types = slices.Clone(q.Slices), slices.Clone(q.Types)
	return func(yield func(journal.Record, error) bool) {
		if err := j.checkOpen(); err != nil {
			yield(journal.Record{}, err)
			return
		}
		j.follow(ctx, after, func(after journal.Position) ([]journal.Record, bool, error) {
			stmt, a := j.readSlicesSQL(q, after, j.cfg.PageSize)
			page, err := j.gatedRecords(ctx, "subscribe slices", stmt, a)
			return page, len(page) > 0, err
		}, yield)
	}
}

// ReadSlices implements journal.SliceSubscriber: SubscribeSlices's pages
// until one comes back empty (or limit records were yielded).
func (j *Journal) ReadSlices(ctx context.Context, q journal.SliceQuery, after journal.Position, limit int) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadSlices: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	q.Slices, q.Types = slices.Clone(q.Slices), slices.Clone(q.Types)
	return func(yield func(journal.Record, error) bool) {
		if err := j.checkOpen(); err != nil {
			yield(journal.Record{}, err)
			return
		}
		n := 0
		for {
			stmt, a := j.readSlicesSQL(q, after, j.cfg.PageSize)
			page, err := j.gatedRecords(ctx, "read slices", stmt, a)
			if err != nil {
				yield(journal.Record{}, err)
				return
			}
			if len(page) == 0 {
				return
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
				if n++; limit > 0 && n >= limit {
					return
				}
				after = r.Position
			}
		}
	}
}
