package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
)

// Positions and gap-free reads (the package documentation's summary, in full).
//
// An event's Position is (Commit, Seq) = (the appending transaction's ID from
// pg_current_xact_id(), a number from the events_seq sequence), both drawn
// after the append holds its locks. Transaction IDs are assigned before
// commit, so a lower position can commit after a higher one. Catch-up reads (Read, ReadAll, Subscribe, Head,
// CountAfter) therefore only show rows below a gate computed just before the
// read: the least of the snapshot's xmax and the transaction IDs of the
// sessions holding ROW EXCLUSIVE on this schema's events table. Every append
// takes that table lock before it gets a transaction ID and holds it until its
// commit ends, so any append that could still commit below the gate is seen
// and holds the gate down (the argument is spelled out at gateSetSQL; the
// 32-bit transaction IDs pg_locks shows are widened to 64 bits with the
// snapshot's epoch, so the gate stays right after 2^32 transactions). Unlike
// gating at pg_snapshot_xmin, long transactions elsewhere in the cluster do not
// stall the feed. ReadStream, ReadEvent and the condition check are not gated:
// they see every committed event.
//
// Within a stream, version order equals position order: every append takes an
// exclusive transaction-scoped advisory lock per stream it touches before it
// draws its transaction ID, so it draws it only after the previous append to
// that stream committed.

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
// the epoch of the snapshot's xmax, one epoch less when that would put it 2^31
// or more past xmax (a transaction that was running when the snapshot was
// taken has an ID below xmax, within 2^31 of it). An append whose widened ID
// is at or past xmax by less than 2^31 got its ID after the snapshot was taken
// (pg_locks is read after it): it is ignored, since the gate is below its ID
// anyway. Widening it into the previous epoch instead would put the gate 2^32
// below every position, and readers would see nothing new until their next
// wake-up. Comparing the bare 32-bit xid would put the gate below every
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
	(SELECT min(` + gateWriterSQL + `) FROM w))::text, false)`

// gateWriterSQL is what a running append's widened ID f contributes to the
// gate, given xm, the snapshot's xmax (see gateSetSQL): f itself, f one
// epoch less, or nothing (NULL) for an append that got its ID after the
// snapshot was taken.
const gateWriterSQL = `CASE WHEN f >= (SELECT v FROM xm) + 2147483648 THEN f - 4294967296
		WHEN f >= (SELECT v FROM xm) THEN NULL ELSE f END`

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
	var (
		out []journal.Record
		sc  recordScanner
	)
	err := j.gated(ctx, op, stmt, args, func(rows pgx.Rows) error {
		r, err := sc.scan(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
