package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
)

// readStreamSQL reads a stream from a version (event_tags primary key).
const readStreamSQL = `SELECT ` + recordCols + ` FROM __S__.event_tags et
		JOIN __S__.events e ON e.commit_xid = et.commit_xid AND e.seq = et.seq
		WHERE et.partition = $1 AND et.tag = $2 AND et.version >= $3 ORDER BY et.version LIMIT $4`

// readEventSQL reads one event by ID, hot or archived (events_id_key, then
// events_archive_id_key).
const readEventSQL = `SELECT ` + recordCols + ` FROM __S__.events e WHERE e.id = $1
	UNION ALL SELECT ` + recordCols + ` FROM __S__.events_archive e WHERE e.id = $1 LIMIT 1`

// readByCorrelationSQL pages through a correlation ID (events_correlation).
const readByCorrelationSQL = `SELECT ` + recordCols + ` FROM __S__.events e WHERE e.correlation_id = $1
		AND (e.commit_xid, e.seq) > ($2::bigint, $3::bigint) ORDER BY e.commit_xid, e.seq LIMIT $4`

// readByTypesSQL pages through types in a time range (events_type_recorded).
const readByTypesSQL = `SELECT ` + recordCols + ` FROM __S__.events e WHERE e.type = ANY($1::text[])
		AND e.recorded_at >= $2 AND e.recorded_at < $3
		AND (e.commit_xid, e.seq) > ($4::bigint, $5::bigint) ORDER BY e.commit_xid, e.seq LIMIT $6`

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

// headSQL finds the newest visible position (events primary key, backwards).
const headSQL = `SELECT commit_xid, seq FROM __S__.events WHERE commit_xid < ` + gateSQL + `
		ORDER BY commit_xid DESC, seq DESC LIMIT 1`

// recordCols are the columns scanRecord reads, from events aliased e.
const recordCols = `e.commit_xid, e.seq, e.id, e.partition, e.type, e.schema_version, e.tags, e.versions,
	e.prev_hashes, e.hashes, e.data, e.metadata, e.recorded_at`

// gateSQL is the visibility gate of catch-up reads, set by gateSetSQL in the
// statement just before (same round trip, a later snapshot): only rows with
// commit_xid below it are shown.
const gateSQL = `current_setting('scribe.gate')::bigint`

// gateSetSQL computes the gate and stores it in the session setting
// scribe.gate. With S1 this statement's snapshot, the gate is the smallest of
// S1's xmax and the transaction IDs of every session that holds ROW EXCLUSIVE
// on this schema's events table when the statement reads pg_locks (after S1).
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
// pg_locks shows transaction IDs as 32-bit xids, while positions hold the
// 64-bit IDs of pg_current_xact_id() (epoch and xid). Each xid is widened with
// the epoch of the snapshot's xmax, one epoch less when that would put it at or
// past xmax (a running transaction's ID is always below xmax, and within 2^31
// of it). Comparing the bare 32-bit xid would put the gate below every
// position once the database has used 2^32 transaction IDs, and readers would
// see nothing new while any append is pending.
const gateSetSQL = `WITH l AS MATERIALIZED (
	SELECT pid, locktype, database, relation, mode, granted, transactionid FROM pg_locks
), xm AS MATERIALIZED (
	SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS v
), w AS (
	SELECT ((SELECT v FROM xm) >> 32 << 32) + x.transactionid::text::bigint AS f
	FROM l r JOIN l x ON x.pid = r.pid AND x.locktype = 'transactionid' AND x.granted AND x.mode = 'ExclusiveLock'
	WHERE r.locktype = 'relation' AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND r.relation = '__S__.events'::regclass AND r.mode = 'RowExclusiveLock' AND r.granted
)
SELECT set_config('scribe.gate', least((SELECT v FROM xm),
	(SELECT min(CASE WHEN f >= (SELECT v FROM xm) THEN f - 4294967296 ELSE f END) FROM w))::text, false)`

