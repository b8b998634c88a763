package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
)

// rowID names one document of a rows read model.
type rowID struct{ collection, key string }

// memWrites is the write set of one memory commit (or replay): the
// documents its handler put (nil: deleted), stored by the commit when the
// handler succeeded.
type memWrites struct {
	k       Key
	mu      sync.Mutex
	done    bool
	changes map[rowID]json.RawMessage
}

// finish ends the write set's use and returns its changes.
func (w *memWrites) finish() map[rowID]json.RawMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	return w.changes
}

// store applies a commit's changes to k's rows. s.mu is held.
func (s *MemoryStore) store(k Key, changes map[rowID]json.RawMessage) {
	for id, doc := range changes {
		coll := s.docs[k][id.collection]
		if doc == nil {
			delete(coll, id.key)
			continue
		}
		if coll == nil {
			if s.docs[k] == nil {
				s.docs[k] = map[string]map[string]json.RawMessage{}
			}
			coll = map[string]json.RawMessage{}
			s.docs[k][id.collection] = coll
		}
		coll[id.key] = doc
	}
}

// Rows implements RowStore: tx must be the NoTx a commit or a replay of k
// passed to the handler; other rows fail with ErrNoRowsTx.
func (s *MemoryStore) Rows(tx NoTx, k Key) Rows {
	return &memRows{s: s, k: k, w: tx.w}
}

// ReadRows implements RowStore.
func (s *MemoryStore) ReadRows(k Key) RowReader {
	return &memRows{s: s, k: k}
}

// memRows reads k's committed rows and, with w, reads and writes through
// the commit's write set.
type memRows struct {
	s *MemoryStore
	k Key
	w *memWrites
}

// writable returns the write set, locked, or ErrNoRowsTx.
func (m *memRows) writable() (*memWrites, error) {
	if m.w == nil || m.w.k != m.k {
		return nil, ErrNoRowsTx
	}
	m.w.mu.Lock()
	if m.w.done {
		m.w.mu.Unlock()
		return nil, ErrNoRowsTx
	}
	return m.w, nil
}

func (m *memRows) Put(ctx context.Context, collection, key string, doc json.RawMessage) error {
	if err := validRow(collection, key, doc); err != nil {
		return err
	}
	if doc == nil {
		doc = json.RawMessage("null")
	}
	return m.set(collection, key, bytes.Clone(doc))
}

func (m *memRows) Delete(ctx context.Context, collection, key string) error {
	if err := validRow(collection, key, nil); err != nil {
		return err
	}
	return m.set(collection, key, nil)
}

func (m *memRows) set(collection, key string, doc json.RawMessage) error {
	w, err := m.writable()
	if err != nil {
		return err
	}
	defer w.mu.Unlock()
	if w.changes == nil {
		w.changes = map[rowID]json.RawMessage{}
	}
	w.changes[rowID{collection, key}] = doc
	return nil
}

func (m *memRows) Get(ctx context.Context, collection, key string) (json.RawMessage, bool, error) {
	if m.w != nil {
		w, err := m.writable()
		if err != nil {
			return nil, false, err
		}
		doc, ok := w.changes[rowID{collection, key}]
		w.mu.Unlock()
		if ok {
			return bytes.Clone(doc), doc != nil, nil
		}
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	doc, ok := m.s.docs[m.k][collection][key]
	return bytes.Clone(doc), ok, nil
}

func (m *memRows) GetMany(ctx context.Context, collection string, keys []string) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(keys))
	for _, key := range keys {
		doc, ok, err := m.Get(ctx, collection, key)
		if err != nil {
			return nil, err
		}
		if ok {
			out[key] = doc
		}
	}
	return out, nil
}

func (m *memRows) List(ctx context.Context, collection, after string, limit int) ([]Row, error) {
	if limit <= 0 {
		return nil, nil
	}
	m.s.mu.Lock()
	merged := maps.Clone(m.s.docs[m.k][collection])
	m.s.mu.Unlock()
	if merged == nil {
		merged = map[string]json.RawMessage{}
	}
	if m.w != nil {
		w, err := m.writable()
		if err != nil {
			return nil, err
		}
		for id, doc := range w.changes {
			switch {
			case id.collection != collection:
			case doc == nil:
				delete(merged, id.key)
			default:
				merged[id.key] = doc
			}
		}
		w.mu.Unlock()
	}
	keys := slices.Sorted(maps.Keys(merged))
	i, found := slices.BinarySearch(keys, after)
	if found {
		i++
	}
	keys = keys[i:min(len(keys), i+limit)]
	out := make([]Row, len(keys))
	for j, key := range keys {
		out[j] = Row{Key: key, Doc: bytes.Clone(merged[key])}
	}
	return out, nil
}
