package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// TestConditionImpliedByCheckedStreams: an append whose condition's query
// names a tag the append claims, with the condition's position at or after
// that stream's newest event, sends no condition query in a direct attempt;
// the write statement's check of the stream (version and newest position)
// stands for it. A position before the newest event still gets the query.
func TestConditionImpliedByCheckedStreams(t *testing.T) {
	t.Parallel()
	f, px := openXY(t)
	ctx := t.Context()
	cond := func(after journal.Position) *journal.AppendCondition {
		return &journal.AppendCondition{FailIfEventsMatch: journal.TagQuery("x"), After: after}
	}

	before := f.journal.EngineStats()
	_, err := f.journal.Append(ctx, []journal.Event{event("Changed", "y")},
		journal.AppendOptions{Expect: map[journal.Tag]uint64{"x": 1}, Condition: cond(px)})
	require.NoError(t, err)
	after := f.journal.EngineStats()
	require.Equal(t, before.ImpliedConditions+1, after.ImpliedConditions, "no condition query was needed")
	require.Equal(t, before.Direct+1, after.Direct)
	require.Equal(t, before.Fenced, after.Fenced)

	_, err = f.journal.Append(ctx, []journal.Event{event("Changed", "y")},
		journal.AppendOptions{Expect: map[journal.Tag]uint64{"x": 1}, Condition: cond(journal.Position{})})
	require.ErrorIs(t, err, journal.ErrAppendConditionFailed, "x's event lies after the zero position")
	require.Equal(t, after.ImpliedConditions, f.journal.EngineStats().ImpliedConditions)
}

// TestImpliedConditionRestsOnTheNewestPositionTheDatabaseHolds: when the
// streams row says x's newest event is another than the journal remembers
// (here forged; in real life something that bypassed the engine), the
// direct attempt is fenced by the write statement and the batch is decided
// again on what was read, the condition evaluated by its query.
func TestImpliedConditionRestsOnTheNewestPositionTheDatabaseHolds(t *testing.T) {
	t.Parallel()
	f, px := openXY(t)
	ctx := t.Context()
	_, err := f.pool.Exec(ctx, `UPDATE `+quote(f.cfg.Schema)+`.streams SET last_seq = last_seq + 1000 WHERE tag = 'x'`)
	require.NoError(t, err)

	before := f.journal.EngineStats()
	_, err = f.journal.Append(ctx, []journal.Event{event("Changed", "y")}, journal.AppendOptions{
		Expect:    map[journal.Tag]uint64{"x": 1},
		Condition: &journal.AppendCondition{FailIfEventsMatch: journal.TagQuery("x"), After: px},
	})
	require.NoError(t, err, "no event of x lies after px")
	after := f.journal.EngineStats()
	require.Equal(t, before.Fenced+1, after.Fenced, "the write statement saw x's newest position differ")
	require.Equal(t, before.Read+1, after.Read)
}

// openXY opens a journal on a fresh schema whose streams x and y have one
// event each, appended through it (so it remembers their heads), and returns
// it with the position of x's event.
func openXY(t *testing.T) (*fixture, journal.Position) {
	t.Helper()
	f := setup(t)
	first, err := f.journal.Append(t.Context(), []journal.Event{event("Opened", "x"), event("Opened", "y")}, journal.AppendOptions{})
	require.NoError(t, err)
	return f, first.Records[0].Position
}