// rangeScanSQL keeps the planner on ordered index range scans for the
// following statement of the same batch (one implicit transaction, so the
// local setting ends with it). A page read is ORDER BY position LIMIT n over
// an index in that order, and the range scan is always right; but on a table
// whose statistics lag a bulk load (autovacuum has not analyzed it yet) the
// planner expects a handful of rows and picks a bitmap scan that reads and
// sorts every row after the bound, each page: 2x slower catch-up over 10,000
// events, quadratic over millions.
const rangeScanSQL = `SELECT set_config('enable_bitmapscan', 'off', true)`

// gated runs stmt (which uses gateSQL) right after gateSetSQL, in one round
// trip; scan reads its rows.
func (j *Journal) gated(ctx context.Context, op, stmt string, args []any, scan func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	b.Queue(j.gateSetStatement())
	b.Queue(rangeScanSQL)
	b.Queue(stmt, args...)
	br := j.pool.SendBatch(ctx, b)
	err := func() error {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return j.translate(op, err)
}

// gatedRecords runs a gated statement selecting recordCols.
func (j *Journal) gatedRecords(ctx context.Context, op, stmt string, args []any) ([]journal.Record, error) {
	var out []journal.Record
	err := j.gated(ctx, op, stmt, args, func(rows pgx.Rows) error {
		r, err := scanRecord(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

func scanRecord(rows pgx.Rows) (journal.Record, error) {
	var (
		r                  journal.Record
		commit, seq        int64
		partition          string
		sv                 int32
		tags               []string
		versions           []int64
		prevHashes, hashes []byte
		data, meta         []byte
		recordedAt         time.Time
	)
	if err := rows.Scan(&commit, &seq, &r.ID, &partition, &r.Type, &sv, &tags, &versions, &prevHashes, &hashes, &data, &meta, &recordedAt); err != nil {
		return journal.Record{}, err
	}
	r.Position = journal.Position{Commit: uint64(commit), Seq: uint64(seq)}
	r.SchemaVersion = int(sv)
	// The tags column holds the event's chain tags (journal.ChainTags): its
	// tags, or the one reserved tag of its untagged chain, which is a link
	// but not a tag of the event.
	if len(tags) > 0 {
		if len(versions) != len(tags) || len(prevHashes) != 32*len(tags) || len(hashes) != 32*len(tags) {
			return journal.Record{}, fmt.Errorf("postgres: event %s has %d tags but %d versions and %d/%d hash bytes", r.ID, len(tags), len(versions), len(prevHashes), len(hashes))
		}
		untagged := len(tags) == 1 && journal.Tag(tags[0]).IsReserved()
		if !untagged {
			r.Tags = make([]journal.Tag, len(tags))
		}
		r.Links = make([]journal.StreamLink, len(tags))
		for i, t := range tags {
			if !untagged {
				r.Tags[i] = journal.Tag(t)
			}
			l := &r.Links[i]
			l.Tag = journal.Tag(t)
			l.Version = uint64(versions[i])
			copy(l.PrevHash[:], prevHashes[32*i:])
			copy(l.Hash[:], hashes[32*i:])
		}
	}
	r.Data = json.RawMessage(data)
	if err := journal.DecodeMetadataJSON(meta, &r.Metadata); err != nil {
		return journal.Record{}, fmt.Errorf("postgres: event %s: decode metadata: %w", r.ID, err)
	}
	if r.Metadata.Partition == "" {
		r.Metadata.Partition = partition
	}
	if !r.Metadata.CreatedAt.IsZero() {
		r.Metadata.CreatedAt = r.Metadata.CreatedAt.UTC()
	}
	r.RecordedAt = recordedAt.UTC()
	return r, nil
}

// queryRecords runs q and collects its records.
func (j *Journal) queryRecords(ctx context.Context, db querier, op, q string, args ...any) ([]journal.Record, error) {
	return queryRecords(ctx, db, j.cfg.Schema, op, q, args...)
}

// querier runs a query: a pool, a connection or a transaction.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// queryRecords runs q (selecting recordCols) on db and collects its records;
// errors are translated for schema.
func queryRecords(ctx context.Context, db querier, schema, op, q string, args ...any) ([]journal.Record, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, translateErr(schema, op, err)
	}
	defer rows.Close()
	var out []journal.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, translateErr(schema, op, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, translateErr(schema, op, err)
	}
	return out, nil
}

// recordsByID returns the stored records of events, in their order, after
// checking that each stored event has the same content (a retried append);
// otherwise ErrDuplicateMismatch.
func (j *Journal) recordsByID(ctx context.Context, db querier, events []journal.Event) ([]journal.Record, error) {
	ids := make([]uuid.UUID, len(events))
	for i := range events {
		ids[i] = events[i].ID
	}
	recs, err := j.queryRecords(ctx, db, "append: read stored duplicates",
		j.sql(`SELECT `+recordCols+` FROM __S__.events e WHERE e.id = ANY($1::uuid[])
			UNION ALL SELECT `+recordCols+` FROM __S__.events_archive e WHERE e.id = ANY($1::uuid[])`), ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]journal.Record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]journal.Record, len(events))
	for i := range events {
		r, ok := byID[events[i].ID]
		if !ok {
			return nil, fmt.Errorf("%w: event %s vanished while its duplicate was read", journal.ErrDuplicateMismatch, events[i].ID)
		}
		if !journal.SameContent(&r.Event, &events[i]) {
			return nil, fmt.Errorf("%w: event ID %s is already stored with different content (type %q, tags %v); give new events fresh IDs", journal.ErrDuplicateMismatch, r.ID, r.Type, r.Tags)
		}
		out[i] = r
	}
	return out, nil
}

// args collects positional SQL arguments.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

func i64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// bound is a position bound of a read: pos compared with op (">", ">=", "<", "<=");
// op "" means unbounded.
type bound struct {
	op  string
	pos journal.Position
}

func (b bound) sql(a *args, alias string) string {
	if b.op == "" {
		return ""
	}
	c := a.add(i64(b.pos.Commit))
	// The plain range on commit_xid is implied by the row comparison; it
	// gives the planner an estimate it can use.
	rng := ">="
	if b.op[0] == '<' {
		rng = "<="
	}
	return fmt.Sprintf(" AND %[1]scommit_xid %[5]s %[3]s::bigint AND (%[1]scommit_xid, %[1]sseq) %[2]s (%[3]s::bigint, %[4]s::bigint)", alias, b.op, c, a.add(i64(b.pos.Seq)), rng)
}

// matchSQL returns a query of the (commit_xid, seq) of events matching q within
// b, gated or not, each branch ordered and limited (limit 0: none), so the union
// of branches holds the first limit matches. Every branch is one index range
// scan: a tag item scans event_tags by its first tag, a type-only item scans
// events by each type, Query.All scans events by partition (or by position).
func (j *Journal) matchSQL(q journal.Query, b bound, gate bool, desc bool, limit int, a *args) string {
	m, _ := j.matchBranches(q, b, gate, desc, limit, a, false)
	return m
}

// branchCount is how many branches matchBranches builds for q.
func branchCount(q journal.Query) int {
	if q.All {
		return 1
	}
	n := 0
	for _, it := range q.Items {
		if len(it.Tags) > 0 {
			n++
		} else {
			n += len(it.Types)
		}
	}
	return n
}

// matchBranches builds matchSQL's branches. With full and a single branch, the
// branch selects recordCols itself (joining events), so the caller can use it
// as the whole read; single reports that.
func (j *Journal) matchBranches(q journal.Query, b bound, gate bool, desc bool, limit int, a *args, full bool) (string, bool) {
	single := full && branchCount(q) == 1
	evCols, etCols := "e.commit_xid, e.seq", "et.commit_xid, et.seq"
	if single {
		evCols, etCols = recordCols, recordCols
	}
	dir := ""
	if desc {
		dir = " DESC"
	}
	lim := ""
	if limit > 0 {
		lim = " LIMIT " + strconv.Itoa(limit)
	}
	gateCond := func(alias string) string {
		if !gate {
			return ""
		}
		return " AND " + alias + "commit_xid < " + gateSQL
	}
	order := func(alias string) string {
		return fmt.Sprintf(" ORDER BY %[1]scommit_xid%[2]s, %[1]sseq%[2]s", alias, dir)
	}
	part := q.PartitionOrDefault()
	var branches []string
	switch {
	case q.All && q.AllPartitions:
		branches = append(branches, "SELECT "+evCols+" FROM "+j.t("events")+" e WHERE true"+b.sql(a, "e.")+gateCond("e.")+order("e.")+lim)
	case q.All:
		branches = append(branches, "SELECT "+evCols+" FROM "+j.t("events")+" e WHERE e.partition = "+a.add(part)+b.sql(a, "e.")+gateCond("e.")+order("e.")+lim)
	default:
		pp := a.add(part)
		for _, it := range q.Items {
			if len(it.Tags) > 0 {
				var sb strings.Builder
				sb.WriteString("SELECT " + etCols + " FROM " + j.t("event_tags") + " et")
				if len(it.Tags) > 1 || single {
					sb.WriteString(" JOIN " + j.t("events") + " e ON e.commit_xid = et.commit_xid AND e.seq = et.seq")
				}
				sb.WriteString(" WHERE et.partition = " + pp + " AND et.tag = " + a.add(string(it.Tags[0])))
				sb.WriteString(b.sql(a, "et.") + gateCond("et."))
				if len(it.Types) > 0 {
					sb.WriteString(" AND et.type = ANY(" + a.add(it.Types) + "::text[])")
				}
				if len(it.Tags) > 1 {
					rest := make([]string, len(it.Tags)-1)
					for k, t := range it.Tags[1:] {
						rest[k] = string(t)
					}
					sb.WriteString(" AND e.tags @> " + a.add(rest) + "::text[]")
				}
				sb.WriteString(order("et.") + lim)
				branches = append(branches, sb.String())
				continue
			}
			for _, ty := range it.Types {
				branches = append(branches, "SELECT "+evCols+" FROM "+j.t("events")+" e WHERE e.partition = "+pp+
					" AND e.type = "+a.add(ty)+b.sql(a, "e.")+gateCond("e.")+order("e.")+lim)
			}
		}
	}
	if single {
		return branches[0], true
	}
	for i, br := range branches {
		branches[i] = "(" + br + ")"
	}
	return strings.Join(branches, " UNION "), false
}

// conditionQuery returns the statement that reports whether an event matching
// c's query exists after c.After. It is not gated: it runs after the append
// holds its locks, when every conflicting append has committed or waits.
func (j *Journal) conditionQuery(c *journal.AppendCondition) (string, []any) {
	var a args
	m := j.matchSQL(c.FailIfEventsMatch, bound{op: ">", pos: c.After}, false, false, 1, &a)
	return "SELECT EXISTS (" + m + ")", a
}

// readPage returns up to limit records matching q within b, gated, in
// ascending (or descending) position order.
func (j *Journal) readPage(ctx context.Context, op string, q journal.Query, b bound, desc bool, limit int) ([]journal.Record, error) {
	stmt, a := j.readPageSQL(q, b, desc, limit)
	return j.gatedRecords(ctx, op, stmt, a)
}

// readPageSQL returns the gated statement of readPage.
func (j *Journal) readPageSQL(q journal.Query, b bound, desc bool, limit int) (string, []any) {
	var a args
	m, single := j.matchBranches(q, b, true, desc, limit, &a, true)
	if single {
		return m, a
	}
	dir := ""
	if desc {
		dir = " DESC"
	}
	stmt := "SELECT " + recordCols + " FROM " + j.t("events") + " e JOIN (" + m + ") m ON e.commit_xid = m.commit_xid AND e.seq = m.seq" +
		" ORDER BY e.commit_xid" + dir + ", e.seq" + dir
	if limit > 0 {
		stmt += " LIMIT " + strconv.Itoa(limit)
	}
	return stmt, a
}

// pages yields records page by page: next returns the page after the last
// record yielded (nil for the first page). At most limit records (0: all).
func (j *Journal) pages(ctx context.Context, limit int, next func(last *journal.Record, n int) ([]journal.Record, error)) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		if err := j.checkOpen(); err != nil {
			yield(journal.Record{}, err)
			return
		}
		var last *journal.Record
		seen := 0
		for {
			n := j.cfg.PageSize
			if limit > 0 && limit-seen < n {
				n = limit - seen
			}
			if err := ctx.Err(); err != nil {
				yield(journal.Record{}, fmt.Errorf("postgres: read: %w", err))
				return
			}
			page, err := next(last, n)
			if err != nil {
				yield(journal.Record{}, err)
				return
			}
			for i := range page {
				if !yield(page[i], nil) {
					return
				}
			}
			seen += len(page)
			if len(page) < n || (limit > 0 && seen >= limit) {
				return
			}
			last = &page[len(page)-1]
		}
	}
}

