package erasure

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// MemoryKeyStore is an in-process KeyStore for tests, examples and single
// processes whose journal is in memory too. Its keys die with the process.
// All methods are safe for concurrent use.
type MemoryKeyStore struct {
	now      func() time.Time
	mu       sync.Mutex
	entries  map[string]*memSubject
	streams  map[string]map[journal.StreamID]struct{} // subject -> bound streams
	byStream map[journal.StreamID]map[string]struct{} // stream -> bound subjects
}

type memSubject struct {
	info Subject
	key  DataKey // zero once erased
}

// MemoryKeyStoreConfig configures NewMemoryKeyStore.
type MemoryKeyStoreConfig struct {
	// Now is the clock stamping creations and erasures. Default time.Now.
	Now func() time.Time
}

// NewMemoryKeyStore returns an empty in-memory key store.
func NewMemoryKeyStore(cfg MemoryKeyStoreConfig) *MemoryKeyStore {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &MemoryKeyStore{now: cfg.Now, entries: map[string]*memSubject{}, streams: map[string]map[journal.StreamID]struct{}{},
		byStream: map[journal.StreamID]map[string]struct{}{}}
}

var _ KeyStore = (*MemoryKeyStore)(nil)

func erasureOf(s *memSubject) Erasure {
	return Erasure{Subject: s.info.ID, By: s.info.ErasedBy, At: s.info.ErasedAt}
}

// DataKey implements KeyStore.
func (m *MemoryKeyStore) DataKey(ctx context.Context, subject string) (DataKey, error) {
	if err := ValidateSubject(subject); err != nil {
		return DataKey{}, err
	}
	if err := ctx.Err(); err != nil {
		return DataKey{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.entries[subject]; ok {
		if s.info.Erased {
			return DataKey{}, &SubjectErasedError{Erasure: erasureOf(s)}
		}
		return s.key, nil
	}
	k, err := NewDataKey()
	if err != nil {
		return DataKey{}, err
	}
	m.entries[subject] = &memSubject{info: Subject{ID: subject, CreatedAt: m.now().UTC()}, key: k}
	return k, nil
}

// Lookup implements KeyStore.
func (m *MemoryKeyStore) Lookup(ctx context.Context, subjects []string) (Lookup, error) {
	if err := ctx.Err(); err != nil {
		return Lookup{}, err
	}
	out := Lookup{Keys: map[string]DataKey{}, Erased: map[string]Erasure{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sub := range subjects {
		s, ok := m.entries[sub]
		switch {
		case !ok:
		case s.info.Erased:
			out.Erased[sub] = erasureOf(s)
		default:
			out.Keys[sub] = s.key
		}
	}
	return out, nil
}

// Erase implements KeyStore.
func (m *MemoryKeyStore) Erase(ctx context.Context, subject, by string) (Erasure, error) {
	if err := ValidateSubject(subject); err != nil {
		return Erasure{}, err
	}
	if err := ValidateBy(by); err != nil {
		return Erasure{}, err
	}
	if err := ctx.Err(); err != nil {
		return Erasure{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UTC().Truncate(time.Microsecond)
	s, ok := m.entries[subject]
	if !ok {
		s = &memSubject{info: Subject{ID: subject, CreatedAt: now}}
		m.entries[subject] = s
	}
	if s.info.Erased {
		e := erasureOf(s)
		e.Repeat = true
		return e, nil
	}
	// The key's bytes are not overwritten: callers (a runtime's cache) may
	// hold the same DataKey until the erasure reaches them.
	s.key = DataKey{}
	s.info.Erased, s.info.ErasedAt, s.info.ErasedBy = true, now, by
	return erasureOf(s), nil
}

// Subjects implements KeyStore.
func (m *MemoryKeyStore) Subjects(ctx context.Context, after string, limit int) ([]Subject, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	out := make([]Subject, 0, len(m.entries))
	for id, s := range m.entries {
		if id > after {
			out = append(out, s.info)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Subject) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// BindStream implements KeyStore.
func (m *MemoryKeyStore) BindStream(ctx context.Context, subject string, stream journal.StreamID) error {
	if err := ValidateSubject(subject); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	stream = stream.Normalize()
	m.mu.Lock()
	defer m.mu.Unlock()
	bound := m.streams[subject]
	if bound == nil {
		bound = map[journal.StreamID]struct{}{}
		m.streams[subject] = bound
	}
	bound[stream] = struct{}{}
	subs := m.byStream[stream]
	if subs == nil {
		subs = map[string]struct{}{}
		m.byStream[stream] = subs
	}
	subs[subject] = struct{}{}
	return nil
}

// StreamSubjects implements KeyStore.
func (m *MemoryKeyStore) StreamSubjects(ctx context.Context, stream journal.StreamID) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stream = stream.Normalize()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.byStream[stream]))
	for subject := range m.byStream[stream] {
		out = append(out, subject)
	}
	return out, nil
}

// Streams implements KeyStore.
func (m *MemoryKeyStore) Streams(ctx context.Context, subject string) ([]journal.StreamID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bound := m.streams[subject]
	out := make([]journal.StreamID, 0, len(bound))
	for st := range bound {
		out = append(out, st)
	}
	return out, nil
}
