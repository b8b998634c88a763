package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
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

// When a tag's owner holds no state (a cluster member without the aggregate
// registered), a command with Uses folds the streams from the journal with
// the aggregates' Evolve: that fold equals the aggregate's own (FoldFrom).
func TestDCBAggregateFoldFallback(t *testing.T) {
	ctx := context.Background()
	j := memory.New()
	rt, err := New(ctx, Config{Journal: j, NodeID: "fallback"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	require.NoError(t, errors.Join(
		RegisterEvent[boxAdded](rt, "BoxAdded", 1),
		RegisterEvent[boxMoved](rt, "BoxMoved", 1),
		RegisterAggregate(rt, Aggregate[box]{
			Name:    "box",
			Initial: func() box { return box{} },
			Decide: func(b box, cmd any) ([]any, error) {
				return []any{cmd}, nil
			},
			Evolve: evolveBox,
		}),
	))
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

	_, ok := fromStates(cmd, map[journal.Tag]any{boxes.Tag("a"): box{ID: "a"}, boxes.Tag("b"): nil})
	require.False(t, ok, "an owner without a state makes the executor fold")

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
	_, held := boxes.Lookup(s, "c")
	require.False(t, held, "only the query's streams")
}