// ReadStream yields a tag stream's records from fromVersion on, in version
// order (which is also position order). It sees every committed event of the
// stream: a stream's events are appended one transaction at a time. It reads
// only the hot tables: a read that would start at or below the stream's cut
// fails with a *journal.ArchivedError (see checkCut); ReadStreamWithArchive
// reads the archive too.
func (j *Journal) ReadStream(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	stream = stream.Normalize()
	if stream.Tag == "" {
		return yieldErr(fmt.Errorf("%w: ReadStream: the stream's tag is empty; name the stream to read", journal.ErrInvalidQuery))
	}
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadStream: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	if fromVersion == 0 {
		fromVersion = 1
	}
	stmt := j.sql(readStreamSQL)
	return j.pages(ctx, limit, func(last *journal.Record, n int) ([]journal.Record, error) {
		from := fromVersion
		if last != nil {
			from = last.Version(stream.Tag) + 1
		}
		page, err := j.queryRecords(ctx, j.pool, "read stream", stmt, stream.Partition, string(stream.Tag), i64(from), n)
		if err != nil || (len(page) > 0 && page[0].Version(stream.Tag) == from) {
			return page, err
		}
		// The page does not start at from: from is past the stream's end,
		// or archived. Cuts only move forward, so a cut read after the page
		// covers every version the page misses for having been archived.
		if err := j.checkCut(ctx, stream, from); err != nil {
			return nil, err
		}
		return page, nil
	})
}

