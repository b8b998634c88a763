package erasure

import (
	"cmp"
	"context"
	"fmt"
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
	seq      uint64 // the last erasure Sequence given
	entries  map[string]*memSubject
	streams  map[string]map[journal.StreamID]struct{} // subject -> bound streams
	byStream map[journal.StreamID]map[string]struct{} // stream -> bound subjects
}

type memSubject struct {
	info Subject
	key  DataKey // zero once the key is destroyed
	seq  uint64  // the erasure's Sequence; 0 until it is begun
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
	return Erasure{Subject: s.info.ID, By: s.info.ErasedBy, At: s.info.ErasedAt, State: s.info.Erasure, Sequence: s.seq}
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
		if s.info.Erasure.Begun() {
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
		case s.info.Erasure.Begun():
			out.Erased[sub] = erasureOf(s)
		default:
			out.Keys[sub] = s.key
		}
	}
	return out, nil
}

// BeginErasure implements KeyStore.
func (m *MemoryKeyStore) BeginErasure(ctx context.Context, subject, by string) (Erasure, error) {
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
	if s.info.Erasure.Begun() {
		e := erasureOf(s)
		e.Repeat = true
		return e, nil
	}
	m.seq++
	s.seq = m.seq
	s.info.Erasure, s.info.ErasedAt, s.info.ErasedBy = ErasurePending, now, by
	if !s.key.Valid() {
		s.info.Erasure = ErasureKeyDestroyed // no key to destroy
	}
	return erasureOf(s), nil
}

// DestroyKey implements KeyStore.
func (m *MemoryKeyStore) DestroyKey(ctx context.Context, subject string) (Erasure, error) {
	return m.advance(ctx, subject, ErasureKeyDestroyed)
}

// CompleteErasure implements KeyStore.
func (m *MemoryKeyStore) CompleteErasure(ctx context.Context, subject string) (Erasure, error) {
	return m.advance(ctx, subject, ErasureComplete)
}

// advance moves subject's begun erasure to state to (never back) and
// destroys its key.
func (m *MemoryKeyStore) advance(ctx context.Context, subject string, to ErasureState) (Erasure, error) {
	if err := ValidateSubject(subject); err != nil {
		return Erasure{}, err
	}
	if err := ctx.Err(); err != nil {
		return Erasure{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.entries[subject]
	if !ok || !s.info.Erasure.Begun() {
		return Erasure{}, fmt.Errorf("%w: subject %q; erase it first", ErrNotErasing, subject)
	}
	// The key's bytes are not overwritten: callers (a runtime's cache) may
	// hold the same DataKey until the erasure reaches them.
	s.key = DataKey{}
	s.info.Erasure = max(s.info.Erasure, to)
	return erasureOf(s), nil
}

// ErasureHead implements KeyStore.
func (m *MemoryKeyStore) ErasureHead(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq, nil
}

// Erasures implements KeyStore.
func (m *MemoryKeyStore) Erasures(ctx context.Context, q ErasureQuery) ([]Erasure, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	var out []Erasure
	for _, s := range m.entries {
		if s.info.Erasure.Begun() && s.seq > q.After && (!q.PendingOnly || s.info.Erasure != ErasureComplete) {
			out = append(out, erasureOf(s))
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Erasure) int { return cmp.Compare(a.Sequence, b.Sequence) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
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
			info := s.info
			info.Erased = info.Erasure.Begun()
			out = append(out, info)
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
