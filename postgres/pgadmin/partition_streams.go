package pgadmin

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// streamState is a stream's row as a move copies and compares it.
type streamState struct {
	version, cut  int64
	head, cutHash []byte
	retired       bool
	retiredAt     *time.Time
}

// streamStatesSQL reads the partition's streams with events.
const streamStatesSQL = `SELECT tag, version, head_hash, cut_version, cut_hash, retired, retired_at
	FROM __S__.streams WHERE partition = $1 AND version > 0`

func readStreamStates(ctx context.Context, q querier, sql, partition string) (map[string]streamState, error) {
	rows, err := q.Query(ctx, sql, partition)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]streamState{}
	for rows.Next() {
		var tag string
		var s streamState
		if err := rows.Scan(&tag, &s.version, &s.head, &s.cut, &s.cutHash, &s.retired, &s.retiredAt); err != nil {
			return nil, err
		}
		out[tag] = s
	}
	return out, rows.Err()
}

// archiveTagRowsSQL moves the target's tag index rows at or below each
// stream's cut ($2 tags, $3 cuts) to the archive.
const archiveTagRowsSQL = `WITH m AS (
	DELETE FROM __S__.event_tags t USING unnest($2::text[], $3::bigint[]) AS c(tag, cut)
	WHERE t.partition = $1 AND t.tag = c.tag AND t.version <= c.cut
	RETURNING t.partition, t.tag, t.version, t.commit_xid, t.seq, t.type
)
INSERT INTO __S__.event_tags_archive (partition, tag, version, commit_xid, seq, type) SELECT * FROM m`

// tagPosSQL is the target position of version %s of stream h.tag, from
// whichever tag index holds it, as ARRAY[commit_xid, seq].
func tagPosSQL(version string) string {
	return `(SELECT ARRAY[x.commit_xid, x.seq] FROM (
		SELECT commit_xid, seq FROM __S__.event_tags WHERE partition = $1 AND tag = h.tag AND version = ` + version + `
		UNION ALL
		SELECT commit_xid, seq FROM __S__.event_tags_archive WHERE partition = $1 AND tag = h.tag AND version = ` + version + `) x LIMIT 1)`
}

// upsertStreamsSQL writes the target's stream rows from the source's
// heads, cuts and tombstones, with the target's positions of each stream's
// first and newest events and of its cut. A cut the target's own archiver
// moved further stays; a tombstone stays.
var upsertStreamsSQL = `WITH h AS (
	SELECT * FROM unnest($2::text[], $3::bigint[], $4::bytea[], $5::bigint[], $6::bytea[], $7::bool[], $8::timestamptz[])
		AS h(tag, version, head, cut, cut_hash, retired, retired_at)
), pos AS (
	SELECT h.*, ` + tagPosSQL("1") + ` AS f, ` + tagPosSQL("h.version") + ` AS l, ` + tagPosSQL("h.cut") + ` AS c FROM h
)
INSERT INTO __S__.streams AS s (partition, tag, version, head_hash, first_commit, first_seq, last_commit, last_seq,
	cut_version, cut_hash, cut_commit, cut_seq, retired, retired_at)
SELECT $1, tag, version, head, f[1], f[2], l[1], l[2], cut, cut_hash, c[1], c[2], retired, retired_at
FROM pos WHERE f IS NOT NULL AND l IS NOT NULL AND (cut = 0 OR c IS NOT NULL)
ON CONFLICT (partition, tag) DO UPDATE SET version = excluded.version, head_hash = excluded.head_hash,
	first_commit = excluded.first_commit, first_seq = excluded.first_seq,
	last_commit = excluded.last_commit, last_seq = excluded.last_seq,
	cut_hash = CASE WHEN excluded.cut_version >= s.cut_version THEN excluded.cut_hash ELSE s.cut_hash END,
	cut_commit = CASE WHEN excluded.cut_version >= s.cut_version THEN excluded.cut_commit ELSE s.cut_commit END,
	cut_seq = CASE WHEN excluded.cut_version >= s.cut_version THEN excluded.cut_seq ELSE s.cut_seq END,
	cut_version = greatest(s.cut_version, excluded.cut_version),
	retired = s.retired OR excluded.retired, retired_at = coalesce(s.retired_at, excluded.retired_at)`

