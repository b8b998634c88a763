package pgadmin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// moveEventCols are the columns a move copies of an event, hot or archived
// (its position is the target's).
const moveEventCols = `commit_xid, seq, id, type, schema_version, tags, versions, prev_hashes, hashes,
	data, metadata, correlation_id, recorded_at`

// moveReadSQL reads the next batch of a partition's events after a
// position, hot and archived alike, in position order (one statement, one
// snapshot: an event the archiver moves meanwhile is read once, from one
// table or the other). extra is a further condition on both tables.
func moveReadSQL(extra string) string {
	return `SELECT * FROM (
	(SELECT false AS archived, ` + moveEventCols + `, NULL::timestamptz AS archived_at FROM __S__.events
		WHERE partition = $1 AND (commit_xid, seq) > ($2, $3)` + extra + ` ORDER BY commit_xid, seq LIMIT $4)
	UNION ALL
	(SELECT true, ` + moveEventCols + `, archived_at FROM __S__.events_archive
		WHERE partition = $1 AND (commit_xid, seq) > ($2, $3)` + extra + ` ORDER BY commit_xid, seq LIMIT $4)
	) u ORDER BY commit_xid, seq LIMIT $4`
}

// moveInsertSQL writes a batch of copied events on the target in one
// statement, at new positions in the source's order (the transaction's ID,
// one sequence number per event in batch order, as writeSQL draws them):
// each event and its tag index rows in events and event_tags, or, archived,
// in events_archive and event_tags_archive (an event is archived only once
// all its streams' cuts passed it, so all its tag rows are archived). It
// records the move's progress with them and returns the rows it wrote.
const moveInsertSQL = `WITH x AS MATERIALIZED (
	SELECT pg_current_xact_id()::text::bigint AS xid
), ev_in AS MATERIALIZED (
	SELECT u.*, nextval('__S__.events_seq') AS seq
	FROM unnest($2::uuid[], $3::text[], $4::int[], $5::bytea[], $6::bytea[], $7::text[], $8::timestamptz[],
		$9::bytea[], $10::bytea[], $11::bool[], $12::timestamptz[])
		WITH ORDINALITY AS u(id, type, sv, data, metadata, corr, recorded_at, prev_hashes, hashes, archived, archived_at, ord)
), tg_in AS MATERIALIZED (
	SELECT * FROM unnest($13::int[], $14::text[], $15::bigint[], $19::bool[]) WITH ORDINALITY AS t(ev, tag, version, lead, k)
), tg_agg AS (
	SELECT ev, array_agg(tag ORDER BY k) AS tags, array_agg(version ORDER BY k) AS versions FROM tg_in GROUP BY ev
), hot AS (
	INSERT INTO __S__.events (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
		data, metadata, correlation_id, recorded_at)
	SELECT (SELECT xid FROM x), u.seq, u.id, $1, u.type, u.sv, coalesce(g.tags, '{}'), coalesce(g.versions, '{}'),
		u.prev_hashes, u.hashes, u.data, u.metadata, u.corr, u.recorded_at
	FROM ev_in u LEFT JOIN tg_agg g ON g.ev = u.ord WHERE NOT u.archived
	RETURNING 1
), arch AS (
	INSERT INTO __S__.events_archive (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
		data, metadata, correlation_id, recorded_at, archived_at)
	SELECT (SELECT xid FROM x), u.seq, u.id, $1, u.type, u.sv, coalesce(g.tags, '{}'), coalesce(g.versions, '{}'),
		u.prev_hashes, u.hashes, u.data, u.metadata, u.corr, u.recorded_at, u.archived_at
	FROM ev_in u LEFT JOIN tg_agg g ON g.ev = u.ord WHERE u.archived
	RETURNING 1
), hot_tags AS (
	INSERT INTO __S__.event_tags (partition, tag, version, commit_xid, seq, type, lead)
	SELECT $1, t.tag, t.version, (SELECT xid FROM x), u.seq, u.type, t.lead FROM tg_in t JOIN ev_in u ON u.ord = t.ev WHERE NOT u.archived
	RETURNING 1
), arch_tags AS (
	INSERT INTO __S__.event_tags_archive (partition, tag, version, commit_xid, seq, type)
	SELECT $1, t.tag, t.version, (SELECT xid FROM x), u.seq, u.type FROM tg_in t JOIN ev_in u ON u.ord = t.ev WHERE u.archived
	RETURNING 1
), progress AS (
	UPDATE __S__.partition_moves SET last_commit = $16, last_seq = $17, copied = copied + $18, updated_at = now()
	WHERE partition = $1
	RETURNING 1
)
SELECT (SELECT count(*) FROM hot) + (SELECT count(*) FROM arch), (SELECT count(*) FROM hot_tags) + (SELECT count(*) FROM arch_tags),
	(SELECT count(*) FROM progress)`