// Read yields the records matching q (a DCB read) with gap-free visibility:
// only positions below which no transaction is in flight.
func (j *Journal) Read(ctx context.Context, q journal.Query, opts journal.ReadOptions) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
	}
	if opts.Limit < 0 {
		return func(yield func(journal.Record, error) bool) {
			yield(journal.Record{}, fmt.Errorf("%w: ReadOptions.Limit is %d; use 0 for no limit or a positive limit", journal.ErrInvalidQuery, opts.Limit))
		}
	}
	return j.pages(ctx, opts.Limit, func(last *journal.Record, n int) ([]journal.Record, error) {
		var b bound
		switch {
		case last != nil && opts.Backwards:
			b = bound{op: "<", pos: last.Position}
		case last != nil:
			b = bound{op: ">", pos: last.Position}
		case opts.Backwards && !opts.From.IsZero():
			b = bound{op: "<=", pos: opts.From}
		case !opts.Backwards && !opts.From.IsZero():
			b = bound{op: ">=", pos: opts.From}
		}
		return j.readPage(ctx, "read", q, b, opts.Backwards, n)
	})
}

// ReadAll yields every record of every partition after position after, gated
// so that it never shows a position a later commit could undercut.
func (j *Journal) ReadAll(ctx context.Context, after journal.Position, limit int) iter.Seq2[journal.Record, error] {
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadAll: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	q := journal.Query{All: true, AllPartitions: true}
	return j.pages(ctx, limit, func(last *journal.Record, n int) ([]journal.Record, error) {
		p := after
		if last != nil {
			p = last.Position
		}
		return j.readPage(ctx, "read all", q, bound{op: ">", pos: p}, false, n)
	})
}

