package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// readStreamSQL reads a stream from a version in two branches, each in
// version order and limited (migration 16): the events whose lead tag
// (tags[1]) is the stream's, straight from events by events_lead_stream,
// then the stream's other events (a DCB event of several tags whose first is
// another's) through event_tags_rest joined to events. The join's filter on
// e.tags[1] keeps an event out of the second branch whatever its row's lead
// says (NULL where an older build wrote it). An aggregate's stream is all
// lead rows: the second branch finds nothing, no event costs a probe of
// events_pkey, and the rows come in index order with no sort in the
// database. readStream merges the two runs (streamPage).
const readStreamSQL = `(SELECT ` + recordCols + ` FROM __S__.events e
		WHERE e.partition = $1 AND e.tags[1] = $2 AND e.versions[1] >= $3 ORDER BY e.versions[1] LIMIT $4)
	UNION ALL
	(SELECT ` + recordCols + ` FROM __S__.event_tags et
		JOIN __S__.events e ON e.commit_xid = et.commit_xid AND e.seq = et.seq
		WHERE et.partition = $1 AND et.tag = $2 AND et.version >= $3 AND et.lead IS NOT TRUE
		AND e.tags[1] IS DISTINCT FROM $2 ORDER BY et.version LIMIT $4)`

// streamPage puts a page of tag's records read by readStreamSQL (up to n
// from each branch, each run in version order) in version order and keeps
// the first n: the runs are merged, not sorted (a record is some 300
// bytes), into another page array, and page's goes back to the pool.
func streamPage(page []journal.Record, tag journal.Tag, n int) []journal.Record {
	k := 1
	for k < len(page) && page[k-1].Version(tag) < page[k].Version(tag) {
		k++
	}
	if k < len(page) {
		out := pageArray()
		i, j := 0, k
		for len(out) < n && (i < k || j < len(page)) {
			if j == len(page) || (i < k && page[i].Version(tag) < page[j].Version(tag)) {
				out = append(out, page[i])
				i++
			} else {
				out = append(out, page[j])
				j++
			}
		}
		recycle(page)
		return out
	}
	if len(page) > n {
		clear(page[n:])
		page = page[:n]
	}
	return page
}

// readStreamIndexSQL reads a stream from a version through its tag index
// (event_tags primary key) joined to events: ReadStreamThroughIndex, what
// journal.VerifyStream reads.
const readStreamIndexSQL = `SELECT ` + recordCols + ` FROM __S__.event_tags et
		JOIN __S__.events e ON e.commit_xid = et.commit_xid AND e.seq = et.seq
		WHERE et.partition = $1 AND et.tag = $2 AND et.version >= $3 ORDER BY et.version LIMIT $4`

// readEventSQL reads one event by ID, hot or archived (events_id_key, then
// events_archive_id_key).
const readEventSQL = `SELECT ` + recordCols + ` FROM __S__.events e WHERE e.id = $1
	UNION ALL SELECT ` + recordCols + ` FROM __S__.events_archive e WHERE e.id = $1 LIMIT 1`

// readByCorrelationSQL pages through a correlation ID (events_correlation).
const readByCorrelationSQL = `SELECT ` + recordCols + ` FROM __S__.events e WHERE e.correlation_id = $1
		AND (e.commit_xid, e.seq) > ($2::bigint, $3::bigint) ORDER BY e.commit_xid, e.seq LIMIT $4`

// headSQL finds the newest visible position (events primary key, backwards).
const headSQL = `SELECT commit_xid, seq FROM __S__.events WHERE commit_xid < ` + pgschema.GateSQL + `
		ORDER BY commit_xid DESC, seq DESC LIMIT 1`

// recordCols are the columns scanRecord reads, from events aliased e.
const recordCols = `e.commit_xid, e.seq, e.id, e.partition, e.type, e.schema_version, e.tags, e.versions,
	e.prev_hashes, e.hashes, e.data, e.metadata, e.recorded_at`

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
	if err := backend.DecodeMetadataJSON(meta, &r.Metadata); err != nil {
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
	return queryRecordsInto(ctx, db, j.cfg.Schema, nil, op, q, args...)
}

// querier runs a query: a pool, a connection or a transaction.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// queryRecords runs q (selecting recordCols) on db and collects its records;
// errors are translated for schema.
func queryRecords(ctx context.Context, db querier, schema, op, q string, args ...any) ([]journal.Record, error) {
	return queryRecordsInto(ctx, db, schema, nil, op, q, args...)
}