// movedEvent is one event read from the source.
type movedEvent struct {
	archived       bool
	commit, seq    int64
	id             [16]byte
	typ            string
	sv             int32
	tags           []string
	versions       []int64
	prev, hashes   []byte
	data, metadata []byte
	corr           *string
	recordedAt     time.Time
	archivedAt     *time.Time
}

// sourceQuerier is the source connection or transaction a copy reads with.
type sourceQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// copyEvents copies the partition's events after the recorded progress, in
// the source's position order, one transaction per batch on the target
// (which also records the progress): positions on the target keep the
// source's order. Gated (the pre-copy, while the partition takes appends),
// it reads only below the source's read gate (pgschema.GateSetSQL), below which no
// later commit can add an event, and stops once a batch comes back short.
// Otherwise (after the fence) it holds the partition's advisory lock on the
// source exclusively, which waits for the partition's appends in flight and
// holds new ones off (every append takes it shared, before its transaction
// gets an ID), reads to the end and checks that nothing was left behind:
// an append that comes later lands after the copied positions.
func (mv *mover) copyEvents(ctx context.Context, gated bool) error {
	p := mv.m.Partition
	step := MoveCopy
	var src sourceQuerier
	read := mv.srcSQL(moveReadSQL(""))
	if gated {
		step = MovePrecopy
		read = mv.srcSQL(moveReadSQL(` AND commit_xid < ` + pgschema.GateSQL))
		conn, err := mv.m.Source.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		src = conn
	} else {
		tx, err := mv.m.Source.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, mv.srcS.LockKey(pgschema.LockPartition, p, "")); err != nil {
			return err
		}
		src = tx
	}
	reported := false
	for {
		if gated {
			// The gate is a session setting: set and read on one connection.
			if _, err := src.Exec(ctx, mv.srcSQL(pgschema.GateSetSQL)); err != nil {
				return err
			}
		}
		batch, err := readMoved(ctx, src, read, p, mv.rec.lastCommit, mv.rec.lastSeq, mv.m.BatchSize)
		if err != nil {
			return err
		}
		if len(batch) > 0 {
			if err := mv.insertMoved(ctx, batch); err != nil {
				return err
			}
			mv.progress(step)
			reported = true
		}
		if len(batch) < mv.m.BatchSize {
			break
		}
	}
	if !reported {
		mv.progress(step) // nothing to copy: the step still reports once
	}
	if gated {
		return nil // caught up with the gate: the rest is the cut-over's
	}
	_, total, err := mv.digest(ctx, src)
	if err != nil {
		return err
	}
	if total != mv.rec.copied {
		return refusedf("the source holds %d events of the partition and the move copied %d of them, though nothing can be appended to it now: events were added below the copy's position or deleted by hand; inspect the source", total, mv.rec.copied)
	}
	mv.total = uint64(total)
	return nil
}

