package snapshots

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// Memory is an in-memory Store, for tests, examples and single-process use.
// It keeps every saved snapshot until Prune deletes it; nothing survives the
// process. It is safe for concurrent use: each call is atomic. Save copies
// the state it is given and Load returns a fresh copy, so neither side's later
// writes to a byte slice affect the other. Like the Postgres store, it keeps
// CreatedAt to the microsecond.
//
// Create one with NewMemory; the zero value is not usable.
type Memory struct {
	mu sync.RWMutex
	// streams holds each stream's snapshots in ascending Version, without
	// duplicate versions. Keys are normalized StreamIDs.
	streams map[journal.StreamID][]Snapshot
}

var (
	_ Store  = (*Memory)(nil)
	_ Lister = (*Memory)(nil)
)

// NewMemory returns an empty in-memory Store.
func NewMemory() *Memory {
	return &Memory{streams: make(map[journal.StreamID][]Snapshot)}
}

// Save stores a copy of s, replacing any snapshot of the same stream and
// version. It fails with an error wrapping ErrInvalidArgument when s fails
// Validate, and with the context's error when ctx is done.
func (m *Memory) Save(ctx context.Context, s Snapshot) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: save: %w", err)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	s.Stream = s.Stream.Normalize()
	s.State = bytes.Clone(s.State)
	if s.CreatedAt.IsZero() {
		s.CreatedAt = time.Now()
	}
	// Round (as Postgres does) and drop the monotonic reading, so a loaded
	// snapshot compares equal however it was stored.
	s.CreatedAt = s.CreatedAt.Round(time.Microsecond)

	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.streams[s.Stream]
	i, found := slices.BinarySearchFunc(list, s.Version, compareVersion)
	if found {
		list[i] = s
	} else {
		list = slices.Insert(list, i, s)
	}
	m.streams[s.Stream] = list
	return nil
}

// Load returns a copy of the newest snapshot of stream whose Version is at or
// below atOrBelow (math.MaxUint64 for the newest), or an error wrapping
// ErrNotFound when there is none.
func (m *Memory) Load(ctx context.Context, stream journal.StreamID, atOrBelow uint64) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, fmt.Errorf("snapshots: load: %w", err)
	}
	if err := ValidateStream(stream); err != nil {
		return Snapshot{}, err
	}
	stream = stream.Normalize()

	m.mu.RLock()
	defer m.mu.RUnlock()
	list := m.streams[stream]
	// i is the index of the first snapshot above atOrBelow (or of an exact hit).
	i, found := slices.BinarySearchFunc(list, atOrBelow, compareVersion)
	if found {
		i++
	}
	if i == 0 {
		return Snapshot{}, fmt.Errorf("%w: stream %s has no snapshot at or below version %d", ErrNotFound, stream, atOrBelow)
	}
	s := list[i-1]
	s.State = bytes.Clone(s.State)
	return s, nil
}

// List returns the stream's snapshots, oldest version first; an empty slice
// when it has none.
func (m *Memory) List(ctx context.Context, stream journal.StreamID) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: list: %w", err)
	}
	if err := ValidateStream(stream); err != nil {
		return nil, err
	}
	stream = stream.Normalize()

	m.mu.RLock()
	defer m.mu.RUnlock()
	list := m.streams[stream]
	infos := make([]Info, len(list))
	for i, s := range list {
		infos[i] = Info{Version: s.Version, SchemaVersion: s.SchemaVersion, Size: len(s.State), CreatedAt: s.CreatedAt}
	}
	return infos, nil
}

// Prune deletes all but the newest keep snapshots of stream and returns how
// many it deleted. keep 0 deletes them all. A negative keep or an empty tag
// fails with an error wrapping ErrInvalidArgument.
func (m *Memory) Prune(ctx context.Context, stream journal.StreamID, keep int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("snapshots: prune: %w", err)
	}
	if err := ValidatePrune(stream, keep); err != nil {
		return 0, err
	}
	stream = stream.Normalize()

	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.streams[stream]
	if len(list) <= keep {
		return 0, nil
	}
	deleted := len(list) - keep
	if keep == 0 {
		delete(m.streams, stream)
		return deleted, nil
	}
	// Copy the survivors so the pruned states can be garbage collected.
	m.streams[stream] = slices.Clone(list[deleted:])
	return deleted, nil
}

// Streams implements Lister: it summarizes every stream of partition ("" for
// every partition) that has snapshots, ordered by partition, then tag.
func (m *Memory) Streams(ctx context.Context, partition string) ([]StreamSummary, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: streams: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []StreamSummary
	for id, list := range m.streams {
		if len(list) == 0 || (partition != "" && id.Partition != partition) {
			continue
		}
		sum := StreamSummary{Stream: id, Count: len(list), Oldest: list[0].Version, Newest: list[len(list)-1].Version, NewestAt: list[len(list)-1].CreatedAt}
		for _, s := range list {
			sum.Size += int64(len(s.State))
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(a, b StreamSummary) int {
		return cmp.Or(cmp.Compare(a.Stream.Partition, b.Stream.Partition), cmp.Compare(a.Stream.Tag, b.Stream.Tag))
	})
	return out, nil
}

func compareVersion(s Snapshot, version uint64) int { return cmp.Compare(s.Version, version) }
