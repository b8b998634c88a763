package projectiontest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// rowStore returns h's store as a RowStore: every store of the library
// keeps rows read models, so a store without them fails the suite.
func rowStore[Tx any](t *testing.T, h Harness[Tx]) projection.RowStore[Tx] {
	t.Helper()
	rs, ok := h.Store.(projection.RowStore[Tx])
	require.True(t, ok, "the store %T does not implement projection.RowStore", h.Store)
	return rs
}

// counter is a document of the suite's rows read model.
type counter struct {
	N int `json:"n"`
}

var (
	perEvent  = projection.Collection[counter]{Name: "events"}
	perStream = projection.Collection[counter]{Name: "streams"}
)

// countingRows is a rows projection, written once for every store, that
// counts the applications of each event and the events of each stream
// tag. Its handler fails the first attempt of a batch holding failOn, after
// writing (the write must not be stored).
func countingRows(name string, version int, failOn journal.Record) projection.RowProjection {
	return projection.RowProjection{Name: name, Version: version, Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
		ids := make([]string, len(b.Records))
		for i, rec := range b.Records {
			ids[i] = rec.ID.String()
		}
		events, err := perEvent.GetMany(ctx, rows, ids)
		if err != nil {
			return err
		}
		for _, rec := range b.Records {
			e := events[rec.ID.String()]
			e.N++
			if err := perEvent.Put(ctx, rows, rec.ID.String(), e); err != nil {
				return err
			}
			// Get sees this batch's earlier writes of the stream.
			s, _, err := perStream.Get(ctx, rows, string(rec.Tags[0]))
			if err != nil {
				return err
			}
			s.N++
			if err := perStream.Put(ctx, rows, string(rec.Tags[0]), s); err != nil {
				return err
			}
			if rec.ID == failOn.ID && b.Attempt == 1 {
				return errors.New("the first attempt fails after writing")
			}
		}
		// List sees the batch's writes too, as Get does.
		listed, err := perStream.List(ctx, rows, "", 1000)
		if err != nil {
			return err
		}
		for _, kv := range listed {
			v, ok, err := perStream.Get(ctx, rows, kv.Key)
			if err != nil {
				return err
			}
			if !ok || v != kv.Value {
				return fmt.Errorf("List shows %s=%d, Get %d (found %v)", kv.Key, kv.Value.N, v.N, ok)
			}
		}
		return nil
	}}
}

// allRows reads every value of coll through r, in pages of 7.
func allRows(t *testing.T, ctx context.Context, r projection.RowReader, coll projection.Collection[counter]) map[string]int {
	t.Helper()
	out := map[string]int{}
	after := ""
	for {
		page, err := coll.List(ctx, r, after, 7)
		require.NoError(t, err)
		for _, kv := range page {
			_, dup := out[kv.Key]
			require.False(t, dup, "List returned key %q twice", kv.Key)
			require.Greater(t, kv.Key, after, "List returned keys out of order")
			out[kv.Key] = kv.Value.N
		}
		if len(page) < 7 {
			return out
		}
		after = page[len(page)-1].Key
	}
}

// rowsExactlyOnce asserts that k's rows counted each of recs exactly once.
func rowsExactlyOnce(t *testing.T, ctx context.Context, r projection.RowReader, recs []journal.Record) {
	t.Helper()
	events := allRows(t, ctx, r, perEvent)
	require.Len(t, events, len(recs), "rows of events that were not expected, or missing")
	streams := map[string]int{}
	for _, rec := range recs {
		require.Equal(t, 1, events[rec.ID.String()], "event %s applied %d times", rec.ID, events[rec.ID.String()])
		streams[string(rec.Tags[0])]++
	}
	require.Equal(t, streams, allRows(t, ctx, r, perStream))
}

