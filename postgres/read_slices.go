package postgres

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// sliceTagsSQL is the scan of event_tags_group_slice (migration 9) that a
// sliced read runs for one range of slices: the tags of group $2 in
// partition $1 after a position, gated. Its expressions match the index's,
// so that the slice range is an index condition (= ANY would be a filter
// hashing every tag of the group on each table row).
const sliceTagsSQL = `SELECT et.commit_xid, et.seq FROM __S__.event_tags et
	WHERE et.partition = $1 AND split_part(et.tag, ':', 1) = $2
	  AND et.commit_xid >= $3::bigint AND (et.commit_xid, et.seq) > ($3::bigint, $4::bigint)
	  AND et.commit_xid < ` + pgschema.GateSQL

// sliceRanges returns the sorted slices as half-open ranges of consecutive
// slices.
func sliceRanges(sl []int) [][2]int {
	sl = slices.Clone(sl)
	slices.Sort(sl)
	sl = slices.Compact(sl)
	var out [][2]int
	for _, s := range sl {
		if n := len(out); n > 0 && out[n-1][1] == s {
			out[n-1][1] = s + 1
			continue
		}
		out = append(out, [2]int{s, s + 1})
	}
	return out
}

// readSlicesSQL returns the gated statement of one page of a sliced read: at
// most limit tag entries, their events once each, in position order. Each
// range of consecutive slices is one ordered index range scan; several are
// merged.
func (j *Journal) readSlicesSQL(q journal.SliceQuery, after journal.Position, limit int) (string, []any) {
	a := args{q.PartitionOrDefault(), q.Group, i64(after.Commit), i64(after.Seq)}
	lim := " ORDER BY et.commit_xid, et.seq LIMIT " + strconv.Itoa(limit)
	var types string
	if len(q.Types) > 0 {
		types = " AND et.type = ANY(" + a.add(q.Types) + "::text[])"
	}
	slice := j.t("scribe_slice") + "(et.tag)"
	var branches []string
	for _, r := range sliceRanges(q.Slices) {
		branches = append(branches, j.sql(sliceTagsSQL)+types+" AND "+slice+" >= "+a.add(r[0])+"::int AND "+slice+" < "+a.add(r[1])+"::int"+lim)
	}
	tags := branches[0]
	if len(branches) > 1 {
		tags = "SELECT * FROM ((" + strings.Join(branches, ") UNION ALL (") + ")) et" + lim
	}
	return "SELECT " + recordCols + " FROM " + j.t("events") + " e JOIN (SELECT DISTINCT x.commit_xid, x.seq FROM (" + tags +
		") x) m ON e.commit_xid = m.commit_xid AND e.seq = m.seq ORDER BY e.commit_xid, e.seq", a
}

// SubscribeSlices implements journal.SliceSubscriber: catch-up page by page
// (PageSize tag entries a page), then live, woken and ended like Subscribe.
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
		g := &partitionGuard{partition: q.PartitionOrDefault()}
		j.follow(ctx, after, g, func(after journal.Position) ([]journal.Record, bool, error) {
			stmt, a := j.readSlicesSQL(q, after, j.cfg.PageSize)
			page, err := j.gatedRecords(ctx, "subscribe slices", stmt, a, nil)
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
			page, err := j.gatedRecords(ctx, "read slices", stmt, a, nil)
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
