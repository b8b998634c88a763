package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
)

// RowID names one document of a rows read model.
type RowID struct{ Collection, Key string }

// RowWrites is the write set of one commit (or dead-letter replay) of a
// RowStore: what its handler wrote to rows, kept until the store stores it
// with the checkpoint. Both stores keep a handler's writes in one. Safe for
// concurrent use; the zero value is empty and open.
type RowWrites struct {
	mu     sync.Mutex
	closed bool
	docs   map[Key]map[RowID]json.RawMessage
}

// Rows returns k's rows as committed reads them, with w's writes over
// them: reads see w's writes first, and writes go to w until Close, after
// which they fail with ErrNoRowsTx.
func (w *RowWrites) Rows(k Key, committed RowReader) Rows {
	return &writeRows{w: w, k: k, committed: committed}
}

// Close ends w's writes and returns them: by projection version, the
// documents put (nil: deleted).
func (w *RowWrites) Close() map[Key]map[RowID]json.RawMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return w.docs
}

// writeRows is k's rows of a write set over the committed ones.
type writeRows struct {
	w         *RowWrites
	k         Key
	committed RowReader
}

func (r *writeRows) Put(ctx context.Context, collection, key string, doc json.RawMessage) error {
	if doc == nil {
		doc = json.RawMessage("null")
	}
	return r.set(collection, key, bytes.Clone(doc))
}

func (r *writeRows) Delete(ctx context.Context, collection, key string) error {
	return r.set(collection, key, nil)
}

func (r *writeRows) set(collection, key string, doc json.RawMessage) error {
	if err := validRow(collection, key, doc); err != nil {
		return err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if r.w.closed {
		return ErrNoRowsTx
	}
	if r.w.docs == nil {
		r.w.docs = map[Key]map[RowID]json.RawMessage{}
	}
	if r.w.docs[r.k] == nil {
		r.w.docs[r.k] = map[RowID]json.RawMessage{}
	}
	r.w.docs[r.k][RowID{collection, key}] = doc
	return nil
}

// over returns the write set's documents of collection, by key (nil:
// deleted).
func (r *writeRows) over(collection string) map[string]json.RawMessage {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	out := map[string]json.RawMessage{}
	for id, doc := range r.w.docs[r.k] {
		if id.Collection == collection {
			out[id.Key] = doc
		}
	}
	return out
}

func (r *writeRows) Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error) {
	docs, err := r.GetMany(ctx, collection, []string{key})
	doc, ok := docs[key]
	return doc, ok, err
}

func (r *writeRows) GetMany(ctx context.Context, collection string, keys []string) (map[string]json.RawMessage, error) {
	over := r.over(collection)
	out, err := r.committed.GetMany(ctx, collection, slices.DeleteFunc(slices.Clone(keys), func(key string) bool { _, ok := over[key]; return ok }))
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if doc := over[key]; doc != nil {
			out[key] = bytes.Clone(doc)
		}
	}
	return out, nil
}

// List lists the committed rows with the write set's over them: the
// committed page is asked for len(over) more rows than limit, so that the
// writes cannot remove or put rows before its end unseen.
func (r *writeRows) List(ctx context.Context, collection, after string, limit int) ([]Row, error) {
	if limit <= 0 {
		return nil, nil
	}
	over := r.over(collection)
	rows, err := r.committed.List(ctx, collection, after, limit+len(over))
	if err != nil {
		return nil, err
	}
	merged := map[string]json.RawMessage{}
	for _, row := range rows {
		merged[row.Key] = row.Doc
	}
	for key, doc := range over {
		if doc == nil {
			delete(merged, key)
		} else if key > after {
			merged[key] = bytes.Clone(doc)
		}
	}
	keys := slices.Sorted(maps.Keys(merged))
	out := make([]Row, min(len(keys), limit))
	for i := range out {
		out[i] = Row{Key: keys[i], Doc: merged[keys[i]]}
	}
	return out, nil
}

// store applies a commit's writes to the rows. s.mu is held.
func (s *MemoryStore) store(writes map[Key]map[RowID]json.RawMessage) {
	for k, docs := range writes {
		if s.docs[k] == nil {
			s.docs[k] = map[string]map[string]json.RawMessage{}
		}
		for id, doc := range docs {
			if s.docs[k][id.Collection] == nil {
				s.docs[k][id.Collection] = map[string]json.RawMessage{}
			}
			if doc == nil {
				delete(s.docs[k][id.Collection], id.Key)
			} else {
				s.docs[k][id.Collection][id.Key] = doc
			}
		}
	}
}

// Rows implements RowStore: tx must be the NoTx a commit or a replay of the
// store passed to the handler; the writes of other rows fail with
// ErrNoRowsTx.
func (s *MemoryStore) Rows(tx NoTx, k Key) Rows {
	w := tx.w
	if w == nil {
		w = &RowWrites{closed: true}
	}
	return w.Rows(k, s.ReadRows(k))
}

// ReadRows implements RowStore.
func (s *MemoryStore) ReadRows(k Key) RowReader { return memRows{s: s, k: k} }

// memRows reads k's committed rows.
type memRows struct {
	s *MemoryStore
	k Key
}

func (m memRows) Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	doc, ok := m.s.docs[m.k][collection][key]
	return bytes.Clone(doc), ok, nil
}

func (m memRows) GetMany(ctx context.Context, collection string, keys []string) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(keys))
	for _, key := range keys {
		if doc, ok, _ := m.Get(ctx, collection, key); ok {
			out[key] = doc
		}
	}
	return out, nil
}

func (m memRows) List(ctx context.Context, collection, after string, limit int) ([]Row, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	coll := m.s.docs[m.k][collection]
	keys := slices.DeleteFunc(slices.Sorted(maps.Keys(coll)), func(key string) bool { return key <= after })
	out := make([]Row, min(len(keys), max(0, limit)))
	for i := range out {
		out[i] = Row{Key: keys[i], Doc: bytes.Clone(coll[keys[i]])}
	}
	return out, nil
}