func readMoved(ctx context.Context, src sourceQuerier, read, p string, lastCommit, lastSeq int64, n int) ([]movedEvent, error) {
	rows, err := src.Query(ctx, read, p, lastCommit, lastSeq, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var batch []movedEvent
	for rows.Next() {
		var r movedEvent
		if err := rows.Scan(&r.archived, &r.commit, &r.seq, &r.id, &r.typ, &r.sv, &r.tags, &r.versions, &r.prev, &r.hashes,
			&r.data, &r.metadata, &r.corr, &r.recordedAt, &r.archivedAt); err != nil {
			return nil, err
		}
		batch = append(batch, r)
	}
	return batch, rows.Err()
}

// insertMoved writes a batch on the target in one transaction with the
// move's progress (moveInsertSQL).
func (mv *mover) insertMoved(ctx context.Context, batch []movedEvent) error {
	p := mv.m.Partition
	n := len(batch)
	var (
		ids          = make([]pgtype.UUID, n)
		types        = make([]string, n)
		svs          = make([]int32, n)
		data, meta   = make([][]byte, n), make([][]byte, n)
		corr         = make([]*string, n)
		recorded     = make([]time.Time, n)
		prev, hashes = make([][]byte, n), make([][]byte, n)
		archived     = make([]bool, n)
		archivedAt   = make([]*time.Time, n)
		tEv          []int32
		tTag         []string
		tVersion     []int64
		tLead        []bool
		nArchived    int
	)
	for i, r := range batch {
		ids[i] = pgtype.UUID{Bytes: r.id, Valid: true}
		types[i], svs[i], data[i], meta[i], corr[i], recorded[i] = r.typ, r.sv, r.data, r.metadata, r.corr, r.recordedAt
		prev[i], hashes[i], archived[i], archivedAt[i] = r.prev, r.hashes, r.archived, r.archivedAt
		if len(r.tags) != len(r.versions) {
			return refusedf("event %x on the source has %d tags and %d versions; verify the source (scribe verify)", r.id, len(r.tags), len(r.versions))
		}
		for k, tag := range r.tags {
			tEv, tTag, tVersion = append(tEv, int32(i+1)), append(tTag, tag), append(tVersion, r.versions[k])
			// The event's first tag is its lead tag (migration 16).
			tLead = append(tLead, k == 0)
		}
		if r.archived {
			nArchived++
		}
	}
	last := batch[n-1]
	tx, err := mv.m.Target.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// As an append does, take ROW EXCLUSIVE on events before the
	// transaction gets its ID: the read gate then holds readers below the
	// copy until it commits.
	if _, err := tx.Exec(ctx, mv.dstSQL(pgschema.LockEventsSQL)); err != nil {
		return err
	}
	var events, tags, progress int64
	if err := tx.QueryRow(ctx, mv.dstSQL(moveInsertSQL), p, ids, types, svs, data, meta, corr, recorded, prev, hashes, archived, archivedAt,
		tEv, tTag, tVersion, last.commit, last.seq, int64(n), tLead).Scan(&events, &tags, &progress); err != nil {
		return err
	}
	if events != int64(n) || tags != int64(len(tTag)) || progress != 1 {
		return refusedf("the copy wrote %d events, %d tag rows and %d progress records on the target, want %d, %d and 1: something on the target (a trigger, a rule) changes what is written; inspect it", events, tags, progress, n, len(tTag))
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	mv.rec.lastCommit, mv.rec.lastSeq = last.commit, last.seq
	mv.rec.copied += int64(n)
	mv.report.Events += uint64(n)
	mv.report.Archived += uint64(nArchived)
	return nil
}

// digest reads what only grows on the source while the partition is
// fenced (see sourceDigest), and its total of events, hot and archived.
func (mv *mover) digest(ctx context.Context, q rowQuerier) (sourceDigest, int64, error) {
	var d sourceDigest
	var hot int64
	err := q.QueryRow(ctx, mv.srcSQL(`SELECT
			(SELECT coalesce(sum(cut_version), 0)::bigint FROM __S__.streams WHERE partition = $1),
			(SELECT count(*) FROM __S__.events_archive WHERE partition = $1),
			(SELECT count(*) FROM __S__.streams WHERE partition = $1 AND retired),
			(SELECT count(*) FROM __S__.events WHERE partition = $1)`), mv.m.Partition).Scan(&d.cuts, &d.archived, &d.retired, &hot)
	if err != nil {
		return d, 0, fmt.Errorf("counting the partition on the source: %w", err)
	}
	return d, hot + d.archived, nil
}
