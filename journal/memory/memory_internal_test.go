package memory

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/stretchr/testify/require"
)

// The record log keeps records in chunks; positions, lookups and reads work
// across chunk boundaries, and a record's address does not move when the
// log grows.
func TestMemoryRecordLogAcrossChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := New()
	defer m.Close()
	const batches, per = 25, 400 // 10,000 records: three chunk boundaries
	tag := journal.NewTag("counter", "1")
	var ids []journal.Event
	for b := range batches {
		evs := make([]journal.Event, per)
		for i := range evs {
			evs[i] = journal.Event{ID: journal.NewEventID(), Type: "Counted", Tags: []journal.Tag{tag}, Data: []byte(`{"n":1}`)}
		}
		_, err := m.Append(ctx, evs, journal.AppendOptions{})
		require.NoError(t, err, "batch %d", b)
		ids = append(ids, evs...)
	}
	first := m.records.at(0)
	boundary := m.records.at(recordChunk)

	n := 0
	for r, err := range m.ReadAll(ctx, journal.Position{}, 0) {
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
	for r, err := range m.ReadStream(ctx, journal.Stream(tag), 1, 0) {
		require.NoError(t, err)
		v++
		require.Equal(t, v, r.Version(tag))
	}
	require.Equal(t, uint64(batches*per), v)
	verified, err := journal.VerifyStream(ctx, m, journal.Stream(tag))
	require.NoError(t, err)
	require.Equal(t, uint64(batches*per), verified)
	cnt, err := m.CountAfter(ctx, m.records.at(recordChunk).Position)
	require.NoError(t, err)
	require.Equal(t, uint64(batches*per-recordChunk-1), cnt)

	// Growing the log did not move earlier records.
	require.Same(t, first, m.records.at(0))
	require.Same(t, boundary, m.records.at(recordChunk))
}

// Appends that arrive while another caller applies the queue are applied by
// that caller, in arrival order, each judged on its own: a caller whose
// context ended while queued gets its error and stores nothing, the rest
// commit gap-free; and the combiner role passes to a queued caller once the
// combiner has applied its quota. The combiner is held inside its first
// append (in the clock, which Append reads under the mutex) until the others
// are queued, so the test does not depend on timing.
func TestMemoryCombinesQueuedAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hold := make(chan struct{})
	var held atomic.Bool
	m := NewWithConfig(Config{Clock: func() time.Time {
		if held.CompareAndSwap(false, true) {
			<-hold
		}
		return time.Now()
	}})
	defer m.Close()
	m.hooks = &memHooks{combineMax: 0} // hand over after every batch

	queued := func() int { return queuedAppends(m) }
	appendOne := func(ctx context.Context, tag journal.Tag) (journal.AppendResult, error) {
		return appendCounted(ctx, m, tag)
	}

	// The first append becomes the combiner and stops in the clock.
	type outcome struct {
		res journal.AppendResult
		err error
	}
	first := make(chan outcome, 1)
	go func() {
		res, err := appendOne(ctx, journal.NewTag("counter", "first"))
		first <- outcome{res, err}
	}()
	require.Eventually(t, held.Load, 30*time.Second, time.Millisecond)

	// A caller that gives up while queued.
	gone, cancel := context.WithCancel(ctx)
	goneDone := make(chan outcome, 1)
	go func() {
		res, err := appendOne(gone, journal.NewTag("counter", "gone"))
		goneDone <- outcome{res, err}
	}()
	require.Eventually(t, func() bool { return queued() == 1 }, 30*time.Second, time.Millisecond)
	cancel()

	// Then ten more, on one stream and on streams of their own.
	const n = 10
	rest := make(chan outcome, n)
	for i := range n {
		tag := journal.NewTag("counter", "shared")
		if i%2 == 1 {
			tag = journal.NewTag("counter", fmt.Sprint(i))
		}
		go func() {
			res, err := appendOne(ctx, tag)
			rest <- outcome{res, err}
		}()
		require.Eventually(t, func() bool { return queued() == 2+i }, 30*time.Second, time.Millisecond)
	}
	close(hold)

	o := <-first
	require.NoError(t, o.err)
	require.Equal(t, journal.Position{Commit: 1, Seq: 1}, o.res.Records[0].Position)
	o = <-goneDone
	require.ErrorIs(t, o.err, context.Canceled)
	seen := map[uint64]bool{}
	for range n {
		o := <-rest
		require.NoError(t, o.err)
		seen[o.res.Records[0].Position.Seq] = true
	}
	for seq := uint64(2); seq <= n+1; seq++ {
		require.True(t, seen[seq], "no append committed at %d: positions must stay gap-free", seq)
	}
	require.EqualValues(t, 1, m.hooks.handovers, "the first combiner hands over after its own append")

	stored := storedTags(t, m)
	require.Len(t, stored, n+1)
	require.NotContains(t, stored, journal.NewTag("counter", "gone"))
	v, err := journal.VerifyStream(ctx, m, journal.StreamID{Tag: journal.NewTag("counter", "shared")})
	require.NoError(t, err)
	require.EqualValues(t, n/2, v)
}

