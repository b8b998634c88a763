package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
)

// writeSQL claims the streams and inserts the events of a batch's accepted
// appends in one statement. It draws the positions (the transaction ID and
// one sequence number per event, in append order), raises each stream's
// version, head and first/last positions — rechecking its version, the
// position of its newest event where the decision knew one, lease holder,
// epoch, release flag and node session by the database clock (each node
// session named once per statement, in live, not once per stream; a scalar
// subquery, so it stays a primary-key probe however many rows nodes has) — and
// aborts through fence_check unless every stream checked out. A retired
// stream (tombstone) never checks out: its row is never claimed, and since
// the row stays forever it is never created again either. A stream
// without a row is created only when nothing is expected of it, and only when
// events are written to it (an expectation of version 0 on a stream without a
// row holds without creating one). Every event has at least one chain tag
// (journal.ChainTags: its tags, or its untagged chain), so every event has a
// tg_agg row; write checks the inserted counts, so an event without one could
// not be dropped silently. The unique index on events.id rejects a stored
// event ID; the fence also rejects an archived one (events_archive's ID index,
// one probe per event), so the batch is read and decided again and the
// append is answered as a duplicate, as for a hot one.
const writeSQL = `WITH x AS MATERIALIZED (
	SELECT pg_current_xact_id()::text::bigint AS xid
), ev_in AS MATERIALIZED (
	SELECT u.*, nextval('__S__.events_seq') AS seq
	FROM unnest($10::uuid[], $11::text[], $12::text[], $13::int[], $14::bytea[], $15::bytea[], $16::text[],
		$17::timestamptz[], $18::bytea[], $19::bytea[])
		WITH ORDINALITY AS u(id, partition, type, sv, data, metadata, corr, recorded_at, prev_hashes, hashes, ord)
), tg_in AS MATERIALIZED (
	SELECT * FROM unnest($20::int[], $21::text[], $22::bigint[], $25::bool[]) WITH ORDINALITY AS t(ev, tag, version, lead, k)
), span AS (
	SELECT u.partition, t.tag, min(u.seq) AS first_seq, max(u.seq) AS last_seq
	FROM tg_in t JOIN ev_in u ON u.ord = t.ev GROUP BY u.partition, t.tag
), c AS MATERIALIZED (
	SELECT c.*, sp.first_seq, sp.last_seq, (SELECT xid FROM x) AS xid
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::bytea[],
		$23::bigint[], $24::bigint[])
		AS c(partition, tag, n, before, node, inc, epoch, head, was_commit, was_seq)
	LEFT JOIN span sp ON sp.partition = c.partition AND sp.tag = c.tag
), live AS MATERIALIZED (
	SELECT cn.node AS node_id, cn.inc AS incarnation
	FROM (SELECT DISTINCT c.node, c.inc FROM c WHERE c.node IS NOT NULL) cn
	WHERE (SELECT true FROM __S__.nodes n WHERE n.node_id = cn.node AND n.incarnation = cn.inc
		AND NOT n.closed AND n.expires_at > clock_timestamp())
), claimed AS (
	UPDATE __S__.streams s SET version = s.version + c.n,
		head_hash = CASE WHEN c.n > 0 THEN c.head ELSE s.head_hash END,
		first_commit = CASE WHEN s.first_commit IS NULL AND c.n > 0 THEN c.xid ELSE s.first_commit END,
		first_seq = coalesce(s.first_seq, c.first_seq),
		last_commit = CASE WHEN c.n > 0 THEN c.xid ELSE s.last_commit END,
		last_seq = coalesce(c.last_seq, s.last_seq)
	FROM c
	WHERE s.partition = c.partition AND s.tag = c.tag AND s.version = c.before AND NOT s.retired
	  AND (c.was_commit IS NULL OR (s.last_commit = c.was_commit AND s.last_seq = c.was_seq))
	  AND (c.node IS NULL OR (
		s.lease_node = c.node AND s.lease_incarnation = c.inc AND s.epoch = c.epoch AND NOT s.released
		AND EXISTS (SELECT 1 FROM live l WHERE l.node_id = c.node AND l.incarnation = c.inc)))
	RETURNING 1
), created AS (
	INSERT INTO __S__.streams (partition, tag, version, head_hash, first_commit, first_seq, last_commit, last_seq)
	SELECT c.partition, c.tag, c.n, c.head, c.xid, c.first_seq, c.xid, c.last_seq FROM c
	WHERE c.before = 0 AND c.node IS NULL AND c.n > 0
	  AND NOT EXISTS (SELECT 1 FROM __S__.streams s WHERE s.partition = c.partition AND s.tag = c.tag)
	ON CONFLICT DO NOTHING
	RETURNING 1
), absent AS (
	SELECT 1 FROM c WHERE c.before = 0 AND c.node IS NULL AND c.n = 0
	  AND NOT EXISTS (SELECT 1 FROM __S__.streams s WHERE s.partition = c.partition AND s.tag = c.tag)
), fence AS (
	SELECT __S__.fence_check((SELECT count(*) FROM claimed) + (SELECT count(*) FROM created) + (SELECT count(*) FROM absent) = $9
		AND NOT EXISTS (SELECT 1 FROM __S__.events_archive a WHERE a.id = ANY($10::uuid[]))) AS ok
), tg_agg AS (
	SELECT ev, array_agg(tag ORDER BY k) AS tags, array_agg(version ORDER BY k) AS versions FROM tg_in GROUP BY ev
), ev AS (
	INSERT INTO __S__.events (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
		data, metadata, correlation_id, recorded_at)
	SELECT (SELECT xid FROM x), u.seq, u.id, u.partition, u.type, u.sv, g.tags, g.versions,
		u.prev_hashes, u.hashes, u.data, u.metadata, u.corr, u.recorded_at
	FROM ev_in u JOIN tg_agg g ON g.ev = u.ord WHERE (SELECT ok FROM fence)
	RETURNING 1
), et AS (
	INSERT INTO __S__.event_tags (partition, tag, version, commit_xid, seq, type, lead)
	SELECT u.partition, t.tag, t.version, (SELECT xid FROM x), u.seq, u.type, t.lead
	FROM tg_in t JOIN ev_in u ON u.ord = t.ev WHERE (SELECT ok FROM fence)
	RETURNING 1
)
SELECT (SELECT xid FROM x), ARRAY(SELECT seq FROM ev_in ORDER BY ord), (SELECT count(*) FROM ev), (SELECT count(*) FROM et)`

