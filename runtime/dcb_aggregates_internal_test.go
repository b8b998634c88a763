package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/tagconsistency"
)

type boxAdded struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

type boxMoved struct {
	From string `json:"from"`
	To   string `json:"to"`
	N    int    `json:"n"`
}

func (e boxMoved) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("box", e.From), journal.NewTag("box", e.To)}
}

type box struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

func evolveBox(b box, ev any) box {
	switch e := ev.(type) {
	case boxAdded:
		b.ID, b.N = e.ID, b.N+e.N
	case boxMoved:
		if e.From == b.ID {
			b.N -= e.N
		}
		if e.To == b.ID {
			b.N += e.N
		}
	}
	return b
}

// startBoxes starts a runtime with the box events and aggregate, whose Decide
// returns the command as its event.
func startBoxes(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	rt, err := New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	require.NoError(t, errors.Join(
		RegisterEvent[boxAdded](rt, "BoxAdded", 1),
		RegisterEvent[boxMoved](rt, "BoxMoved", 1),
		RegisterAggregate(rt, Aggregate[box]{
			Name:    "box",
			Initial: func() box { return box{} },
			Decide:  func(_ box, cmd any) ([]any, error) { return []any{cmd}, nil },
			Evolve:  evolveBox,
		}),
	))
	return rt
}

// When a tag's owner holds no state (a cluster member without the aggregate
// registered), a command with Uses folds the streams from the journal with
// the aggregates' Evolve: that fold equals the aggregate's own (FoldFrom).
func TestDCBAggregateFoldFallback(t *testing.T) {
	ctx := context.Background()
	j := memory.New()
	rt := startBoxes(t, Config{Journal: j, NodeID: "fallback"})
	boxes, err := Uses[box](rt, "box")
	require.NoError(t, err)
	move, err := RegisterDCB(rt, DCB[boxMoved, DCBStates]{
		Name:   "Move",
		Uses:   []AggregateUse{boxes},
		Query:  func(m boxMoved) journal.Query { return journal.Query{Items: boxes.Items(m.From, m.To)} },
		Decide: func(m boxMoved, _ DCBStates) ([]any, error) { return []any{m}, nil },
	})
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		_, err := rt.Execute(ctx, Target{Aggregate: "box", ID: id}, boxAdded{ID: id, N: 10})
		require.NoError(t, err)
	}
	for _, m := range []boxMoved{{From: "a", To: "b", N: 3}, {From: "b", To: "c", N: 5}, {From: "c", To: "a", N: 1}} {
		_, err := move.Execute(ctx, m)
		require.NoError(t, err)
	}

	q := journal.Query{Items: boxes.Items("a", "b")}
	tags := move.aggs.streamTags(q, nil)
	initial, evolve, fromStates := aggregateForm[boxMoved, DCBStates](move.aggs, tags)
	cmd := boxMoved{From: "a", To: "b"}

	_, ok := fromStates(cmd, map[journal.Tag]tagconsistency.Held{boxes.Tag("a"): {State: box{ID: "a"}, Version: 1}, boxes.Tag("b"): {}})
	require.False(t, ok, "an owner without a state makes the executor fold")
	held, ok := fromStates(cmd, map[journal.Tag]tagconsistency.Held{boxes.Tag("a"): {State: box{ID: "a", N: 7}, Version: 4}, boxes.Tag("b"): {State: box{}}})
	require.True(t, ok)
	require.EqualValues(t, 4, boxes.Version(held, "a"))
	a, exists := boxes.Lookup(held, "a")
	require.True(t, exists)
	require.Equal(t, 7, a.N)
	_, exists = boxes.Lookup(held, "b")
	require.False(t, exists, "a reserved stream without events does not exist")
	require.Equal(t, box{}, boxes.Of(held, "b"), "Of gives its Initial state")

	s := initial(cmd)
	for rec, err := range j.Read(ctx, q, journal.ReadOptions{}) {
		require.NoError(t, err)
		ev, erased, err := rt.reg.decodeEvent(ctx, &rec)
		require.NoError(t, err)
		s = evolve(cmd, s, DCBEvent{Value: ev, Record: &rec, Erased: erased})
	}
	for _, id := range []string{"a", "b"} {
		want, _, _, err := rt.host.FoldFrom(ctx, j, journal.Stream(boxes.Tag(id)), rt.reg.model("box"))
		require.NoError(t, err)
		require.Equal(t, want, boxes.Of(s, id))
	}
	require.Equal(t, 10-3+1, boxes.Of(s, "a").N)
	require.EqualValues(t, 3, boxes.Version(s, "a"), "added, moved out, moved in")
	require.EqualValues(t, 3, boxes.Version(s, "b"), "added, moved in, moved out")
	_, found := boxes.Lookup(s, "c")
	require.False(t, found, "only the query's streams")
	require.Zero(t, boxes.Version(s, "c"))

	// A stream of the query without events (a box never added): held with
	// its Initial state, at version 0, and not existing.
	q = journal.Query{Items: boxes.Items("a", "z")}
	initial, evolve, _ = aggregateForm[boxMoved, DCBStates](move.aggs, move.aggs.streamTags(q, nil))
	s = initial(cmd)
	for rec, err := range j.Read(ctx, q, journal.ReadOptions{}) {
		require.NoError(t, err)
		ev, erased, err := rt.reg.decodeEvent(ctx, &rec)
		require.NoError(t, err)
		s = evolve(cmd, s, DCBEvent{Value: ev, Record: &rec, Erased: erased})
	}
	_, found = boxes.Lookup(s, "z")
	require.False(t, found, "a box never added does not exist")
	require.Zero(t, boxes.Version(s, "z"))
	require.Equal(t, box{}, boxes.Of(s, "z"))
	_, found = boxes.Lookup(s, "a")
	require.True(t, found)
}
