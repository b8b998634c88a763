package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scribe-es/scribe/projection"
)

var _ projection.RowStore[pgx.Tx] = (*ProjectionStore)(nil)

// rowsDB runs statements: a pool or a transaction.
type rowsDB interface {
	querier
	QueryRow(context.Context, string, ...any) pgx.Row
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

// Rows implements projection.RowStore: k's rows in the table
// projection_rows (migration 7), written in tx. Pass the transaction the
// handler received, so that the rows commit with the checkpoint.
func (st *ProjectionStore) Rows(tx pgx.Tx, k projection.Key) projection.Rows {
	if tx == nil {
		return &pgRows{st: st, k: k}
	}
	return &pgRows{st: st, db: tx, k: k, write: true}
}

// ReadRows implements projection.RowStore: reads of k's committed rows on
// the pool.
func (st *ProjectionStore) ReadRows(k projection.Key) projection.RowReader {
	return &pgRows{st: st, db: st.pool, k: k}
}

// pgRows reads and, with write, writes k's rows in db.
type pgRows struct {
	st    *ProjectionStore
	db    rowsDB
	k     projection.Key
	write bool
}

func (r *pgRows) check(collection string) error {
	if r.db == nil {
		return projection.ErrNoRowsTx
	}
	if collection == "" {
		return errors.New("projection: rows: the collection name is empty")
	}
	return r.k.Validate()
}

func (r *pgRows) Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error) {
	if err := r.check(collection); err != nil {
		return nil, false, err
	}
	var doc []byte
	err := r.db.QueryRow(ctx, `SELECT doc FROM `+r.st.s+`.projection_rows WHERE name = $1 AND version = $2 AND collection = $3 AND key = $4`,
		r.k.Name, r.k.Version, collection, key).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, r.st.translate("rows: get", err)
	}
	return doc, true, nil
}

func (r *pgRows) List(ctx context.Context, collection, after string, limit int) ([]projection.Row, error) {
	if err := r.check(collection); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, err := r.db.Query(ctx, `SELECT key, doc FROM `+r.st.s+`.projection_rows WHERE name = $1 AND version = $2 AND collection = $3 AND key > $4
		ORDER BY key LIMIT $5`, r.k.Name, r.k.Version, collection, after, limit)
	if err != nil {
		return nil, r.st.translate("rows: list", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (projection.Row, error) {
		var o projection.Row
		var doc []byte
		err := row.Scan(&o.Key, &doc)
		o.Doc = doc
		return o, err
	})
	if err != nil {
		return nil, r.st.translate("rows: list", err)
	}
	return out, nil
}

func (r *pgRows) Put(ctx context.Context, collection, key string, doc json.RawMessage) error {
	if !r.write {
		return projection.ErrNoRowsTx
	}
	if err := r.check(collection); err != nil {
		return err
	}
	if doc == nil {
		doc = json.RawMessage("null")
	}
	if !json.Valid(doc) {
		return fmt.Errorf("projection: rows %q key %q: the document is not valid JSON", collection, key)
	}
	_, err := r.db.Exec(ctx, `INSERT INTO `+r.st.s+`.projection_rows (name, version, collection, key, doc) VALUES ($1, $2, $3, $4, $5::jsonb)
		ON CONFLICT (name, version, collection, key) DO UPDATE SET doc = EXCLUDED.doc`,
		r.k.Name, r.k.Version, collection, key, string(doc))
	if err != nil {
		return r.st.translate("rows: put", err)
	}
	return nil
}

func (r *pgRows) Delete(ctx context.Context, collection, key string) error {
	if !r.write {
		return projection.ErrNoRowsTx
	}
	if err := r.check(collection); err != nil {
		return err
	}
	_, err := r.db.Exec(ctx, `DELETE FROM `+r.st.s+`.projection_rows WHERE name = $1 AND version = $2 AND collection = $3 AND key = $4`,
		r.k.Name, r.k.Version, collection, key)
	if err != nil {
		return r.st.translate("rows: delete", err)
	}
	return nil
}

// Setup implements projection.Store: one transaction, serialized with the
// setups of every projection of the schema (a transaction-scoped advisory
// lock, so that concurrent CREATE TABLE IF NOT EXISTS of two processes do
// not collide), runs setup and records kind in k's row.
func (st *ProjectionStore) Setup(ctx context.Context, k projection.Key, kind projection.ReadModelKind, setup func(ctx context.Context, tx pgx.Tx) error) error {
	if err := k.Validate(); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('scribe.projection-setup:' || $1))`, st.cfg.Schema); err != nil {
			return st.translate("setup", err)
		}
		if setup != nil {
			if err := setup(ctx, tx); err != nil {
				return fmt.Errorf("projection %s: setting up the read model failed: %w", k, err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projections AS p (name, version, read_model) VALUES ($1, $2, $3)
			ON CONFLICT (name, version) DO UPDATE SET read_model = EXCLUDED.read_model WHERE p.read_model IS DISTINCT FROM EXCLUDED.read_model`,
			k.Name, k.Version, string(kind)); err != nil {
			return st.translate("setup", err)
		}
		return nil
	})
}

// deleteRows deletes k's rows in tx (a reset).
func (st *ProjectionStore) deleteRows(ctx context.Context, tx pgx.Tx, k projection.Key) error {
	if _, err := tx.Exec(ctx, `DELETE FROM `+st.s+`.projection_rows WHERE name = $1 AND version = $2`, k.Name, k.Version); err != nil {
		return st.translate("reset: rows", err)
	}
	return nil
}

// CountRows returns how many rows k's rows read model holds.
func (st *ProjectionStore) CountRows(ctx context.Context, k projection.Key) (int64, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	var n int64
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM `+st.s+`.projection_rows WHERE name = $1 AND version = $2`, k.Name, k.Version).Scan(&n); err != nil {
		return 0, st.translate("count rows", err)
	}
	return n, nil
}