// assertSQL turns a condition query (SELECT EXISTS …) into an assertion that
// aborts the transaction when an event matches: a direct attempt cannot look
// at the answer before its write goes out.
func (j *Journal) assertSQL(cond string) string {
	return "SELECT " + j.s + ".fence_check(NOT (" + cond + "))"
}

// implied reports that condition c of an append in partition needs no
// statement of its own in a direct attempt: every item of its query has a tag
// whose stream the batch claims (so the write statement checks the stream's
// version and the position of its newest event, both as of the batch's
// start) and whose newest event is at or before c.After. Every event matching
// the item carries that tag, so while the stream is unchanged none can lie
// after c.After; if it changed, the write is fenced and the batch is read and
// decided again with the condition evaluated by a query. The batch's own
// earlier events are matched against the condition in decide, as always.
func implied(c *journal.AppendCondition, partition string, st *batchState) bool {
	q := c.FailIfEventsMatch
	if q.All || len(q.Items) == 0 || q.PartitionOrDefault() != partition {
		return false
	}
	for _, it := range q.Items {
		ok := false
		for _, t := range it.Tags {
			s := st.keys[streamKey{partition, string(t)}]
			if s != nil && s.claimed && !s.last.IsZero() && !s.last.After(c.After) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// fenceFailed reports the write statement's fence_check error or a unique
// violation (a stored event ID, or a tag version written by another writer).
func fenceFailed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "SF001" || pgErr.Code == "23505")
}

// write sends the write statement (and COMMIT unless hold) for d's accepted
// records, after BEGIN, the locks and the condition assertions when direct,
// and fills in the records' positions. fenced reports that the database
// found a stream, lease or event ID other than decided on: the transaction
// was rolled back and nothing was written. Any other error is final for the
// accepted appends (ErrOutcomeUnknown when COMMIT may have run).
func (j *Journal) write(ctx context.Context, conn *pgxpool.Conn, batch []*appendReq, st *batchState, d *decision, direct, hold bool) (fenced bool, err error) {
	args, err := writeArgs(st, d.accepted)
	if err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return false, err
	}
	if j.hooks != nil && j.hooks.afterChecks != nil {
		if err := j.hooks.afterChecks(ctx, conn); err != nil {
			return false, j.fatalErr(err, false)
		}
	}
	b := &pgx.Batch{}
	nExec := 0
	if direct {
		nExec = j.prefix(b, batch)
		for _, r := range batch {
			if c := r.opts.Condition; c != nil {
				if implied(c, r.partition, st) {
					j.stats.implied.Add(1)
					continue
				}
				q, a := j.conditionQuery(c)
				b.Queue(j.assertSQL(q), a...)
				nExec++
			}
		}
	}
	b.Queue(j.sql(writeSQL), args...)
	commitInPipeline := !hold && (j.hooks == nil || j.hooks.beforeCommit == nil)
	if commitInPipeline {
		b.Queue("COMMIT")
	}
	var (
		xid      int64
		seqs     []int64
		ne, nt   int64
		wantTags int
	)
	for i := range d.accepted {
		wantTags += len(d.accepted[i].Links)
	}
	sent := time.Now()
	defer func() { j.stats.writeNanos.Add(int64(time.Since(sent))) }()
	br := conn.SendBatch(ctx, b)
	writeDone := false
	err = func() error {
		for range nExec {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(&xid, &seqs, &ne, &nt); err != nil {
			return err
		}
		if int(ne) != len(d.accepted) || int(nt) != wantTags || len(seqs) != len(d.accepted) {
			return fmt.Errorf("postgres: append: wrote %d events and %d tag rows, want %d and %d", ne, nt, len(d.accepted), wantTags)
		}
		writeDone = true
		if commitInPipeline {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && !commitInPipeline && !hold {
		if j.hooks != nil && j.hooks.beforeCommit != nil {
			err = j.hooks.beforeCommit(ctx, conn)
		}
		if err == nil {
			_, err = conn.Exec(ctx, "COMMIT")
		}
		if err != nil && isConnErr(err) {
			return false, j.fatalErr(err, !pgconn.SafeToRetry(err))
		}
	}
	if err != nil {
		if !isConnErr(err) {
			_, rerr := conn.Exec(ctx, "ROLLBACK")
			if !writeDone && fenceFailed(err) && rerr == nil {
				return true, nil
			}
			return false, j.translate("append", err)
		}
		var pgErr *pgconn.PgError
		definite := !commitInPipeline || (!writeDone && (errors.As(err, &pgErr) || pgconn.SafeToRetry(err)))
		return false, j.fatalErr(err, !definite)
	}
	for i := range d.accepted {
		d.accepted[i].Position = journal.Position{Commit: uint64(xid), Seq: uint64(seqs[i])}
	}
	return false, nil
}

// writeArgs returns writeSQL's arguments for the accepted records. The
// arrays are pgtype.FlatArray values of types pgx encodes in binary directly
// (a []uuid.UUID would go through uuid's driver.Valuer, text and back, at
// several allocations per element).
func writeArgs(st *batchState, accepted []journal.Record) ([]any, error) {
	n := len(accepted)
	var (
		cPart, cTag  pgtype.FlatArray[string]
		cN, cBefore  pgtype.FlatArray[int64]
		cNode        pgtype.FlatArray[pgtype.Text]
		cInc, cEpoch pgtype.FlatArray[pgtype.Int8]
		cHead        pgtype.FlatArray[[]byte]
		cLast, cSeq  pgtype.FlatArray[pgtype.Int8]
		eID          = make(pgtype.FlatArray[pgtype.UUID], n)
		ePart, eType = make(pgtype.FlatArray[string], n), make(pgtype.FlatArray[string], n)
		eSV          = make(pgtype.FlatArray[int32], n)
		eData, eMeta = make(pgtype.FlatArray[[]byte], n), make(pgtype.FlatArray[[]byte], n)
		eCorr        = make(pgtype.FlatArray[pgtype.Text], n)
		eAt          = make(pgtype.FlatArray[time.Time], n)
		ePrev, eHash = make(pgtype.FlatArray[[]byte], n), make(pgtype.FlatArray[[]byte], n)
		tEv          = make(pgtype.FlatArray[int32], 0, n)
		tTag         = make(pgtype.FlatArray[string], 0, n)
		tVersion     = make(pgtype.FlatArray[int64], 0, n)
		tLead        = make(pgtype.FlatArray[bool], 0, n)
	)
	for k, s := range st.keys {
		// Every stream an accepted append claims is checked, also one it
		// only expects a version of: the decision may rest on this
		// journal's memory of the stream's head, which another process's
		// append makes stale.
		if !s.claimed {
			continue
		}
		cPart, cTag = append(cPart, k.partition), append(cTag, k.tag)
		cN, cBefore = append(cN, s.n), append(cBefore, int64(s.before))
		h := s.head
		cHead = append(cHead, h[:])
		if s.last.IsZero() {
			cLast, cSeq = append(cLast, pgtype.Int8{}), append(cSeq, pgtype.Int8{})
		} else {
			cLast = append(cLast, pgtype.Int8{Int64: int64(s.last.Commit), Valid: true})
			cSeq = append(cSeq, pgtype.Int8{Int64: int64(s.last.Seq), Valid: true})
		}
		if s.lease != nil {
			cNode = append(cNode, pgtype.Text{String: s.lease.NodeID, Valid: true})
			cInc = append(cInc, pgtype.Int8{Int64: int64(s.lease.Incarnation), Valid: true})
			cEpoch = append(cEpoch, pgtype.Int8{Int64: int64(s.lease.Epoch), Valid: true})
		} else {
			cNode, cInc, cEpoch = append(cNode, pgtype.Text{}), append(cInc, pgtype.Int8{}), append(cEpoch, pgtype.Int8{})
		}
	}
	const hashLen = len(journal.Hash{})
	for i := range accepted {
		rec := &accepted[i]
		// The partition has its own column (scanRecord fills it in): the
		// metadata JSON leaves it out, 22 bytes less per event.
		md := rec.Metadata
		md.Partition = ""
		meta := backend.AppendMetadataJSON(nil, &md)
		if len(meta) == 0 {
			// AppendMetadataJSON appends nothing where json.Marshal fails (a
			// CreatedAt with no RFC 3339 form); json.Marshal gives the error.
			_, err := json.Marshal(md)
			return nil, fmt.Errorf("postgres: append: encode metadata: %w", err)
		}
		// One buffer holds both hash runs of the event.
		hb := make([]byte, 2*len(rec.Links)*hashLen)
		prev, hashes := hb[:0:len(rec.Links)*hashLen], hb[len(rec.Links)*hashLen:len(rec.Links)*hashLen]
		for k, l := range rec.Links {
			prev = append(prev, l.PrevHash[:]...)
			hashes = append(hashes, l.Hash[:]...)
			tEv = append(tEv, int32(i+1))
			tTag = append(tTag, string(l.Tag))
			tVersion = append(tVersion, int64(l.Version))
			// The first link is the event's lead tag (events.tags[1],
			// migration 16): its stream reads it without the join.
			tLead = append(tLead, k == 0)
		}
		if c := rec.Metadata.CorrelationID; c != "" {
			eCorr[i] = pgtype.Text{String: c, Valid: true}
		}
		eID[i] = pgtype.UUID{Bytes: rec.ID, Valid: true}
		ePart[i], eType[i], eSV[i] = rec.Metadata.Partition, rec.Type, int32(rec.SchemaVersion)
		eData[i], eMeta[i], eAt[i] = rec.Data, meta, rec.RecordedAt
		ePrev[i], eHash[i] = prev, hashes
	}
	return []any{cPart, cTag, cN, cBefore, cNode, cInc, cEpoch, cHead, len(cPart),
		eID, ePart, eType, eSV, eData, eMeta, eCorr, eAt, ePrev, eHash, tEv, tTag, tVersion, cLast, cSeq, tLead}, nil
}
