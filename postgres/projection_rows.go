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
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scribe-es/scribe/journal"
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
// projection_rows (migration 7), written in tx. Within a Commit or a
// dead-letter replay of the store (the tx its handler received) writes are
// buffered and sent in one statement when the handler returned, before the
// checkpoint moves; in any other transaction each write is sent at once.
func (st *ProjectionStore) Rows(tx pgx.Tx, k projection.Key) projection.Rows {
	if tx == nil {
		return &pgRows{st: st, k: k}
	}
	r := &pgRows{st: st, db: tx, k: k, write: true}
	if v, ok := st.buffers.Load(tx); ok {
		r.buf = v.(*rowBuffer)
	}
	return r
}

// ReadRows implements projection.RowStore: reads of k's committed rows on
// the pool.
func (st *ProjectionStore) ReadRows(k projection.Key) projection.RowReader {
	return &pgRows{st: st, db: st.pool, k: k}
}

// rowID names one document of a projection version's rows.
type rowID struct{ collection, key string }

// rowBuffer holds the writes of one commit's handler until the commit
// sends them (flushRows): per projection version, the documents put (nil:
// deleted).
type rowBuffer struct {
	mu      sync.Mutex
	pending map[projection.Key]map[rowID]json.RawMessage
	// closed is set when the handler returned: later writes fail.
	closed bool
}

// buffering registers tx as a commit's transaction whose rows writes are
// buffered; the returned function unregisters it.
func (st *ProjectionStore) buffering(tx pgx.Tx) (*rowBuffer, func()) {
	b := &rowBuffer{}
	st.buffers.Store(tx, b)
	return b, func() {
		st.buffers.Delete(tx)
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
	}
}

// applyBuffered runs a commit's handler apply in tx with its rows writes
// buffered, then sends them (before the caller moves the checkpoint). A
// handler error is returned as a *projection.HandlerError at the batch's
// first record.
func (st *ProjectionStore) applyBuffered(ctx context.Context, tx pgx.Tx, k projection.Key, records []journal.Record, apply func(ctx context.Context, tx pgx.Tx) error) error {
	buf, done := st.buffering(tx)
	err := apply(ctx, tx)
	done()
	if err != nil {
		return &projection.HandlerError{At: projection.FirstPosition(records), Err: err}
	}
	if err := st.flushRows(ctx, tx, buf); err != nil {
		return fmt.Errorf("projection %s: commit: %w", k, err)
	}
	return nil
}

// flushRows sends b's writes in tx: per projection version one DELETE and
// one upsert, in key order.
func (st *ProjectionStore) flushRows(ctx context.Context, tx pgx.Tx, b *rowBuffer) error {
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	for k, writes := range pending {
		ids := slices.SortedFunc(maps.Keys(writes), func(a, b rowID) int {
			return cmp.Or(cmp.Compare(a.collection, b.collection), cmp.Compare(a.key, b.key))
		})
		var delColl, delKey, putColl, putKey, putDoc []string
		for _, id := range ids {
			if doc := writes[id]; doc == nil {
				delColl, delKey = append(delColl, id.collection), append(delKey, id.key)
			} else {
				putColl, putKey, putDoc = append(putColl, id.collection), append(putKey, id.key), append(putDoc, string(doc))
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

// pgRows reads and, with write, writes k's rows in db; with buf, writes
// are buffered in it.
type pgRows struct {
	st    *ProjectionStore
	db    rowsDB
	k     projection.Key
	write bool
	buf   *rowBuffer
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

// buffered returns the buffered document of collection and key, if any.
func (r *pgRows) buffered(collection, key string) (json.RawMessage, bool) {
	if r.buf == nil {
		return nil, false
	}
	r.buf.mu.Lock()
	defer r.buf.mu.Unlock()
	doc, ok := r.buf.pending[r.k][rowID{collection, key}]
	return doc, ok
}

func (r *pgRows) Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error) {
	docs, err := r.GetMany(ctx, collection, []string{key})
	if err != nil {
		return nil, false, err
	}
	doc, ok := docs[key]
	return doc, ok, nil
}

func (r *pgRows) GetMany(ctx context.Context, collection string, keys []string) (map[string]json.RawMessage, error) {
	if err := r.check(collection); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(keys))
	var ask []string
	for _, key := range keys {
		if doc, ok := r.buffered(collection, key); ok {
			if doc != nil {
				out[key] = slices.Clone(doc)
			}
			continue
		}
		ask = append(ask, key)
	}
	if len(ask) == 0 {
		return out, nil
	}
	rows, err := r.db.Query(ctx, `SELECT key, doc FROM `+r.st.s+`.projection_rows WHERE name = $1 AND version = $2 AND collection = $3 AND key = ANY($4::text[])`,
		r.k.Name, r.k.Version, collection, ask)
	if err != nil {
		return nil, r.st.translate("rows: get", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var doc []byte
		if err := rows.Scan(&key, &doc); err != nil {
			return nil, r.st.translate("rows: get", err)
		}
		out[key] = doc
	}
	if err := rows.Err(); err != nil {
		return nil, r.st.translate("rows: get", err)
	}
	return out, nil
}

func (r *pgRows) List(ctx context.Context, collection, after string, limit int) ([]projection.Row, error) {
	if err := r.check(collection); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	if r.buf != nil { // the buffered writes first, so that the list sees them
		if err := r.st.flushRows(ctx, r.db.(pgx.Tx), r.buf); err != nil {
			return nil, err
		}
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
	if r.buf != nil {
		return r.set(collection, key, slices.Clone(doc))
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
	if r.buf != nil {
		return r.set(collection, key, nil)
	}
	_, err := r.db.Exec(ctx, `DELETE FROM `+r.st.s+`.projection_rows WHERE name = $1 AND version = $2 AND collection = $3 AND key = $4`,
		r.k.Name, r.k.Version, collection, key)
	if err != nil {
		return r.st.translate("rows: delete", err)
	}
	return nil
}

// set buffers a write (doc nil: a delete); after the handler returned it
// fails with projection.ErrNoRowsTx.
func (r *pgRows) set(collection, key string, doc json.RawMessage) error {
	r.buf.mu.Lock()
	defer r.buf.mu.Unlock()
	if r.buf.closed {
		return projection.ErrNoRowsTx
	}
	if r.buf.pending == nil {
		r.buf.pending = map[projection.Key]map[rowID]json.RawMessage{}
	}
	if r.buf.pending[r.k] == nil {
		r.buf.pending[r.k] = map[rowID]json.RawMessage{}
	}
	r.buf.pending[r.k][rowID{collection, key}] = doc
	return nil
}

// setupError is the error of a projection's Setup that failed with err: a
// missing schema (the store's own: not migrated), database or table, or a
// missing privilege, is a
// configuration error (it matches journal.ErrConfiguration, which a runner
// does not retry, and err) that says what to do; anything else is returned
// as it is, wrapped.
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

// configError is a configuration error whose message says it all: it
// matches each of errs (errors.Is, errors.As) without repeating them.
type configError struct {
	msg  string
	errs []error
}

func (e *configError) Error() string   { return e.msg }
func (e *configError) Unwrap() []error { return e.errs }

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
				return st.setupError(k, err)
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