// queryRecordsInto is queryRecords appending to out.
func queryRecordsInto(ctx context.Context, db querier, schema string, out []journal.Record, op, q string, args ...any) ([]journal.Record, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, translateErr(schema, op, err)
	}
	defer rows.Close()
	var sc recordScanner
	for rows.Next() {
		r, err := sc.scan(rows)
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
		if !backend.SameContent(&r.Event, &events[i]) {
			return nil, fmt.Errorf("%w: event ID %s is already stored with different content (type %q, tags %v); give new events fresh IDs", journal.ErrDuplicateMismatch, r.ID, r.Type, r.Tags)
		}
		out[i] = r
	}
	return out, nil
}

// streamPageFactor is how many times Config.PageSize records a ReadStream
// statement fetches: a whole aggregate of up to 4,096 events (the default)
// in one round trip, which every actor recovery and runtime.State without a
// snapshot reads, at a bounded page of memory.
const streamPageFactor = 8

// pageArrays recycles the arrays of pages reads: pages yields a page's
// records by value, so once it has yielded them the array is its own, and
// the next read appends into it instead of growing a new one by doubling
// (an aggregate's load of a thousand records reads into one array already
// grown, BenchmarkStateReplay). Arrays of more than maxPooledPage records
// are left to the collector.
var pageArrays sync.Pool

const maxPooledPage = 8 * streamPageFactor * 1024

// recycle clears page (the records' data is the callers') and returns its
// array to pageArrays.
func recycle(page []journal.Record) {
	if cap(page) == 0 || cap(page) > maxPooledPage {
		return
	}
	clear(page)
	page = page[:0]
	pageArrays.Put(&page)
}

// pageArray returns an empty page with a recycled array, if there is one.
func pageArray() []journal.Record {
	if p, ok := pageArrays.Get().(*[]journal.Record); ok {
		return *p
	}
	return nil
}

// pages yields records page by page: next appends to buf (empty) the page
// after the last record yielded (nil for the first page), at most n
// records, and returns it. At most limit records in all (0: all).
func (j *Journal) pages(ctx context.Context, limit, size int, next func(last *journal.Record, n int, buf []journal.Record) ([]journal.Record, error)) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		if err := j.checkOpen(); err != nil {
			yield(journal.Record{}, err)
			return
		}
		var (
			last    *journal.Record
			lastRec journal.Record
			page    []journal.Record
		)
		defer func() { recycle(page) }()
		seen := 0
		for {
			n := size
			if limit > 0 && limit-seen < n {
				n = limit - seen
			}
			if err := ctx.Err(); err != nil {
				yield(journal.Record{}, fmt.Errorf("postgres: read: %w", err))
				return
			}
			buf := page[:0]
			if buf == nil {
				buf = pageArray()
			}
			var err error
			if page, err = next(last, n, buf); err != nil {
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
			lastRec = page[len(page)-1]
			last = &lastRec
			clear(page)
		}
	}
}

// ReadStream yields a tag stream's records from fromVersion on, in version
// order, every committed one (not gated), in pages of streamPageFactor
// times Config.PageSize records: a stream that fits is one statement. A read
// starting at or below the stream's cut fails with a *journal.ArchivedError.
func (j *Journal) ReadStream(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return j.readStream(ctx, "ReadStream", readStreamSQL, true, stream, fromVersion, limit)
}

// ReadStreamThroughIndex implements journal.IndexedStreamReader: ReadStream
// in the order of the stream's tag index rows (event_tags), each joined to
// its event, as every read of a stream was before migration 16. It costs a
// probe of events per event; journal.VerifyStream reads through it, so that
// an index row re-pointed at another event breaks the chain.
func (j *Journal) ReadStreamThroughIndex(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return j.readStream(ctx, "ReadStreamThroughIndex", readStreamIndexSQL, false, stream, fromVersion, limit)
}

