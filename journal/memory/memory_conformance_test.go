package memory_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/journaltest"
	"github.com/scribe-es/scribe/journal/memory"
)

// TestMemoryConformance runs the whole journal conformance suite against the
// in-memory journal with a small data limit, so the limit cases stay cheap.
func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	const maxData = 4 << 10
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		m := memory.NewWithConfig(memory.Config{MaxDataSize: maxData})
		t.Cleanup(func() { _ = m.Close() })
		return journaltest.Harness{
			Journal:     m,
			Sessions:    m,
			MaxDataSize: maxData,
			Alter: func(_ context.Context, id uuid.UUID, what journaltest.Alteration) error {
				return memory.AlterMemory(m, id, string(what))
			},
			Remove: func(_ context.Context, id uuid.UUID) error {
				return memory.RemoveMemory(m, id)
			},
			Swap: func(_ context.Context, stream journal.StreamID, v, w uint64) error {
				return memory.SwapMemory(m, stream, v, w)
			},
			// An in-memory store has exactly one handle: the peer is the
			// journal itself.
			Peer: m,
		}
	})
}

// TestMemoryConformanceDefaults runs the suite against New, whose data
// limit is journal.DefaultMaxDataSize.
func TestMemoryConformanceDefaults(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		m := memory.New()
		t.Cleanup(func() { _ = m.Close() })
		return journaltest.Harness{Journal: m, Sessions: m}
	})
}
