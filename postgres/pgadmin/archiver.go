package pgadmin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// The archiver: Archive and ArchivePlanned run a plan (retention.go) in
// batch transactions, then sweep; StorageSizes and Compact report and return
// the space.

// ArchiveOptions shape an Archive run.
type ArchiveOptions struct {
	// BatchSize is the most tag index rows (stream versions) one transaction
	// retires. Default 1000.
	BatchSize int
	// Progress, if set, is called after each committed batch with the
	// totals so far. It runs on Archive's goroutine.
	Progress func(ArchiveProgress)
}

// ArchiveProgress are an Archive run's totals after a committed batch.
type ArchiveProgress struct {
	// Batches is the number of committed transactions.
	Batches int
	// Versions counts the stream versions retired (tag index rows moved) of
	// Total planned.
	Versions, Total uint64
	// Events counts the event rows moved out of the hot events table (by
	// the batches, then by the closing sweep).
	Events uint64
	// Streams counts the streams whose cut reached its target.
	Streams int
}

// archiveLockSQL serializes archivers of a schema (transaction-scoped).
const archiveLockSQL = `SELECT pg_advisory_xact_lock($1)`

// moveTagsSQL moves a stream's tag index rows (cut, to] to the archive.
const moveTagsSQL = `WITH m AS (
	DELETE FROM __S__.event_tags WHERE partition = $1 AND tag = $2 AND version > $3 AND version <= $4
	RETURNING partition, tag, version, commit_xid, seq, type
), a AS (
	INSERT INTO __S__.event_tags_archive (partition, tag, version, commit_xid, seq, type) SELECT * FROM m RETURNING version, commit_xid, seq
)
SELECT version, commit_xid, seq FROM a`

// cutHashSQL reads the chain hash of tag's link in the event at a position,
// from whichever events table holds it.
const cutHashSQL = `SELECT substring(x.hashes FROM 32 * (array_position(x.tags, $3::text) - 1) + 1 FOR 32) FROM (
	SELECT tags, hashes FROM __S__.events WHERE commit_xid = $1 AND seq = $2
	UNION ALL
	SELECT tags, hashes FROM __S__.events_archive WHERE commit_xid = $1 AND seq = $2) x`

// moveCutSQL records a stream's new cut, only from the cut the batch read.
const moveCutSQL = `UPDATE __S__.streams SET cut_version = $3, cut_hash = $4, cut_commit = $5, cut_seq = $6
	WHERE partition = $1 AND tag = $2 AND cut_version = $7 AND version >= $3`

// fullyCutSQL is the condition that every chain event e is linked to has
// its cut at or past it, and that it is at or below the feed floor ($3, $4;
// NULL: none).
const fullyCutSQL = `NOT EXISTS (SELECT 1 FROM unnest(e.tags, e.versions) u(tag, version)
		LEFT JOIN __S__.streams s ON s.partition = e.partition AND s.tag = u.tag
		WHERE u.version > coalesce(s.cut_version, 0))
	  AND ($3::bigint IS NULL OR (e.commit_xid, e.seq) <= ($3::bigint, $4::bigint))`

// moveEventsSQL moves the given events to the archive when fullyCutSQL holds.
const moveEventsSQL = `WITH m AS (
	DELETE FROM __S__.events e
	WHERE (e.commit_xid, e.seq) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[]))
	  AND ` + fullyCutSQL + `
	RETURNING ` + pgschema.ArchiveCols + `, correlation_id
)
INSERT INTO __S__.events_archive (` + pgschema.ArchiveCols + `, correlation_id) SELECT * FROM m`

