package journal

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The record log keeps records in chunks; positions, lookups and reads work
// across chunk boundaries, and a record's address does not move when the
// log grows.
func TestMemoryRecordLogAcrossChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := NewMemory()
	defer m.Close()
	const batches, per = 25, 400 // 10,000 records: three chunk boundaries
	tag := NewTag("counter", "1")
	var ids []Event
	for b := range batches {
		evs := make([]Event, per)
		for i := range evs {
			evs[i] = Event{ID: NewEventID(), Type: "Counted", Tags: []Tag{tag}, Data: []byte(`{"n":1}`)}
		}
		_, err := m.Append(ctx, evs, AppendOptions{})
		require.NoError(t, err, "batch %d", b)
		ids = append(ids, evs...)
	}
	first := m.records.at(0)
	boundary := m.records.at(recordChunk)

	n := 0
	for r, err := range m.ReadAll(ctx, Position{}, 0) {
		require.NoError(t, err)
		require.Equal(t, uint64(n+1), r.Position.Seq)
		require.Equal(t, ids[n].ID, r.ID)
		n++
	}
	require.Equal(t, batches*per, n)

	// Read from just before the first boundary: the next record is the
	// first of the second chunk.
	for r, err := range m.ReadAll(ctx, m.records.at(recordChunk-1).Position, 1) {
		require.NoError(t, err)
		require.Equal(t, uint64(recordChunk+1), r.Position.Seq)
	}
	got, err := m.ReadEvent(ctx, ids[2*recordChunk+5].ID)
	require.NoError(t, err)
	require.Equal(t, uint64(2*recordChunk+6), got.Position.Seq)
	v := uint64(0)
	for r, err := range m.ReadStream(ctx, Stream(tag), 1, 0) {
		require.NoError(t, err)
		v++
		require.Equal(t, v, r.Version(tag))
	}
	require.Equal(t, uint64(batches*per), v)
	verified, err := VerifyStream(ctx, m, Stream(tag))
	require.NoError(t, err)
	require.Equal(t, uint64(batches*per), verified)
	cnt, err := m.CountAfter(ctx, m.records.at(recordChunk).Position)
	require.NoError(t, err)
	require.Equal(t, uint64(batches*per-recordChunk-1), cnt)

	// Growing the log did not move earlier records.
	require.Same(t, first, m.records.at(0))
	require.Same(t, boundary, m.records.at(recordChunk))
}