// copyStreams copies, in one transaction on the target, the partition's
// streams as the source holds them now: heads (version and chain head;
// first and last positions are the target's), cuts (the tag index rows at
// or below each cut are archived, the cut's position is the target's),
// tombstones, which events are archived, and snapshots; and records the
// source's digest it copied. Idempotent: it runs again whenever the source
// changed since.
func (mv *mover) copyStreams(ctx context.Context) error {
	p := mv.m.Partition
	digest, _, err := mv.digest(ctx, mv.m.Source) // first: what is read after is at least as new
	if err != nil {
		return err
	}
	heads, err := readStreamStates(ctx, mv.m.Source, mv.srcSQL(streamStatesSQL), p)
	if err != nil {
		return err
	}
	var (
		tags, cutTags         []string
		versions, cuts, cutVs []int64
		hs, cutHashes         [][]byte
		retired               []bool
		retiredAt             []pgtype.Timestamptz
		tombstones            int
	)
	for tag, h := range heads {
		tags, versions, hs, cuts, cutHashes, retired = append(tags, tag), append(versions, h.version), append(hs, h.head), append(cuts, h.cut), append(cutHashes, h.cutHash), append(retired, h.retired)
		at := pgtype.Timestamptz{}
		if h.retiredAt != nil {
			at = pgtype.Timestamptz{Time: *h.retiredAt, Valid: true}
		}
		retiredAt = append(retiredAt, at)
		if h.cut > 0 {
			cutTags, cutVs = append(cutTags, tag), append(cutVs, h.cut)
		}
		if h.retired {
			tombstones++
		}
	}
	tx, err := mv.m.Target.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if len(cutTags) > 0 {
		if _, err := tx.Exec(ctx, mv.dstSQL(archiveTagRowsSQL), p, cutTags, cutVs); err != nil {
			return fmt.Errorf("archiving the tag index below the cuts: %w", err)
		}
	}
	ct, err := tx.Exec(ctx, mv.dstSQL(upsertStreamsSQL), p, tags, versions, hs, cuts, cutHashes, retired, retiredAt)
	if err != nil {
		return fmt.Errorf("writing the streams: %w", err)
	}
	if n := ct.RowsAffected(); n != int64(len(heads)) {
		return refusedf("the target lacks copied events of %d of the partition's %d streams (their first, newest or cut version is not in its tag index): the copy is incomplete; inspect the target", int64(len(heads))-n, len(heads))
	}
	if err := mv.syncArchive(ctx, tx, digest.archived); err != nil {
		return err
	}
	snaps, err := mv.copySnapshots(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, mv.dstSQL(`UPDATE __S__.partition_moves SET synced_cuts = $2, synced_archived = $3, synced_retired = $4, updated_at = now() WHERE partition = $1`),
		p, digest.cuts, digest.archived, digest.retired); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	mv.rec.synced = digest
	mv.report.Streams, mv.report.Tombstones, mv.report.Snapshots = len(heads), tombstones, snaps
	return nil
}

// copySnapshots copies the partition's snapshots in tx on the target.
func (mv *mover) copySnapshots(ctx context.Context, tx pgx.Tx) (int, error) {
	rows, err := mv.m.Source.Query(ctx, mv.srcSQL(`SELECT tag, version, schema_version, state, created_at FROM __S__.snapshots WHERE partition = $1`), mv.m.Partition)
	if err != nil {
		return 0, err
	}
	b := &pgx.Batch{}
	for rows.Next() {
		var (
			tag     string
			version int64
			sv      int32
			state   []byte
			created time.Time
		)
		if err := rows.Scan(&tag, &version, &sv, &state, &created); err != nil {
			rows.Close()
			return 0, err
		}
		b.Queue(mv.dstSQL(`INSERT INTO __S__.snapshots (partition, tag, version, schema_version, state, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`), mv.m.Partition, tag, version, sv, state, created)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return 0, err
		}
	}
	return b.Len(), nil
}

// fullyCutHotSQL lists the target's hot events of the partition that every
// stream they are linked to has cut at or past (fullyCutSQL without the
// feed floor): the only ones the source may hold archived.
const fullyCutHotSQL = `SELECT e.id FROM __S__.events e WHERE e.partition = $1
	AND NOT EXISTS (SELECT 1 FROM unnest(e.tags, e.versions) u(tag, version)
		LEFT JOIN __S__.streams s ON s.partition = e.partition AND s.tag = u.tag
		WHERE u.version > coalesce(s.cut_version, 0))`

// archiveEventsSQL moves the target's hot events $2 to its archive, each
// with the time the source archived it ($3).
const archiveEventsSQL = `WITH m AS (
	DELETE FROM __S__.events e USING unnest($2::uuid[], $3::timestamptz[]) AS a(id, at)
	WHERE e.partition = $1 AND e.id = a.id
	RETURNING e.commit_xid, e.seq, e.id, e.partition, e.type, e.schema_version, e.tags, e.versions, e.prev_hashes, e.hashes,
		e.data, e.metadata, e.correlation_id, e.recorded_at, a.at
)
INSERT INTO __S__.events_archive (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
	data, metadata, correlation_id, recorded_at, archived_at) SELECT * FROM m`

// syncArchive archives, in tx on the target (its cuts already copied), the
// events the source archived after the copy read them hot, until the
// target's archive of the partition holds want events. The target's
// archive only ever holds events the source archived, so equal counts are
// equal sets; the scan for the difference runs only when they differ.
func (mv *mover) syncArchive(ctx context.Context, tx pgx.Tx, want int64) error {
	p := mv.m.Partition
	count := func() (int64, error) {
		var n int64
		err := tx.QueryRow(ctx, mv.dstSQL(`SELECT count(*) FROM __S__.events_archive WHERE partition = $1`), p).Scan(&n)
		return n, err
	}
	have, err := count()
	if err != nil || have >= want {
		return err
	}
	rows, err := tx.Query(ctx, mv.dstSQL(fullyCutHotSQL), p)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.UUID])
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(ids, 10_000) {
		rows, err := mv.m.Source.Query(ctx, mv.srcSQL(`SELECT id, archived_at FROM __S__.events_archive WHERE partition = $1 AND id = ANY($2::uuid[])`), p, chunk)
		if err != nil {
			return err
		}
		var archived []pgtype.UUID
		var at []time.Time
		for rows.Next() {
			var id pgtype.UUID
			var t time.Time
			if err := rows.Scan(&id, &t); err != nil {
				rows.Close()
				return err
			}
			archived, at = append(archived, id), append(at, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(archived) > 0 {
			if _, err := tx.Exec(ctx, mv.dstSQL(archiveEventsSQL), p, archived, at); err != nil {
				return fmt.Errorf("archiving events the source archived: %w", err)
			}
		}
	}
	if have, err = count(); err != nil {
		return err
	}
	if have < want {
		return refusedf("the source holds %d archived events of the partition, the target %d after archiving every event the source archived: the source's archive holds events whose streams are not cut past them; verify the source (scribe verify)", want, have)
	}
	return nil
}

// querier runs a query: a pool, a connection or a transaction.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}