// liveCheckpointsSQL lists the checkpoints held in this schema
// (ProjectionStore) by the projection (and publisher) versions that may
// still read: each projection's active version and any newer one catching
// up, whatever their state (running, paused, stopped, failed); versions an
// activation superseded do not count. With each, the index it reads through:
// tag_group NULL for an unsliced projection (its own row; it follows the
// feed, the events table); for a sliced one (migration 9) each slice's
// checkpoint with its partition, tag group and the range [lo, hi) of tag
// slices (scribe_slice) it covers, read through the tag index
// (event_tags_group_slice) and then the events table; its own row, which a
// sliced commit never moves, does not count. A slice of a projection across
// several databases (by_partition, migrations 12 and 15; sliced by tag or
// not) reads its partition's feed, the events table in position order, and
// moves its checkpoint past the records it is not delivered: it counts
// as a reader of the feed (an empty tag_group here). Its position is on the
// database its member column names, which this journal cannot tell from
// itself: such positions count as if they were this database's (the
// conservative side: a position of another database can only hold back more
// here, never less, and a slice of this database is always counted).
const liveCheckpointsSQL = `SELECT NULL::text AS partition, NULL::text AS tag_group, NULL::int AS lo, NULL::int AS hi, p.commit_xid, p.seq FROM __S__.projections p
	LEFT JOIN __S__.projection_active a ON a.name = p.name
	WHERE (a.version IS NULL OR p.version >= a.version)
	  AND NOT EXISTS (SELECT FROM __S__.projection_slices ps WHERE ps.name = p.name AND ps.version = p.version)
	UNION ALL
	SELECT ps.partition, CASE WHEN ps.by_partition THEN '' ELSE ps.tag_group END,
		ps.slice % ps.slice_count * (1024 / ps.slice_count), (ps.slice % ps.slice_count + 1) * (1024 / ps.slice_count), ps.commit_xid, ps.seq
	FROM __S__.projection_slices ps
	LEFT JOIN __S__.projection_active a ON a.name = ps.name
	WHERE a.version IS NULL OR ps.version >= a.version`

// feedFloorSQL is the lowest of liveCheckpointsSQL's checkpoints of the
// readers of the events table in position order (unsliced projections,
// and the slices of projections across several databases, sliced by tag
// or not, which read their partition's feed): no event row after it may
// leave the events table. NULL when there are none. The slices of a sliced
// projection do not count: an event row leaves only once the cut of every
// chain it is linked to passed it (fullyCutSQL), and the cut of a stream
// read by a slice stops before the first tag index row the slice has not
// passed (tagFloorSQL), so a row leaves only once every slice it belongs to
// passed it; a slice that gets no events (its checkpoint stays at zero)
// holds nothing back.
const feedFloorSQL = `SELECT min(ARRAY[c.commit_xid, c.seq]) FROM (` + liveCheckpointsSQL + `) c
	WHERE c.tag_group IS NULL OR c.tag_group = ''`

// tagFloorSQL is the lowest checkpoint among the projections that may read
// the tag index rows of tag $2 in partition $1: the slices of its group, of
// every sliced projection, whose range covers the tag's slice; and every
// reader of the feed (feedFloorSQL's), since an unsliced projection whose
// query names tags reads them through the tag index too (the store does
// not know a projection's query, so each one counts). No tag index row of
// the stream after it may leave event_tags. NULL when there are none. (A
// stream's rows are read by its own slice only: the slices that passed
// them let them go although another slice lags; an event row stays hot
// while the cut of any chain it is linked to has not passed it, so while
// any slice it belongs to has not: see feedFloorSQL.)
const tagFloorSQL = `SELECT min(ARRAY[c.commit_xid, c.seq]) FROM (` + liveCheckpointsSQL + `) c
	WHERE c.tag_group IS NULL OR c.tag_group = ''
	   OR (c.partition = $1 AND c.tag_group = split_part($2::text, ':', 1)
	       AND __S__.scribe_slice($2::text) >= c.lo AND __S__.scribe_slice($2::text) < c.hi)`

// tagHeldSQL is the lowest version in (cut $3, next $4] of a stream whose
// tag index row is after the tag floor ($5, $6): the versions from it on
// stay hot. NULL when none is.
const tagHeldSQL = `SELECT min(version) FROM __S__.event_tags
	WHERE partition = $1 AND tag = $2 AND version > $3 AND version <= $4 AND (commit_xid, seq) > ($5::bigint, $6::bigint)`

// sweepSQL selects up to $5 hot events that fullyCutSQL lets go but no batch
// moved (a projection's checkpoint held them back then), oldest first.
const sweepSQL = `SELECT e.commit_xid, e.seq FROM __S__.events e
	WHERE ($1::bigint IS NULL OR (e.commit_xid, e.seq) > ($1::bigint, $2::bigint))
	  AND ` + fullyCutSQL + `
	ORDER BY e.commit_xid, e.seq LIMIT $5`

