package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

// ScanEvents reads every hot event of schema in position order three ways:
// through recordScanner on a binary result (its own decoder), through
// pgx's Scan (scanRecord), and through recordScanner on a text result (the
// simple protocol), where it falls back to scanRecord; decoded says which
// of the two recordScanners decoded its result itself.
func ScanEvents(ctx context.Context, pool *pgxpool.Pool, schema string) (binary, scanned, text []journal.Record, decoded [2]bool, err error) {
	q := `SELECT ` + recordCols + ` FROM ` + pgx.Identifier{schema}.Sanitize() + `.events e ORDER BY e.commit_xid, e.seq`
	read := func(scan func(pgx.Rows) (journal.Record, error), args ...any) ([]journal.Record, error) {
		rows, err := pool.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []journal.Record
		for rows.Next() {
			r, err := scan(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rows.Err()
	}
	var fast, simple recordScanner
	if binary, err = read(fast.scan); err != nil {
		return
	}
	if scanned, err = read(scanRecord); err != nil {
		return
	}
	text, err = read(simple.scan, pgx.QueryExecModeSimpleProtocol)
	decoded = [2]bool{fast.binary, simple.binary}
	return
}