// A Clock that panics inside a combined append fails that append's caller
// with the panic, as a plain mutex did, and leaves the journal usable: the
// appends queued behind it are applied by the next caller, and later appends
// work.
func TestMemoryCombinerSurvivesAPanickingClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hold := make(chan struct{})
	var calls atomic.Int64
	m := NewWithConfig(Config{Clock: func() time.Time {
		if calls.Add(1) == 1 {
			<-hold
			panic("clock broke")
		}
		return time.Now()
	}})
	defer m.Close()
	appendOne := func(tag string) error {
		_, err := appendCounted(ctx, m, journal.NewTag("counter", tag))
		return err
	}
	queued := func() int { return queuedAppends(m) }

	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = appendOne("first")
	}()
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 30*time.Second, time.Millisecond)
	const n = 3
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- appendOne(fmt.Sprint(i)) }()
		require.Eventually(t, func() bool { return queued() == i+1 }, 30*time.Second, time.Millisecond)
	}
	close(hold)

	require.Equal(t, "clock broke", <-panicked)
	for range n {
		require.NoError(t, <-errs)
	}
	require.NoError(t, appendOne("after"))
	tags := storedTags(t, m)
	require.Len(t, tags, n+1)
	require.NotContains(t, tags, journal.NewTag("counter", "first"))
}

// queuedAppends returns how many appends wait for m's combiner.
func queuedAppends(m *Journal) int {
	m.qmu.Lock()
	defer m.qmu.Unlock()
	return len(m.queue)
}

// appendCounted appends one event tagged tag to m.
func appendCounted(ctx context.Context, m *Journal, tag journal.Tag) (journal.AppendResult, error) {
	return m.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "Counted", Tags: []journal.Tag{tag}, Data: []byte(`{"n":1}`)}}, journal.AppendOptions{})
}

// storedTags returns the tags of every record in m, in position order.
func storedTags(t *testing.T, m *Journal) []journal.Tag {
	t.Helper()
	var tags []journal.Tag
	for r, err := range m.ReadAll(context.Background(), journal.Position{}, 0) {
		require.NoError(t, err)
		tags = append(tags, r.Tags...)
	}
	return tags
}

// TestMemoryCombinerRecyclesItsQueue: appends queued while the combiner
// applies a later round land in the array of a round it finished (the
// spare), and every caller still gets its own append applied exactly once,
// gap-free. The clock holds the combiner at its first and second append.
func TestMemoryCombinerRecyclesItsQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holds := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var calls atomic.Int32
	m := NewWithConfig(Config{Clock: func() time.Time {
		if i := int(calls.Add(1)) - 1; i < len(holds) {
			<-holds[i]
		}
		return time.Now()
	}})
	defer m.Close()

	type outcome struct {
		tag journal.Tag
		res journal.AppendResult
		err error
	}
	out := make(chan outcome, 16)
	start := func(name string) {
		tag := journal.NewTag("counter", name)
		go func() {
			res, err := appendCounted(ctx, m, tag)
			out <- outcome{tag, res, err}
		}()
	}
	start("first") // the combiner, held in round 1
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 30*time.Second, time.Millisecond)
	for i := range 3 {
		start(fmt.Sprint("round2-", i))
		require.Eventually(t, func() bool { return queuedAppends(m) == i+1 }, 30*time.Second, time.Millisecond)
	}
	close(holds[0]) // round 2 takes the three, and its first append holds
	require.Eventually(t, func() bool { return calls.Load() == 2 }, 30*time.Second, time.Millisecond)
	m.qmu.Lock()
	require.Zero(t, len(m.queue))
	require.Equal(t, 1, cap(m.queue), "round 2 queues into round 1's array")
	m.qmu.Unlock()
	for i := range 4 {
		start(fmt.Sprint("round3-", i))
		require.Eventually(t, func() bool { return queuedAppends(m) == i+1 }, 30*time.Second, time.Millisecond)
	}
	close(holds[1])

	seqs := map[uint64]journal.Tag{}
	for range 8 {
		o := <-out
		require.NoError(t, o.err)
		require.Len(t, o.res.Records, 1)
		require.Equal(t, []journal.Tag{o.tag}, o.res.Records[0].Tags, "each caller gets its own record")
		seqs[o.res.Records[0].Position.Seq] = o.tag
	}
	for seq := uint64(1); seq <= 8; seq++ {
		require.Contains(t, seqs, seq, "positions stay gap-free")
	}
	require.Len(t, storedTags(t, m), 8, "each append is stored once")
}