// Archive retires what policy asks for now, in batches (see the top of this
// file), and returns the totals. It plans first (PlanArchive) and, when any
// stream is refused, retires nothing and fails with a *SnapshotRequiredError
// (journal.ErrSnapshotRequired). Each batch re-reads the cuts it moves, so
// concurrent or resumed runs never retire a version twice; a second archiver
// of the same schema waits for the first one's batch. Appends go on while it
// runs: a batch holds row locks only on the streams rows it cuts, briefly.
// After an error (or the end of ctx) the committed batches stay; run it again
// to go on.
func (a *Admin) Archive(ctx context.Context, policy RetentionPolicy, opts ArchiveOptions) (ArchiveProgress, error) {
	plan, err := a.PlanArchive(ctx, policy)
	if err != nil {
		return ArchiveProgress{}, err
	}
	if refused := plan.Refused(); len(refused) > 0 {
		return ArchiveProgress{}, &SnapshotRequiredError{Streams: refused}
	}
	return a.ArchivePlanned(ctx, plan, opts)
}

// ArchivePlanned retires what plan lists (from PlanArchive; refused streams
// are skipped), in batches as Archive does. Each stream's cut moves towards
// its planned Target from wherever it is when its batch runs; a snapshot
// requirement is checked again in each batch.
func (a *Admin) ArchivePlanned(ctx context.Context, plan ArchivePlan, opts ArchiveOptions) (ArchiveProgress, error) {
	size := opts.BatchSize
	if size <= 0 {
		size = 1000
	}
	todo := slices.DeleteFunc(slices.Clone(plan.Streams), func(c StreamCut) bool { return c.Refused != "" })
	prog := ArchiveProgress{Total: plan.Events()}
	for len(todo) > 0 {
		n, done, err := a.archiveBatch(ctx, todo, size, &prog)
		if err != nil {
			return prog, err
		}
		todo = todo[done:]
		if n == 0 && done == 0 {
			return prog, fmt.Errorf("postgres: archive made no progress on stream %s; run it again", todo[0].Stream)
		}
		if opts.Progress != nil {
			opts.Progress(prog)
		}
	}
	// Events that every chain let go while a projection still needed them
	// stayed hot; move those the projections have passed since.
	var after []int64
	for {
		n, last, err := a.sweepBatch(ctx, after, size)
		if err != nil {
			return prog, err
		}
		if last == nil {
			break
		}
		prog.Batches++
		prog.Events += n
		after = last
		if opts.Progress != nil {
			opts.Progress(prog)
		}
	}
	return prog, nil
}

// feedFloor reads feedFloorSQL's floor as two nullable arguments.
func (a *Admin) feedFloor(ctx context.Context, tx pgx.Tx) ([2]pgtype.Int8, error) {
	return a.floor(ctx, tx, feedFloorSQL)
}

// floor reads a floor (feedFloorSQL, tagFloorSQL) as two nullable arguments.
func (a *Admin) floor(ctx context.Context, tx pgx.Tx, stmt string, args ...any) ([2]pgtype.Int8, error) {
	var floor []int64
	if err := tx.QueryRow(ctx, a.sql(stmt), args...).Scan(&floor); err != nil {
		return [2]pgtype.Int8{}, fmt.Errorf("read the projections' checkpoints: %w", err)
	}
	if len(floor) != 2 {
		return [2]pgtype.Int8{}, nil
	}
	return [2]pgtype.Int8{{Int64: floor[0], Valid: true}, {Int64: floor[1], Valid: true}}, nil
}

