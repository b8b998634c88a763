package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

// Row is one document of a rows read model: its key in its collection and
// its JSON document.
type Row struct {
	Key string
	Doc json.RawMessage
}

// RowReader reads the rows of one projection version. Keys are compared
// byte by byte. Safe for concurrent use; returned values belong to the
// caller.
type RowReader interface {
	// Get returns the document stored under key in collection, and whether
	// there is one.
	Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error)
	// GetMany returns the documents stored under keys in collection, by
	// key; keys without a document are absent from the map. One call reads
	// them all (on Postgres one query): prefer it to Get in a loop.
	GetMany(ctx context.Context, collection string, keys []string) (map[string]json.RawMessage, error)
	// List returns up to limit rows of collection whose keys sort after
	// after ("" for the first page), ascending by key.
	List(ctx context.Context, collection, after string, limit int) ([]Row, error)
}

// Rows is a projection's read model of JSON documents by collection and
// key, kept by the projection store and bound to the commit of a batch:
// writes are visible to the same Rows' reads at once and to other readers
// when the batch commits with the checkpoint (a failed batch stores none).
// Stores keep writes until the commit (RowWrites), so a write error may
// surface as the commit's. Reset (Rebuild) empties the rows of the
// projection version with its checkpoint. A Rows is used by one handler
// call at a time and is not valid after the call returns.
type Rows interface {
	RowReader
	// Put stores doc (valid JSON) under key in collection, replacing any
	// document there.
	Put(ctx context.Context, collection, key string, doc json.RawMessage) error
	// Delete removes the document under key in collection, if any.
	Delete(ctx context.Context, collection, key string) error
}

// RowStore is a Store that keeps rows read models (the memory and Postgres
// stores do): the read model of a RowProjection, written once and run on
// either store. Its methods are safe for concurrent use.
type RowStore[Tx any] interface {
	Store[Tx]
	// Rows returns k's rows written in tx, the transaction a Commit or a
	// dead-letter replay of k passed to the handler.
	Rows(tx Tx, k Key) Rows
	// ReadRows returns a reader of k's committed rows (what readers of the
	// read model see).
	ReadRows(k Key) RowReader
}

// ReadModelKind says who can empty a projection's read model, as the
// store recorded it when a runner set the projection up (Status.ReadModel).
type ReadModelKind string

// Kinds of read models.
const (
	// ReadModelUnknown: no runner has set the projection up yet.
	ReadModelUnknown ReadModelKind = ""
	// ReadModelRows: the store's rows only (a RowProjection). Every Reset
	// empties them, also Reset by a tool that does not run the projection's
	// code (`scribe projections rebuild`).
	ReadModelRows ReadModelKind = "rows"
	// ReadModelCustom: the service's own tables, which only the projection's
	// Clear empties (Rebuild, from the service's code).
	ReadModelCustom ReadModelKind = "custom"
)

// RowProjection is a projection written once for every store: its handler
// writes a rows read model (Rows), and Bind turns it into the Projection of
// a given RowStore, whose commits store the rows with the checkpoint.
type RowProjection struct {
	// Name, Version and Query are as in Projection.
	Name    string
	Version int
	Query   journal.Query
	// Slicing, when set, slices the projection, as Projection.Slicing.
	Slicing *Slicing
	// Handle applies one batch to the read model, as Projection.Handle.
	Handle func(ctx context.Context, rows Rows, batch Batch) error
	// Replay, when set, re-applies a dead letter to the read model, as
	// Projection.Replay.
	Replay func(ctx context.Context, rows Rows, d DeadLetter) error
}

// Bind returns p as a Projection on store: each call of its Handle (and
// Replay) receives store.Rows of the call's transaction. Its read model is
// ReadModelRows: every Reset of the projection empties it.
func Bind[Tx any](store RowStore[Tx], p RowProjection) Projection[Tx] {
	k := Key{Name: p.Name, Version: p.Version}
	out := Projection[Tx]{Name: p.Name, Version: p.Version, Query: p.Query, Slicing: p.Slicing, rows: true}
	if p.Handle != nil {
		out.Handle = func(ctx context.Context, tx Tx, b Batch) error { return p.Handle(ctx, store.Rows(tx, k), b) }
	}
	if p.Replay != nil {
		out.Replay = func(ctx context.Context, tx Tx, d DeadLetter) error { return p.Replay(ctx, store.Rows(tx, k), d) }
	}
	return out
}

