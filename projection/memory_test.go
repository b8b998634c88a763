package projection_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/projection/projectiontest"
)

// memModel is a read model that counts applications per event.
type memModel struct {
	mu     sync.Mutex
	counts map[string]map[uuid.UUID]int
}

func TestMemoryStore(t *testing.T) {
	projectiontest.Run(t, newMemHarness)
}

// TestSliceMemoryStore runs the sliced-projection cases on the memory store.
func TestSliceMemoryStore(t *testing.T) {
	projectiontest.RunSlices(t, newMemHarness)
}

func newMemHarness(t *testing.T) projectiontest.Harness[projection.NoTx] {
	m := &memModel{counts: map[string]map[uuid.UUID]int{}}
	return projectiontest.Harness[projection.NoTx]{
		Journal: memory.New(),
		Store:   projection.NewMemoryStore(),
		Apply: func(_ context.Context, _ projection.NoTx, model string, recs []journal.Record) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.counts[model] == nil {
				m.counts[model] = map[uuid.UUID]int{}
			}
			for _, r := range recs {
				m.counts[model][r.ID]++
			}
			return nil
		},
		Applied: func(_ *testing.T, model string) map[uuid.UUID]int {
			m.mu.Lock()
			defer m.mu.Unlock()
			out := map[uuid.UUID]int{}
			for id, n := range m.counts[model] {
				out[id] = n
			}
			return out
		},
		Clear: func(_ context.Context, _ projection.NoTx, model string) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(m.counts, model)
			return nil
		},
	}
}
