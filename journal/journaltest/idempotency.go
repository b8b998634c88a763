package journaltest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func idempotencyCases() []testCase {
	return []testCase{
		{"ReappendReturnsOriginalAsDuplicate", testReappendReturnsOriginal},
		{"DuplicateSkipsChecks", testDuplicateSkipsChecks},
		{"PartialOverlapFails", testPartialOverlapFails},
		{"SameIDDifferentEventFails", testSameIDDifferentEventFails},
	}
}

func testReappendReturnsOriginal(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const tag journal.Tag = "cart:1"
	events := []journal.Event{newEvent("Added", tag), newEvent("Added", tag, "sku:9")}
	orig := mustAppend(t, ctx, j, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: 0}}, events...)
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Other", "cart:2"))

	before := captureState(t, ctx, j)
	for range 3 {
		again, err := j.Append(ctx, events, journal.AppendOptions{})
		require.NoError(t, err, "re-appending stored event IDs is not an error")
		require.True(t, again.Duplicate, "the result is marked Duplicate")
		require.Len(t, again.Records, len(orig.Records))
		for i := range orig.Records {
			requireSameRecord(t, orig.Records[i], again.Records[i])
		}
		requireUnchanged(t, ctx, j, before, "duplicate append")
	}
	sum, err := j.TagSummary(ctx, journal.Stream(tag))
	require.NoError(t, err)
	require.Equal(t, uint64(2), sum.Version, "a duplicate does not advance the stream")
}

func testDuplicateSkipsChecks(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const tag journal.Tag = "cart:1"
	events := []journal.Event{newEvent("Added", tag)}
	orig := mustAppend(t, ctx, j, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: 0}}, events...)
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Added", tag))

	// The retry of an append whose outcome was unknown carries its original,
	// now stale, expectation and condition: it must still resolve as a duplicate.
	before := captureState(t, ctx, j)
	again, err := j.Append(ctx, events, journal.AppendOptions{
		Expect:    map[journal.Tag]uint64{tag: 0},
		Condition: &journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(tag)},
	})
	require.NoError(t, err, "a duplicate is not checked against expectations or conditions")
	require.True(t, again.Duplicate)
	require.Equal(t, orig.Records[0].Position, again.Records[0].Position)
	requireUnchanged(t, ctx, j, before, "duplicate append with stale checks")
}

func testPartialOverlapFails(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	stored := []journal.Event{newEvent("Added", "cart:1"), newEvent("Added", "cart:1")}
	mustAppend(t, ctx, j, journal.AppendOptions{}, stored...)

	for _, c := range []struct {
		name   string
		events []journal.Event
	}{
		{"stored then new", []journal.Event{stored[1], newEvent("Added", "cart:1")}},
		{"new then stored", []journal.Event{newEvent("Added", "cart:1"), stored[0]}},
		{"stored subset plus new", []journal.Event{stored[0], stored[1], newEvent("Added", "cart:2")}},
	} {
		before := captureState(t, ctx, j)
		_, err := j.Append(ctx, c.events, journal.AppendOptions{})
		require.ErrorIs(t, err, journal.ErrDuplicateMismatch, c.name)
		requireUnchanged(t, ctx, j, before, c.name)
		for _, e := range c.events {
			if e.ID != stored[0].ID && e.ID != stored[1].ID {
				requireNotStored(t, ctx, j, e)
			}
		}
	}
}

func testSameIDDifferentEventFails(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	orig := newEvent("Added", "cart:1")
	mustAppend(t, ctx, j, journal.AppendOptions{}, orig)

	changedType := orig
	changedType.Type = "Removed"
	changedData := orig
	changedData.Data = json.RawMessage(`{"other":true}`)
	changedTags := orig
	changedTags.Tags = []journal.Tag{"cart:2"}
	for name, e := range map[string]journal.Event{"type": changedType, "data": changedData, "tags": changedTags} {
		before := captureState(t, ctx, j)
		_, err := j.Append(ctx, []journal.Event{e}, journal.AppendOptions{})
		require.ErrorIs(t, err, journal.ErrDuplicateMismatch, "a stored ID with a different %s", name)
		requireUnchanged(t, ctx, j, before, "different event under a stored ID")
	}
	got, err := j.ReadEvent(ctx, orig.ID)
	require.NoError(t, err)
	require.Equal(t, "Added", got.Type)
}