// ReadEvent returns the record with the given ID, hot or archived, or
// ErrNotFound.
func (j *Journal) ReadEvent(ctx context.Context, id uuid.UUID) (journal.Record, error) {
	if err := j.checkOpen(); err != nil {
		return journal.Record{}, err
	}
	recs, err := j.queryRecords(ctx, j.pool, "read event", j.sql(readEventSQL), id)
	if err != nil {
		return journal.Record{}, err
	}
	if len(recs) == 0 {
		return journal.Record{}, fmt.Errorf("%w: no event with ID %s", journal.ErrNotFound, id)
	}
	return recs[0], nil
}

// Head returns the newest visible position (gated like ReadAll).
func (j *Journal) Head(ctx context.Context) (journal.Position, error) {
	if err := j.checkOpen(); err != nil {
		return journal.Position{}, err
	}
	var p journal.Position
	err := j.gated(ctx, "head", j.sql(headSQL), nil, func(rows pgx.Rows) error {
		var c, s int64
		if err := rows.Scan(&c, &s); err != nil {
			return err
		}
		p = journal.Position{Commit: uint64(c), Seq: uint64(s)}
		return nil
	})
	if err != nil {
		return journal.Position{}, err
	}
	return p, nil
}

// ReadByCorrelation yields the records whose correlation ID is correlationID.
func (j *Journal) ReadByCorrelation(ctx context.Context, correlationID string) iter.Seq2[journal.Record, error] {
	stmt := j.sql(readByCorrelationSQL)
	return j.pages(ctx, 0, func(last *journal.Record, n int) ([]journal.Record, error) {
		var p journal.Position
		if last != nil {
			p = last.Position
		}
		return j.queryRecords(ctx, j.pool, "read by correlation", stmt, correlationID, i64(p.Commit), i64(p.Seq), n)
	})
}