// testRowsReadModel: one RowProjection definition runs on the store: its
// rows count each event once, a failed batch stores none of its writes,
// readers see the committed rows, and rows are not writable outside a
// commit. Status says the read model is rows.
func testRowsReadModel[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	store := rowStore(t, h)
	var recs []journal.Record
	for i := range 4 {
		recs = append(recs, appendN(t, ctx, h.Journal, "", journal.Tag(fmt.Sprintf("s:%d", i)), "E", 10)...)
	}
	p := countingRows("rows", 1, recs[17])
	r, err := projection.NewRunner(h.Journal, store, projection.Bind(store, p), opts("a"))
	require.NoError(t, err)
	running(t, r)
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))
	k := r.Key()
	rowsExactlyOnce(t, ctx, store.ReadRows(k), recs)
	v, ok, err := perStream.Get(ctx, store.ReadRows(k), "s:3")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 10, v.N)
	_, ok, err = perStream.Get(ctx, store.ReadRows(k), "s:9")
	require.NoError(t, err)
	require.False(t, ok)
	empty, err := perStream.List(ctx, store.ReadRows(projection.Key{Name: "rows", Version: 2}), "", 10)
	require.NoError(t, err)
	require.Empty(t, empty, "rows belong to one projection version")

	if w, ok := store.ReadRows(k).(projection.Rows); ok {
		require.ErrorIs(t, perStream.Put(ctx, w, "s:1", counter{}), projection.ErrNoRowsTx, "a reader's rows are not writable")
	}
	st, err := h.Store.Status(ctx, k)
	require.NoError(t, err)
	require.Equal(t, projection.ReadModelRows, st.ReadModel)
}

// testRebuildRows: a rebuild of a rows read model (Rebuild, or a bare
// Store.Reset as a tool does) empties it with the checkpoint: the counts
// after the runner replayed the feed equal the counts before.
func testRebuildRows[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	store := rowStore(t, h)
	var recs []journal.Record
	for i := range 3 {
		recs = append(recs, appendN(t, ctx, h.Journal, "", journal.Tag(fmt.Sprintf("s:%d", i)), "E", 15)...)
	}
	p := projection.Bind(store, countingRows("rebuild-rows", 1, journal.Record{}))
	r, err := projection.NewRunner(h.Journal, store, p, opts("a"))
	require.NoError(t, err)
	running(t, r)
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))
	k := r.Key()
	before := allRows(t, ctx, store.ReadRows(k), perStream)
	rowsExactlyOnce(t, ctx, store.ReadRows(k), recs)

	for _, rebuild := range []func() error{
		func() error { return projection.Rebuild(ctx, h.Store, p) },
		func() error { return h.Store.Reset(ctx, k, nil) }, // what `scribe projections rebuild` does
	} {
		require.NoError(t, rebuild())
		require.Eventually(t, func() bool {
			st, err := h.Store.Status(ctx, k)
			require.NoError(t, err)
			return st.Checkpoint == recs[len(recs)-1].Position && st.Events == uint64(len(recs))
		}, 20*time.Second, 10*time.Millisecond)
		require.Equal(t, before, allRows(t, ctx, store.ReadRows(k), perStream), "a rebuild changed the counts")
		rowsExactlyOnce(t, ctx, store.ReadRows(k), recs)
	}
}

// testRebuildClearsDeclaredReadModel: a projection with its own read model
// declares Setup and Clear; the runner sets it up before its first batch
// and records it as custom; Rebuild clears it in the reset's transaction
// and the replay counts each event once. A projection without Clear is
// not rebuilt, and a failing Clear resets nothing.
func testRebuildClearsDeclaredReadModel[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 25)
	var setups atomic.Int64
	p := counting(h, "declared", 1)
	p.Setup = func(ctx context.Context, tx Tx) error { setups.Add(1); return nil }
	p.Clear = func(ctx context.Context, tx Tx) error { return h.Clear(ctx, tx, "declared@1") }
	r, err := projection.NewRunner(h.Journal, h.Store, p, opts("a"))
	require.NoError(t, err)
	running(t, r)
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))
	require.EqualValues(t, 1, setups.Load(), "Setup runs once per runner start")
	st, err := h.Store.Status(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, projection.ReadModelCustom, st.ReadModel)

	noClear := p
	noClear.Clear = nil
	require.ErrorContains(t, projection.Rebuild(ctx, h.Store, noClear), "no Clear is declared")
	boom := errors.New("clear failed")
	require.ErrorIs(t, h.Store.Reset(ctx, r.Key(), func(context.Context, Tx) error { return boom }), boom)
	st, err = h.Store.Status(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, recs[len(recs)-1].Position, st.Checkpoint, "a reset whose clear failed moved the checkpoint")

	require.NoError(t, projection.Rebuild(ctx, h.Store, p))
	more := appendN(t, ctx, h.Journal, "", "s:1", "E", 5)
	recs = append(recs, more...)
	require.Eventually(t, func() bool {
		st, err := h.Store.Status(ctx, r.Key())
		require.NoError(t, err)
		return st.Checkpoint == more[len(more)-1].Position && st.Events == uint64(len(recs))
	}, 20*time.Second, 10*time.Millisecond)
	exactlyOnce(t, h, "declared@1", recs)
}