// readModelKind is the kind of p's read model.
func (p Projection[Tx]) readModelKind() ReadModelKind {
	if p.rows {
		return ReadModelRows
	}
	return ReadModelCustom
}

// Rebuild moves p's checkpoint back to zero and empties its read model in
// the same transaction (store.Reset with p.Clear; rows are emptied by every
// Reset): its runner is fenced and applies every event again into the
// empty read model, never counting one twice. A projection with its own
// tables and no Clear is refused (nothing is reset).
func Rebuild[Tx any](ctx context.Context, store Store[Tx], p Projection[Tx]) error {
	k := Key{Name: p.Name, Version: p.Version}
	if err := k.Validate(); err != nil {
		return err
	}
	if !p.rows && p.Clear == nil {
		return fmt.Errorf("projection %s: Rebuild: no Clear is declared, so the read model would count every event twice; give Projection.Clear (or use a RowProjection), or Store.Reset if the handler is idempotent", k)
	}
	return store.Reset(ctx, k, p.Clear)
}

// Collection is a typed view of one collection of a rows read model: its
// documents are values of V encoded as JSON. The zero value is not usable:
// give Name.
type Collection[V any] struct {
	// Name is the collection's name within the projection's rows.
	Name string
}

// Get returns the value under key and whether there is one.
func (c Collection[V]) Get(ctx context.Context, r RowReader, key string) (V, bool, error) {
	var v V
	doc, ok, err := r.Get(ctx, c.Name, key)
	if err != nil || !ok {
		return v, ok, err
	}
	if err := json.Unmarshal(doc, &v); err != nil {
		return v, false, fmt.Errorf("projection: rows %q key %q: decode %T: %w", c.Name, key, v, err)
	}
	return v, true, nil
}

// GetMany returns the values under keys, by key; keys without a value are
// absent from the map.
func (c Collection[V]) GetMany(ctx context.Context, r RowReader, keys []string) (map[string]V, error) {
	docs, err := r.GetMany(ctx, c.Name, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]V, len(docs))
	for key, doc := range docs {
		var v V
		if err := json.Unmarshal(doc, &v); err != nil {
			return nil, fmt.Errorf("projection: rows %q key %q: decode %T: %w", c.Name, key, v, err)
		}
		out[key] = v
	}
	return out, nil
}

// Put stores v under key.
func (c Collection[V]) Put(ctx context.Context, rows Rows, key string, v V) error {
	doc, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("projection: rows %q key %q: encode %T: %w", c.Name, key, v, err)
	}
	return rows.Put(ctx, c.Name, key, doc)
}

// Delete removes the value under key, if any.
func (c Collection[V]) Delete(ctx context.Context, rows Rows, key string) error {
	return rows.Delete(ctx, c.Name, key)
}

// Keyed is a value of a Collection with its key.
type Keyed[V any] struct {
	Key   string
	Value V
}

// List returns up to limit values whose keys sort after after, by key.
func (c Collection[V]) List(ctx context.Context, r RowReader, after string, limit int) ([]Keyed[V], error) {
	rows, err := r.List(ctx, c.Name, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Keyed[V], len(rows))
	for i, row := range rows {
		out[i].Key = row.Key
		if err := json.Unmarshal(row.Doc, &out[i].Value); err != nil {
			return nil, fmt.Errorf("projection: rows %q key %q: decode %T: %w", c.Name, row.Key, out[i].Value, err)
		}
	}
	return out, nil
}

// ErrNoRowsTx: Rows was called with a transaction that is not one a commit
// or a replay of the store passed to a handler. Nothing was written.
var ErrNoRowsTx = errors.New("projection: these rows are not bound to a commit of the store; use the Rows of the transaction the handler received")

// validRow checks a write's collection, key and document.
func validRow(collection, key string, doc json.RawMessage) error {
	switch {
	case collection == "":
		return errors.New("projection: rows: the collection name is empty")
	case doc != nil && !json.Valid(doc):
		return fmt.Errorf("projection: rows %q key %q: the document is not valid JSON", collection, key)
	}
	return nil
}