// ReadTypes yields the records q selects, gated like Read (a cursor never
// skips an event that commits later at a lower position), one page per
// statement; see journal.Reader. The time range uses events_type_recorded.
func (j *Journal) ReadTypes(ctx context.Context, q journal.TypeQuery) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
	}
	types := slices.Clone(q.Types)
	op, dir := ">", ""
	if q.Descending {
		op, dir = "<", " DESC"
	}
	return j.pages(ctx, q.Limit, func(last *journal.Record, n int) ([]journal.Record, error) {
		cursor := q.Cursor
		if last != nil {
			cursor = last.Position
		}
		var a args
		stmt := "SELECT " + recordCols + " FROM " + j.t("events") + " e WHERE e.type = ANY(" + a.add(types) + "::text[])"
		if !q.From.IsZero() {
			stmt += " AND e.recorded_at >= " + a.add(q.From)
		}
		if !q.To.IsZero() {
			stmt += " AND e.recorded_at < " + a.add(q.To)
		}
		if !cursor.IsZero() {
			stmt += bound{op: op, pos: cursor}.sql(&a, "e.")
		}
		stmt += " AND e.commit_xid < " + gateSQL +
			" ORDER BY e.commit_xid" + dir + ", e.seq" + dir + " LIMIT " + strconv.Itoa(n)
		return j.gatedRecords(ctx, "read types", stmt, a)
	})
}

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

// yieldErr returns an iterator that yields only err.
func yieldErr(err error) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
}
