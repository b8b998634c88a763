package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

var _ projection.RowStore[pgx.Tx] = (*ProjectionStore)(nil)

// Rows implements projection.RowStore: k's rows in the table
// projection_rows (migration 7). The writes of a Commit's or a dead-letter
// replay's handler (in the tx it received) are kept in a
// projection.RowWrites and sent in one statement when the handler
// returned, before the checkpoint moves; writes in any other transaction
// fail with projection.ErrNoRowsTx.
func (st *ProjectionStore) Rows(tx pgx.Tx, k projection.Key) projection.Rows {
	w, ok := st.buffers.Load(tx)
	if !ok {
		closed := &projection.RowWrites{}
		closed.Close()
		w = closed
	}
	return w.(*projection.RowWrites).Rows(k, &pgRows{st: st, db: tx, k: k})
}

// ReadRows implements projection.RowStore: reads of k's committed rows on
// the pool.
func (st *ProjectionStore) ReadRows(k projection.Key) projection.RowReader {
	return &pgRows{st: st, db: st.pool, k: k}
}

// applyBuffered runs a commit's (or replay's) handler apply in tx with its
// rows writes kept in a projection.RowWrites, then sends them (before the
// caller moves the checkpoint). A handler error is returned as a
// *projection.HandlerError at.
func (st *ProjectionStore) applyBuffered(ctx context.Context, tx pgx.Tx, at journal.Position, apply func(ctx context.Context, tx pgx.Tx) error) error {
	w := &projection.RowWrites{}
	st.buffers.Store(tx, w)
	err := apply(ctx, tx)
	st.buffers.Delete(tx)
	writes := w.Close()
	if err != nil {
		return &projection.HandlerError{At: at, Err: err}
	}
	return st.flushRows(ctx, tx, writes)
}

// flushRows sends writes in tx: per projection version one DELETE and
// one upsert, in key order.
func (st *ProjectionStore) flushRows(ctx context.Context, tx pgx.Tx, writes map[projection.Key]map[projection.RowID]json.RawMessage) error {
	for k, docs := range writes {
		ids := slices.SortedFunc(maps.Keys(docs), func(a, b projection.RowID) int {
			return cmp.Or(cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.Key, b.Key))
		})
		var delColl, delKey, putColl, putKey, putDoc []string
		for _, id := range ids {
			if doc := docs[id]; doc == nil {
				delColl, delKey = append(delColl, id.Collection), append(delKey, id.Key)
			} else {
				putColl, putKey, putDoc = append(putColl, id.Collection), append(putKey, id.Key), append(putDoc, string(doc))
			}
		}
		if len(delKey) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM `+st.s+`.projection_rows r USING unnest($3::text[], $4::text[]) AS d(collection, key)
				WHERE r.name = $1 AND r.version = $2 AND r.collection = d.collection AND r.key = d.key`,
				k.Name, k.Version, delColl, delKey); err != nil {
				return st.translate("rows: delete", err)
			}
		}
		if len(putKey) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projection_rows (name, version, collection, key, doc)
				SELECT $1, $2, p.collection, p.key, p.doc::jsonb FROM unnest($3::text[], $4::text[], $5::text[]) AS p(collection, key, doc)
				ON CONFLICT (name, version, collection, key) DO UPDATE SET doc = EXCLUDED.doc`,
				k.Name, k.Version, putColl, putKey, putDoc); err != nil {
				return st.translate("rows: put", err)
			}
		}
	}
	return nil
}

// pgRows reads k's committed rows in db (the pool, or a commit's
// transaction).
type pgRows struct {
	st *ProjectionStore
	db querier
	k  projection.Key
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
	docs, err := r.GetMany(ctx, collection, []string{key})
	doc, ok := docs[key]
	return doc, ok, err
}

func (r *pgRows) GetMany(ctx context.Context, collection string, keys []string) (map[string]json.RawMessage, error) {
	if err := r.check(collection); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := r.db.Query(ctx, `SELECT key, doc FROM `+r.st.s+`.projection_rows WHERE name = $1 AND version = $2 AND collection = $3 AND key = ANY($4::text[])`,
		r.k.Name, r.k.Version, collection, keys)
	if err != nil {
		return nil, r.st.translate("rows: get", err)
	}
	var key string
	var doc []byte
	if _, err := pgx.ForEachRow(rows, []any{&key, &doc}, func() error { out[key] = slices.Clone(doc); return nil }); err != nil {
		return nil, r.st.translate("rows: get", err)
	}
	return out, nil
}

func (r *pgRows) List(ctx context.Context, collection, after string, limit int) ([]projection.Row, error) {
	if err := r.check(collection); err != nil || limit <= 0 {
		return nil, err
	}
	rows, err := r.db.Query(ctx, `SELECT key, doc FROM `+r.st.s+`.projection_rows WHERE name = $1 AND version = $2 AND collection = $3 AND key > $4
		ORDER BY key LIMIT $5`, r.k.Name, r.k.Version, collection, after, limit)
	if err != nil {
		return nil, r.st.translate("rows: list", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (projection.Row, error) {
		var o projection.Row
		return o, row.Scan(&o.Key, (*[]byte)(&o.Doc))
	})
	if err != nil {
		return nil, r.st.translate("rows: list", err)
	}
	return out, nil
}

// setupError is the error of a projection's Setup that failed with err: a
// missing schema, database or table, or a missing privilege, is a
// configuration error (matching journal.ErrConfiguration and err) that
// says what to do; anything else is wrapped.
func (st *ProjectionStore) setupError(k projection.Key, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !unavailable(err) {
		var do string
		switch pgErr.Code {
		case "3F000": // invalid_schema_name
			do = "create it or point Setup at an existing schema"
			if strings.Contains(pgErr.Message, `"`+st.cfg.Schema+`"`) {
				do = "the store's schema: migrate it (scribe migrate up)"
			}
		case "3D000": // invalid_catalog_name
			do = "check the database Setup names"
		case "42P01": // undefined_table
			do = "create the table first or fix Setup"
		case "42501": // insufficient_privilege
			do = "grant the runner's user what Setup needs (CREATE on the schema)"
		}
		if do != "" {
			return &configError{msg: fmt.Sprintf("%v: Setup: %s (%s); %s, then restart the runner", journal.ErrConfiguration, pgErr.Message, pgErr.Code, do),
				errs: []error{journal.ErrConfiguration, err}}
		}
	}
	return fmt.Errorf("projection %s: setting up the read model failed: %w", k, err)
}

// configError is an error with its own message that matches each of errs.
type configError struct {
	msg  string
	errs []error
}

func (e *configError) Error() string   { return e.msg }
func (e *configError) Unwrap() []error { return e.errs }

// Setup implements projection.Store: one transaction, serialized with the
// schema's other setups by an advisory lock (concurrent CREATE TABLE IF NOT
// EXISTS collide), runs setup and records kind in k's row.
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
				return st.setupError(k, err)
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projections AS p (name, version, read_model) VALUES ($1, $2, $3)
			ON CONFLICT (name, version) DO UPDATE SET read_model = EXCLUDED.read_model WHERE p.read_model IS DISTINCT FROM EXCLUDED.read_model`,
			k.Name, k.Version, string(kind))
		return st.translate("setup", err)
	})
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
