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
// and holds the gate down (the argument is spelled out at pgschema.GateSetSQL; the
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

// rangeScanSQL keeps the planner on ordered index range scans for the
// following statement of the same batch (one implicit transaction, so the
// local setting ends with it). A page read is ORDER BY position LIMIT n over
// an index in that order, and the range scan is always right; but on a table
// whose statistics lag a bulk load (autovacuum has not analyzed it yet) the
// planner expects a handful of rows and picks a bitmap scan that reads and
// sorts every row after the bound, each page: 2x slower catch-up over 10,000
// events, quadratic over millions.
const rangeScanSQL = `SELECT set_config('enable_bitmapscan', 'off', true)`

// gated runs stmt (which uses pgschema.GateSQL) right after pgschema.GateSetSQL, in one round
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
// gatedRecords runs a gated statement selecting recordCols, appending its
// records to out.
func (j *Journal) gatedRecords(ctx context.Context, op, stmt string, args []any, out []journal.Record) ([]journal.Record, error) {
	var sc recordScanner
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