// readStream is ReadStream with statement stmt (readStreamSQL's parameters,
// before j.sql); twoRuns says it returns two runs to merge (streamPage).
// A read through the index keeps the index's order, which is what it
// checks.
func (j *Journal) readStream(ctx context.Context, op, stmt string, twoRuns bool, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	stream = stream.Normalize()
	if stream.Tag == "" {
		return yieldErr(fmt.Errorf("%w: %s: the stream's tag is empty; name the stream to read", journal.ErrInvalidQuery, op))
	}
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: %s: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, op, limit))
	}
	if fromVersion == 0 {
		fromVersion = 1
	}
	stmt = j.sql(stmt)
	return j.pages(ctx, limit, streamPageFactor*j.cfg.PageSize, func(last *journal.Record, n int, buf []journal.Record) ([]journal.Record, error) {
		from := fromVersion
		if last != nil {
			from = last.Version(stream.Tag) + 1
		}
		page, err := queryRecordsInto(ctx, j.pool, j.cfg.Schema, buf, "read stream", stmt, stream.Partition, string(stream.Tag), i64(from), n)
		if twoRuns {
			page = streamPage(page, stream.Tag, n)
		}
		if err != nil || (len(page) > 0 && page[0].Version(stream.Tag) == from) {
			return page, err
		}
		// The page does not start at from: from is past the stream's end,
		// or archived. Cuts only move forward, so a cut read after the page
		// covers every version the page misses for having been archived.
		if err := j.checkCut(ctx, stream, from); err != nil {
			return nil, err
		}
		if len(page) == 0 && from == 1 {
			// An empty stream: or one whose partition moved away.
			if err := j.movedAway(ctx, stream.Partition); err != nil {
				return nil, err
			}
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
	return j.pages(ctx, opts.Limit, j.cfg.PageSize, func(last *journal.Record, n int, buf []journal.Record) ([]journal.Record, error) {
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
		page, err := j.readPage(ctx, "read", q, b, opts.Backwards, n, buf)
		if err == nil && last == nil && len(page) == 0 && !q.AllPartitions {
			// Nothing matches: or the partition moved away.
			if merr := j.movedAway(ctx, q.PartitionOrDefault()); merr != nil {
				return nil, merr
			}
		}
		return page, err
	})
}

// ReadAll yields every record of every partition after position after, gated
// so that it never shows a position a later commit could undercut.
func (j *Journal) ReadAll(ctx context.Context, after journal.Position, limit int) iter.Seq2[journal.Record, error] {
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadAll: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	q := journal.Query{All: true, AllPartitions: true}
	return j.pages(ctx, limit, j.cfg.PageSize, func(last *journal.Record, n int, buf []journal.Record) ([]journal.Record, error) {
		p := after
		if last != nil {
			p = last.Position
		}
		return j.readPage(ctx, "read all", q, bound{op: ">", pos: p}, false, n, buf)
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

// ReadByCorrelation yields the records whose correlation ID is correlationID;
// see journal.Reader. An empty correlationID yields ErrInvalidQuery.
func (j *Journal) ReadByCorrelation(ctx context.Context, correlationID string) iter.Seq2[journal.Record, error] {
	if correlationID == "" {
		err := fmt.Errorf("%w: ReadByCorrelation: the correlation ID is empty; pass the ID to look up", journal.ErrInvalidQuery)
		return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
	}
	stmt := j.sql(readByCorrelationSQL)
	return j.pages(ctx, 0, j.cfg.PageSize, func(last *journal.Record, n int, buf []journal.Record) ([]journal.Record, error) {
		var p journal.Position
		if last != nil {
			p = last.Position
		}
		return queryRecordsInto(ctx, j.pool, j.cfg.Schema, buf, "read by correlation", stmt, correlationID, i64(p.Commit), i64(p.Seq), n)
	})
}

// ReadTypes yields the records q selects, gated like Read, one page per
// statement; see journal.Reader.
func (j *Journal) ReadTypes(ctx context.Context, q journal.TypeQuery) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
	}
	types := slices.Clone(q.Types)
	op, dir := ">", ""
	if q.Descending {
		op, dir = "<", " DESC"
	}
	return j.pages(ctx, q.Limit, j.cfg.PageSize, func(last *journal.Record, n int, buf []journal.Record) ([]journal.Record, error) {
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
		stmt += " AND e.commit_xid < " + pgschema.GateSQL +
			" ORDER BY e.commit_xid" + dir + ", e.seq" + dir + " LIMIT " + strconv.Itoa(n)
		return j.gatedRecords(ctx, "read types", stmt, a, buf)
	})
}

// yieldErr returns an iterator that yields only err.
func yieldErr(err error) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
}