// sweepBatch moves, in one transaction, up to size hot events after
// position after (nil: from the start) that sweepSQL selects, and returns
// how many it moved and the position of the last one it looked at.
func (a *Admin) sweepBatch(ctx context.Context, after []int64, size int) (moved uint64, last []int64, err error) {
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		moved, last = 0, nil
		if _, err := tx.Exec(ctx, archiveLockSQL, a.lockKey(pgschema.LockArchive, "", "archive")); err != nil {
			return err
		}
		floor, err := a.feedFloor(ctx, tx)
		if err != nil {
			return err
		}
		var a0, a1 pgtype.Int8
		if len(after) == 2 {
			a0, a1 = pgtype.Int8{Int64: after[0], Valid: true}, pgtype.Int8{Int64: after[1], Valid: true}
		}
		rows, err := tx.Query(ctx, a.sql(sweepSQL), a0, a1, floor[0], floor[1], size)
		if err != nil {
			return err
		}
		var commits, seqs []int64
		for rows.Next() {
			var c, s int64
			if err := rows.Scan(&c, &s); err != nil {
				rows.Close()
				return err
			}
			commits, seqs = append(commits, c), append(seqs, s)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(commits) == 0 {
			return nil
		}
		last = []int64{commits[len(commits)-1], seqs[len(seqs)-1]}
		ct, err := tx.Exec(ctx, a.sql(moveEventsSQL), commits, seqs, floor[0], floor[1])
		if err != nil {
			return err
		}
		moved = uint64(ct.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, nil, a.translate("archive: move events the projections have passed (rolled back)", err)
	}
	return moved, last, nil
}

// archiveBatch runs one batch transaction over the head of todo, retiring
// at most size versions. It returns how many versions it retired and how
// many streams of todo reached their target.
func (a *Admin) archiveBatch(ctx context.Context, todo []StreamCut, size int, prog *ArchiveProgress) (retired uint64, done int, err error) {
	var events uint64
	var streams int
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		retired, done, events, streams = 0, 0, 0, 0
		if _, err := tx.Exec(ctx, archiveLockSQL, a.lockKey(pgschema.LockArchive, "", "archive")); err != nil {
			return err
		}
		// The batch's streams, and their append locks, taken as an append
		// takes them (exclusive, in key order) before any streams row is
		// touched: an append and a batch sharing streams wait for each
		// other in one order and never deadlock.
		n, budget := 0, uint64(size)
		locks := map[int64]bool{}
		for n < len(todo) {
			c := todo[n]
			locks[a.lockKey(pgschema.LockTag, c.Stream.Partition, string(c.Stream.Tag))] = true
			n++
			need := c.Target - min(c.Cut, c.Target)
			if need >= budget {
				break
			}
			budget -= need
		}
		keys, modes := pgschema.LockArgs(locks)
		if _, err := tx.Exec(ctx, pgschema.LockSQL, keys, modes); err != nil {
			return err
		}
		var commits, seqs []int64
		for done < n && retired < uint64(size) {
			c := &todo[done]
			var version, cut int64
			var retiredFlag bool
			var snap int64
			err := tx.QueryRow(ctx, a.sql(`SELECT version, cut_version, retired,
				coalesce((SELECT max(version) FROM __S__.snapshots sn WHERE sn.partition = s.partition AND sn.tag = s.tag), 0)
				FROM __S__.streams s WHERE partition = $1 AND tag = $2`), c.Stream.Partition, string(c.Stream.Tag)).Scan(&version, &cut, &retiredFlag, &snap)
			if err != nil {
				return fmt.Errorf("read stream %s: %w", c.Stream, err)
			}
			target := min(c.Target, uint64(version))
			if c.SnapshotRequired && !retiredFlag && target > uint64(snap) {
				return &SnapshotRequiredError{Streams: []StreamCut{{Stream: c.Stream, Rule: c.Rule, Version: uint64(version), Cut: uint64(cut), Target: target, Snapshot: uint64(snap)}}}
			}
			next := min(target, uint64(cut)+uint64(size)-retired)
			if next <= uint64(cut) {
				done++
				streams++
				continue
			}
			// A sliced projection, or an unsliced one whose query names
			// tags, reads the stream through its tag index rows: those
			// it has not passed stay hot, and the cut with them (a later
			// run moves them on).
			tf, err := a.floor(ctx, tx, tagFloorSQL, c.Stream.Partition, string(c.Stream.Tag))
			if err != nil {
				return err
			}
			if tf[0].Valid {
				var held pgtype.Int8
				if err := tx.QueryRow(ctx, a.sql(tagHeldSQL), c.Stream.Partition, string(c.Stream.Tag), cut, pgschema.I64(next), tf[0], tf[1]).Scan(&held); err != nil {
					return fmt.Errorf("read the tag index of %s: %w", c.Stream, err)
				}
				if held.Valid {
					next = min(next, uint64(held.Int64-1))
				}
				if next <= uint64(cut) {
					done++
					continue
				}
			}
			rows, err := tx.Query(ctx, a.sql(moveTagsSQL), c.Stream.Partition, string(c.Stream.Tag), cut, pgschema.I64(next))
			if err != nil {
				return fmt.Errorf("move the tag index of %s: %w", c.Stream, err)
			}
			var moved uint64
			var at journal.Position
			var top int64
			for rows.Next() {
				var v, cx, sq int64
				if err := rows.Scan(&v, &cx, &sq); err != nil {
					rows.Close()
					return err
				}
				moved++
				commits, seqs = append(commits, cx), append(seqs, sq)
				if v > top {
					top, at = v, journal.Position{Commit: uint64(cx), Seq: uint64(sq)}
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("move the tag index of %s: %w", c.Stream, err)
			}
			if moved != next-uint64(cut) || uint64(top) != next {
				return fmt.Errorf("stream %s: versions %d to %d should be in the hot tag index, found %d of them (up to version %d); verify the stream (scribe verify -tag %s) before archiving it",
					c.Stream, cut+1, next, moved, top, c.Stream.Tag)
			}
			var hash []byte
			if err := tx.QueryRow(ctx, a.sql(cutHashSQL), pgschema.I64(at.Commit), pgschema.I64(at.Seq), string(c.Stream.Tag)).Scan(&hash); err != nil {
				return fmt.Errorf("read the chain hash of %s at version %d: %w", c.Stream, next, err)
			}
			ct, err := tx.Exec(ctx, a.sql(moveCutSQL), c.Stream.Partition, string(c.Stream.Tag), pgschema.I64(next), hash, pgschema.I64(at.Commit), pgschema.I64(at.Seq), cut)
			if err != nil {
				return fmt.Errorf("move the cut of %s: %w", c.Stream, err)
			}
			if ct.RowsAffected() != 1 {
				return fmt.Errorf("the cut of stream %s moved while it was archived; run the archive again", c.Stream)
			}
			retired += moved
			c.Cut = next
			if next == target {
				done++
				streams++
			}
		}
		if len(commits) > 0 {
			floor, err := a.feedFloor(ctx, tx)
			if err != nil {
				return err
			}
			ct, err := tx.Exec(ctx, a.sql(moveEventsSQL), commits, seqs, floor[0], floor[1])
			if err != nil {
				return fmt.Errorf("move events: %w", err)
			}
			events = uint64(ct.RowsAffected())
		}
		return nil
	})
	if err != nil {
		var sr *SnapshotRequiredError
		if errors.As(err, &sr) {
			return 0, 0, err
		}
		return 0, 0, a.translate("archive batch (rolled back, nothing of it was retired)", err)
	}
	prog.Batches++
	prog.Versions += retired
	prog.Events += events
	prog.Streams += streams
	return retired, done, nil
}

// StorageSizes are the on-disk sizes (pg_total_relation_size: heap, TOAST
// and indexes) of the event tables, in bytes.
type StorageSizes struct {
	Events, EventTags               int64
	EventsArchive, EventTagsArchive int64
}

// Hot is the size of the hot tables (events and event_tags).
func (s StorageSizes) Hot() int64 { return s.Events + s.EventTags }

// Archive is the size of the archive tables.
func (s StorageSizes) Archive() int64 { return s.EventsArchive + s.EventTagsArchive }

// StorageSizes reads the sizes of the event tables now. Deleting rows does
// not shrink them: see Compact.
func (a *Admin) StorageSizes(ctx context.Context) (StorageSizes, error) {
	var s StorageSizes
	err := a.pool.QueryRow(ctx, `SELECT pg_total_relation_size($1), pg_total_relation_size($2), pg_total_relation_size($3), pg_total_relation_size($4)`,
		a.t("events"), a.t("event_tags"), a.t("events_archive"), a.t("event_tags_archive")).Scan(&s.Events, &s.EventTags, &s.EventsArchive, &s.EventTagsArchive)
	if err != nil {
		return StorageSizes{}, a.translate("storage sizes", err)
	}
	return s, nil
}

// Compact returns the space of archived rows. With full false it runs VACUUM
// (ANALYZE) on the hot tables: no blocking lock, the space of deleted rows is
// reused by later appends, but the files shrink only by empty pages at their
// end, and indexes not at all. With full true it runs VACUUM FULL: the hot
// tables and their indexes are rewritten to their live rows and shrink, but
// it holds an ACCESS EXCLUSIVE lock on each table while it runs, so every
// append and read of the journal waits: run it in a maintenance window.
func (a *Admin) Compact(ctx context.Context, full bool) error {
	stmt := "VACUUM (ANALYZE) "
	if full {
		stmt = "VACUUM (FULL, ANALYZE) "
	}
	if _, err := a.pool.Exec(ctx, stmt+a.t("events")+", "+a.t("event_tags")); err != nil {
		return a.translate("compact", err)
	}
	return nil
}
