package journaltest

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func dcbCases() []testCase {
	return []testCase{
		{"EmptyStoreReadsNothing", testEmptyStoreReadsNothing},
		{"ReadAllInOrder", testReadAllInOrder},
		{"FromIsInclusive", testFromIsInclusive},
		{"Limit", testLimit},
		{"Backwards", testBackwards},
		{"OrAcrossItems", testOrAcrossItems},
		{"AndOfTagsWithinItem", testAndOfTagsWithinItem},
		{"TypeFilter", testTypeFilter},
		{"TypeAndTags", testTypeAndTags},
		{"OptionsNeverChangeMatches", testOptionsNeverChangeMatches},
		{"ConditionSucceedsWhenLastMatchIsAfter", testConditionSucceedsWhenLastMatchIsAfter},
		{"ConditionSucceedsWithoutMatches", testConditionSucceedsWithoutMatches},
		{"ConditionFailsOnMatchAfterAfter", testConditionFailsOnMatchAfterAfter},
		{"ConditionWithoutAfterFailsOnAnyMatch", testConditionWithoutAfterFailsOnAnyMatch},
		{"ConditionQueryAll", testConditionQueryAll},
		{"MetadataRoundTrip", testMetadataRoundTrip},
		{"EmptyQueryItemRejected", testEmptyQueryItemRejected},
	}
}

// The DCB fixture: seven events over two accounts and two transfers.
//
//	0 Opened      account:1
//	1 Deposited   account:1
//	2 Opened      account:2
//	3 Transferred account:1 account:2 transfer:1
//	4 Deposited   account:2
//	5 Closed      (no tags)
//	6 Deposited   account:1 transfer:2
const (
	acc1 journal.Tag = "account:1"
	acc2 journal.Tag = "account:2"
	acc9 journal.Tag = "account:9"
	tx1  journal.Tag = "transfer:1"
	tx2  journal.Tag = "transfer:2"
)

// seedDCB appends the fixture in three appends (one, two and four events) and
// returns the records in fixture order.
func seedDCB(t *testing.T, ctx context.Context, j journal.Journal) []journal.Record {
	t.Helper()
	events := []journal.Event{
		newEvent("Opened", acc1),
		newEvent("Deposited", acc1),
		newEvent("Opened", acc2),
		newEvent("Transferred", acc1, acc2, tx1),
		newEvent("Deposited", acc2),
		newEvent("Closed"),
		newEvent("Deposited", acc1, tx2),
	}
	var recs []journal.Record
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, events[0]).Records...)
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, events[1:3]...).Records...)
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, events[3:]...).Records...)
	requireAscending(t, recs)
	return recs
}

// fixtureQueries are queries over the fixture with the indexes they match.
func fixtureQueries() []struct {
	name string
	q    journal.Query
	want []int
} {
	return []struct {
		name string
		q    journal.Query
		want []int
	}{
		{"all", journal.AllEvents(), []int{0, 1, 2, 3, 4, 5, 6}},
		{"one tag", journal.TagQuery(acc1), []int{0, 1, 3, 6}},
		{"two tags", journal.TagQuery(acc1, acc2), []int{3}},
		{"tag and transfer", journal.TagQuery(acc1, tx2), []int{6}},
		{"unknown tag", journal.TagQuery(acc9), nil},
		{"type", journal.Query{Items: []journal.QueryItem{{Types: []string{"Deposited"}}}}, []int{1, 4, 6}},
		{"types", journal.Query{Items: []journal.QueryItem{{Types: []string{"Opened", "Closed"}}}}, []int{0, 2, 5}},
		{"unknown type", journal.Query{Items: []journal.QueryItem{{Types: []string{"Nope"}}}}, nil},
		{"type and tag", journal.Query{Items: []journal.QueryItem{{Types: []string{"Deposited"}, Tags: []journal.Tag{acc1}}}}, []int{1, 6}},
		{"types and tags", journal.Query{Items: []journal.QueryItem{{Types: []string{"Deposited", "Transferred"}, Tags: []journal.Tag{acc1, acc2}}}}, []int{3}},
		{"or", journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{acc2}}, {Types: []string{"Closed"}}}}, []int{2, 3, 4, 5}},
		{"overlapping or", journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{acc1}}, {Types: []string{"Deposited"}}}}, []int{0, 1, 3, 4, 6}},
		{"or of ands", journal.Query{Items: []journal.QueryItem{
			{Types: []string{"Opened"}, Tags: []journal.Tag{acc2}},
			{Tags: []journal.Tag{acc1, tx2}},
		}}, []int{2, 6}},
	}
}

func testEmptyStoreReadsNothing(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	require.Empty(t, collect(t, j.Read(ctx, journal.AllEvents(), journal.ReadOptions{})))
	require.Empty(t, collect(t, j.Read(ctx, journal.AllEvents(), journal.ReadOptions{Backwards: true})))
	require.Empty(t, collect(t, j.Read(ctx, journal.TagQuery(acc1), journal.ReadOptions{})))
	require.Empty(t, collect(t, j.ReadAll(ctx, journal.Position{}, 0)))
	require.Empty(t, collect(t, j.ReadStream(ctx, journal.Stream(acc1), 1, 0)))
	require.True(t, head(t, ctx, j).IsZero(), "Head of an empty journal is the zero position")
	require.Zero(t, count(t, ctx, j))
}

func testReadAllInOrder(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedDCB(t, ctx, j)

	got := collect(t, j.Read(ctx, journal.AllEvents(), journal.ReadOptions{}))
	require.Equal(t, ids(recs), ids(got), "Read(AllEvents) returns every event in append order")
	for i := range recs {
		requireSameRecord(t, recs[i], got[i])
	}
	require.Equal(t, ids(recs), ids(collect(t, j.ReadAll(ctx, journal.Position{}, 0))), "ReadAll returns every event in append order")
	require.Equal(t, ids(recs), ids(collect(t, j.Read(ctx, journal.Query{All: true, AllPartitions: true}, journal.ReadOptions{}))))
	require.Equal(t, recs[len(recs)-1].Position, head(t, ctx, j), "Head is the last position")
	require.Equal(t, uint64(len(recs)), count(t, ctx, j))
}

func testFromIsInclusive(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedDCB(t, ctx, j)
	read := func(q journal.Query, from journal.Position) []uuid.UUID {
		return ids(collect(t, j.Read(ctx, q, journal.ReadOptions{From: from})))
	}

	require.Equal(t, ids(recs), read(journal.AllEvents(), journal.Position{}), "zero From reads from the start")
	require.Equal(t, ids(recs[3:]), read(journal.AllEvents(), recs[3].Position), "From is inclusive")
	require.Equal(t, ids(recs[4:]), read(journal.AllEvents(), justAfter(recs[3].Position)), "From just after a position excludes it")
	require.Equal(t, recordIDs(recs, 3, 6), read(journal.TagQuery(acc1), recs[2].Position), "From on a non-matching position")
	require.Equal(t, recordIDs(recs, 6), read(journal.TagQuery(acc1), recs[6].Position), "From on the last event")
	require.Empty(t, read(journal.AllEvents(), justAfter(recs[6].Position)), "From after the head reads nothing")
	require.Empty(t, read(journal.AllEvents(), farBeyond(recs[6].Position)), "From far beyond the head reads nothing")

	// ReadAll's after is exclusive.
	require.Equal(t, ids(recs[4:]), ids(collect(t, j.ReadAll(ctx, recs[3].Position, 0))), "ReadAll's after is exclusive")
	require.Empty(t, collect(t, j.ReadAll(ctx, recs[6].Position, 0)))
}

func testLimit(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedDCB(t, ctx, j)
	read := func(q journal.Query, opts journal.ReadOptions) []uuid.UUID {
		return ids(collect(t, j.Read(ctx, q, opts)))
	}

	require.Equal(t, ids(recs[:3]), read(journal.AllEvents(), journal.ReadOptions{Limit: 3}))
	require.Equal(t, ids(recs[:1]), read(journal.AllEvents(), journal.ReadOptions{Limit: 1}))
	require.Equal(t, recordIDs(recs, 0, 1), read(journal.TagQuery(acc1), journal.ReadOptions{Limit: 2}), "Limit applies after filtering")
	require.Equal(t, recordIDs(recs, 3, 4), read(journal.TagQuery(acc2), journal.ReadOptions{From: recs[3].Position, Limit: 2}), "Limit with From")
	require.Equal(t, recordIDs(recs, 0, 1, 3, 6), read(journal.TagQuery(acc1), journal.ReadOptions{Limit: 100}), "a Limit above the match count returns every match")
	require.Equal(t, ids(recs), read(journal.AllEvents(), journal.ReadOptions{Limit: 0}), "Limit 0 means no limit")

	require.Equal(t, ids(recs[:2]), ids(collect(t, j.ReadAll(ctx, journal.Position{}, 2))), "ReadAll limit")
	require.Equal(t, ids(recs[2:5]), ids(collect(t, j.ReadAll(ctx, recs[1].Position, 3))), "ReadAll after and limit")
}

func testBackwards(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedDCB(t, ctx, j)
	read := func(q journal.Query, opts journal.ReadOptions) []journal.Record {
		opts.Backwards = true
		got := collect(t, j.Read(ctx, q, opts))
		requireDescending(t, got)
		return got
	}

	require.Equal(t, reversed(ids(recs)), ids(read(journal.AllEvents(), journal.ReadOptions{})), "zero From reads backwards from the head")
	require.Equal(t, recordIDs(recs, 3, 2, 1, 0), ids(read(journal.AllEvents(), journal.ReadOptions{From: recs[3].Position})), "backwards From is inclusive")
	require.Equal(t, recordIDs(recs, 6, 5), ids(read(journal.AllEvents(), journal.ReadOptions{Limit: 2})), "backwards Limit takes the newest")
	require.Equal(t, recordIDs(recs, 6, 3), ids(read(journal.TagQuery(acc1), journal.ReadOptions{Limit: 2})), "backwards Limit applies after filtering")
	require.Equal(t, recordIDs(recs, 3, 1), ids(read(journal.TagQuery(acc1), journal.ReadOptions{From: recs[5].Position, Limit: 2})))
	require.Equal(t, reversed(ids(recs)), ids(read(journal.AllEvents(), journal.ReadOptions{From: farBeyond(recs[6].Position)})), "backwards From beyond the head reads from the head")
	require.Equal(t, recordIDs(recs, 0), ids(read(journal.AllEvents(), journal.ReadOptions{From: recs[0].Position})))
	require.Empty(t, read(journal.TagQuery(acc2), journal.ReadOptions{From: recs[1].Position}), "no match at or before From")
}

// requireQueryMatches reads q forwards and fails unless it returns exactly the
// fixture records at want, in order.
func requireQueryMatches(t *testing.T, ctx context.Context, j journal.Journal, recs []journal.Record, q journal.Query, want []int, msg string) {
	t.Helper()
	got := collect(t, j.Read(ctx, q, journal.ReadOptions{}))
	requireAscending(t, got)
	require.Equal(t, recordIDs(recs, want...), ids(got), msg)
}

func testOrAcrossItems(t *testing.T, h Harness) {
	ctx := testContext(t)
	recs := seedDCB(t, ctx, h.Journal)
	items := func(it ...journal.QueryItem) journal.Query { return journal.Query{Items: it} }
	requireQueryMatches(t, ctx, h.Journal, recs, items(journal.QueryItem{Tags: []journal.Tag{acc2}}, journal.QueryItem{Types: []string{"Closed"}}), []int{2, 3, 4, 5}, "tag OR type")
	requireQueryMatches(t, ctx, h.Journal, recs, items(journal.QueryItem{Tags: []journal.Tag{acc1}}, journal.QueryItem{Tags: []journal.Tag{acc2}}), []int{0, 1, 2, 3, 4, 6}, "an event matching two items is returned once")
	requireQueryMatches(t, ctx, h.Journal, recs, items(journal.QueryItem{Tags: []journal.Tag{tx1}}, journal.QueryItem{Tags: []journal.Tag{tx2}}), []int{3, 6}, "tag OR tag")
	requireQueryMatches(t, ctx, h.Journal, recs, items(journal.QueryItem{Tags: []journal.Tag{acc9}}, journal.QueryItem{Types: []string{"Nope"}}), nil, "no item matches")
	requireQueryMatches(t, ctx, h.Journal, recs, items(journal.QueryItem{Types: []string{"Opened"}, Tags: []journal.Tag{acc2}}, journal.QueryItem{Tags: []journal.Tag{acc1, tx2}}), []int{2, 6}, "OR of ANDs")
}

func testAndOfTagsWithinItem(t *testing.T, h Harness) {
	ctx := testContext(t)
	recs := seedDCB(t, ctx, h.Journal)
	requireQueryMatches(t, ctx, h.Journal, recs, journal.TagQuery(acc1), []int{0, 1, 3, 6}, "one tag")
	requireQueryMatches(t, ctx, h.Journal, recs, journal.TagQuery(acc1, acc2), []int{3}, "both tags")
	requireQueryMatches(t, ctx, h.Journal, recs, journal.TagQuery(acc2, acc1), []int{3}, "tag order does not matter")
	requireQueryMatches(t, ctx, h.Journal, recs, journal.TagQuery(acc1, acc2, tx1), []int{3}, "three tags")
	requireQueryMatches(t, ctx, h.Journal, recs, journal.TagQuery(acc1, acc2, tx2), nil, "no event carries all three")
	requireQueryMatches(t, ctx, h.Journal, recs, journal.TagQuery(acc1, acc9), nil, "one unknown tag fails the item")
}

func testTypeFilter(t *testing.T, h Harness) {
	ctx := testContext(t)
	recs := seedDCB(t, ctx, h.Journal)
	types := func(ts ...string) journal.Query { return journal.Query{Items: []journal.QueryItem{{Types: ts}}} }
	requireQueryMatches(t, ctx, h.Journal, recs, types("Deposited"), []int{1, 4, 6}, "one type")
	requireQueryMatches(t, ctx, h.Journal, recs, types("Opened", "Closed"), []int{0, 2, 5}, "types are any-of")
	requireQueryMatches(t, ctx, h.Journal, recs, types("Closed"), []int{5}, "an event with no queried tag matches by type")
	requireQueryMatches(t, ctx, h.Journal, recs, types("Nope"), nil, "unknown type")
	requireQueryMatches(t, ctx, h.Journal, recs, types("deposited"), nil, "types are case-sensitive")
}

func testTypeAndTags(t *testing.T, h Harness) {
	ctx := testContext(t)
	recs := seedDCB(t, ctx, h.Journal)
	item := func(types []string, tags ...journal.Tag) journal.Query {
		return journal.Query{Items: []journal.QueryItem{{Types: types, Tags: tags}}}
	}
	requireQueryMatches(t, ctx, h.Journal, recs, item([]string{"Deposited"}, acc1), []int{1, 6}, "type AND tag")
	requireQueryMatches(t, ctx, h.Journal, recs, item([]string{"Deposited", "Transferred"}, acc1, acc2), []int{3}, "types any-of AND tags all-of")
	requireQueryMatches(t, ctx, h.Journal, recs, item([]string{"Opened"}, acc1, acc2), nil, "type matches but not all tags")
	requireQueryMatches(t, ctx, h.Journal, recs, item([]string{"Closed"}, acc1), nil, "tag matches but not the type")
}

func testOptionsNeverChangeMatches(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedDCB(t, ctx, j)
	mid := recs[3].Position
	for _, fq := range fixtureQueries() {
		want := recordIDs(recs, fq.want...)
		base := collect(t, j.Read(ctx, fq.q, journal.ReadOptions{}))
		require.Equal(t, want, ids(base), "query %q", fq.name)

		back := collect(t, j.Read(ctx, fq.q, journal.ReadOptions{Backwards: true}))
		require.Equal(t, reversed(want), ids(back), "query %q backwards returns the same matches reversed", fq.name)

		// Page through with Limit 1 forwards and backwards: the same set.
		var paged []uuid.UUID
		from := journal.Position{}
		for range len(recs) + 1 {
			page := collect(t, j.Read(ctx, fq.q, journal.ReadOptions{From: from, Limit: 1}))
			if len(page) == 0 {
				break
			}
			require.Len(t, page, 1)
			paged = append(paged, page[0].ID)
			from = justAfter(page[0].Position)
		}
		require.Equal(t, want, paged, "query %q paged forwards with Limit 1", fq.name)

		var pagedBack []uuid.UUID
		var before journal.Position
		for range len(recs) + 1 {
			opts := journal.ReadOptions{Backwards: true, Limit: 1, From: before}
			page := collect(t, j.Read(ctx, fq.q, opts))
			if len(page) == 0 {
				break
			}
			require.Len(t, page, 1)
			pagedBack = append(pagedBack, page[0].ID)
			p := page[0].Position
			if p.Seq == 0 {
				require.NotZero(t, p.Commit)
				before = journal.Position{Commit: p.Commit - 1, Seq: math.MaxInt64}
			} else {
				before = journal.Position{Commit: p.Commit, Seq: p.Seq - 1}
			}
			if before.IsZero() {
				break
			}
		}
		require.Equal(t, reversed(want), pagedBack, "query %q paged backwards with Limit 1", fq.name)

		// From splits the same set.
		var wantFrom, wantTo []uuid.UUID
		for _, k := range fq.want {
			if !recs[k].Position.Before(mid) {
				wantFrom = append(wantFrom, recs[k].ID)
			}
			if !recs[k].Position.After(mid) {
				wantTo = append(wantTo, recs[k].ID)
			}
		}
		require.Equal(t, wantFrom, ids(collect(t, j.Read(ctx, fq.q, journal.ReadOptions{From: mid}))), "query %q from the middle", fq.name)
		require.Equal(t, reversed(wantTo), ids(collect(t, j.Read(ctx, fq.q, journal.ReadOptions{From: mid, Backwards: true}))), "query %q backwards from the middle", fq.name)
	}
}

// conditional appends ev under cond.
func conditional(ctx context.Context, j journal.Journal, cond journal.AppendCondition, ev journal.Event) (journal.AppendResult, error) {
	return j.Append(ctx, []journal.Event{ev}, journal.AppendOptions{Condition: &cond})
}

func testConditionSucceedsWhenLastMatchIsAfter(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedDCB(t, ctx, j)

	// account:1's last match is the head.
	_, err := conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(acc1), After: recs[6].Position}, newEvent("Deposited", acc1))
	require.NoError(t, err, "no match after the last matched position")

	// account:2's last match (4) is followed by events that do not match it.
	_, err = conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(acc2), After: recs[4].Position}, newEvent("Deposited", acc2))
	require.NoError(t, err, "events after After that do not match the query do not fail the condition")

	// An OR query whose newest match is the Closed event (5).
	q := journal.Query{Items: []journal.QueryItem{{Types: []string{"Closed"}}, {Tags: []journal.Tag{tx1}}}}
	_, err = conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: q, After: recs[5].Position}, newEvent("Closed"))
	require.NoError(t, err)
	require.Equal(t, uint64(len(recs)+3), count(t, ctx, j))
}

func testConditionSucceedsWithoutMatches(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal

	// Empty journal, no After.
	_, err := conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(acc1)}, newEvent("Opened", acc1))
	require.NoError(t, err, "nothing matches in an empty journal")

	recs := seedDCB(t, ctx, j)
	_, err = conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(acc9)}, newEvent("Opened", acc9))
	require.NoError(t, err, "a query without matches never fails, even without After")

	_, err = conditional(ctx, j, journal.AppendCondition{
		FailIfEventsMatch: journal.TagQuery(journal.NewTag("account", "10")),
		After:             farBeyond(head(t, ctx, j)),
	}, newEvent("Opened", journal.NewTag("account", "10")))
	require.NoError(t, err, "After past the head with no matches")

	_, err = conditional(ctx, j, journal.AppendCondition{
		FailIfEventsMatch: journal.TagQuery(acc1),
		After:             justAfter(head(t, ctx, j)),
	}, newEvent("Deposited", acc1))
	require.NoError(t, err, "every match lies before an After past the head")
	require.Equal(t, uint64(len(recs)+4), count(t, ctx, j))
}

func testConditionFailsOnMatchAfterAfter(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedDCB(t, ctx, j)

	cases := []struct {
		name  string
		cond  journal.AppendCondition
		event journal.Event
	}{
		{"match right after", journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(acc1), After: recs[3].Position}, newEvent("Deposited", acc1)},
		{"non-matching position between", journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(acc1), After: recs[5].Position}, newEvent("Deposited", acc1)},
		{"type query", journal.AppendCondition{FailIfEventsMatch: journal.Query{Items: []journal.QueryItem{{Types: []string{"Closed"}}}}, After: recs[4].Position}, newEvent("Closed")},
		{"second item matches", journal.AppendCondition{FailIfEventsMatch: journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{acc9}}, {Tags: []journal.Tag{acc2, tx1}}}}, After: recs[2].Position}, newEvent("Opened", acc9)},
		{"the new event does not match", journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(acc2), After: recs[3].Position}, newEvent("Unrelated")},
	}
	for _, c := range cases {
		before := captureState(t, ctx, j)
		_, err := conditional(ctx, j, c.cond, c.event)
		require.ErrorIs(t, err, journal.ErrAppendConditionFailed, c.name)
		requireUnchanged(t, ctx, j, before, c.name)
		requireNotStored(t, ctx, j, c.event)
	}
}

func testConditionWithoutAfterFailsOnAnyMatch(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	seedDCB(t, ctx, j)
	for _, q := range []journal.Query{
		journal.TagQuery(acc2),
		journal.TagQuery(acc1, tx2),
		{Items: []journal.QueryItem{{Types: []string{"Closed"}}}},
	} {
		before := captureState(t, ctx, j)
		ev := newEvent("Opened", acc1)
		_, err := conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: q}, ev)
		require.ErrorIs(t, err, journal.ErrAppendConditionFailed, "zero After fails when anything matches")
		requireUnchanged(t, ctx, j, before, "failed condition")
		requireNotStored(t, ctx, j, ev)
	}
}

func testConditionQueryAll(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	all := journal.AllEvents()

	first, err := conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: all}, newEvent("Opened", acc1))
	require.NoError(t, err, "Query.All without After succeeds on an empty journal")

	before := captureState(t, ctx, j)
	ev := newEvent("Opened", acc2)
	_, err = conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: all}, ev)
	require.ErrorIs(t, err, journal.ErrAppendConditionFailed, "Query.All without After fails once anything exists")
	requireUnchanged(t, ctx, j, before, "failed Query.All condition")

	second, err := conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: all, After: first.Last()}, newEvent("Opened", acc2))
	require.NoError(t, err, "Query.All with After = head succeeds")

	before = captureState(t, ctx, j)
	_, err = conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: all, After: first.Last()}, newEvent("Closed", acc2))
	require.ErrorIs(t, err, journal.ErrAppendConditionFailed, "Query.All fails on any event after After")
	requireUnchanged(t, ctx, j, before, "failed Query.All condition")

	// Query.All is scoped to its partition: events elsewhere do not fail it.
	mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("Opened", acc1), "elsewhere"))
	_, err = conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: all, After: second.Last()}, newEvent("Closed", acc2))
	require.NoError(t, err, "Query.All of the default partition ignores other partitions")
}

func testMetadataRoundTrip(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	created := time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)
	ev := journal.Event{
		ID:            journal.NewEventID(),
		Type:          "MoneyDeposited",
		SchemaVersion: 3,
		Tags:          []journal.Tag{"zeta:9", "account:42", "branch:x"},
		Data:          json.RawMessage(`{"amount": 12.5, "note": "héllo \"wörld\"", "nested": {"list": [1, 2, {"deep": true}], "nothing": null}}`),
		Metadata: journal.Metadata{
			CorrelationID:  "corr-1",
			CausationID:    "cause-1",
			UserID:         "user-7",
			IdempotencyKey: "idem-1",
			Scopes:         []string{"accounts:write", "audit"},
			Partition:      "tenant-a",
			CreatedAt:      created,
			TraceParent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			TraceState:     "vendor=opaque,other=1",
		},
	}
	plain := newEvent("Plain", "account:42")

	res := mustAppend(t, ctx, j, journal.AppendOptions{}, ev)
	resPlain := mustAppend(t, ctx, j, journal.AppendOptions{}, plain)
	r := res.Records[0]

	require.Equal(t, ev.ID, r.ID)
	require.Equal(t, ev.Type, r.Type)
	require.Equal(t, ev.SchemaVersion, r.SchemaVersion)
	require.Equal(t, []journal.Tag{"account:42", "branch:x", "zeta:9"}, r.Tags, "tags are stored sorted")
	require.JSONEq(t, string(ev.Data), string(r.Data))
	requireSameMetadata(t, ev.Metadata, r.Metadata)
	require.Equal(t, "tenant-a", r.Partition())
	require.Len(t, r.Links, len(r.Tags), "one link per tag")
	for i, l := range r.Links {
		require.Equal(t, r.Tags[i], l.Tag, "links are in tag order")
		require.Equal(t, uint64(1), l.Version)
		require.Equal(t, journal.Hash{}, l.PrevHash, "the first event of a stream has a zero PrevHash")
		require.NotEqual(t, journal.Hash{}, l.Hash)
	}
	require.False(t, r.RecordedAt.IsZero(), "RecordedAt is set by the backend")
	require.Equal(t, time.UTC, r.RecordedAt.Location(), "RecordedAt is UTC")
	require.Equal(t, r.RecordedAt, r.RecordedAt.Truncate(time.Microsecond), "RecordedAt is truncated to microseconds")
	require.WithinDuration(t, time.Now(), r.RecordedAt, time.Minute, "RecordedAt is the backend's current time")

	p := resPlain.Records[0]
	require.Equal(t, journal.DefaultPartition, p.Metadata.Partition, "an empty partition is stored as the default partition")
	require.Equal(t, journal.DefaultPartition, p.Partition())
	require.True(t, p.Metadata.CreatedAt.IsZero())
	require.Empty(t, p.Metadata.Scopes)

	// Every read path returns the same record.
	got, err := j.ReadEvent(ctx, ev.ID)
	require.NoError(t, err)
	requireSameRecord(t, r, got)

	tenant := journal.Query{Partition: "tenant-a", All: true}
	viaRead := collect(t, j.Read(ctx, tenant, journal.ReadOptions{}))
	require.Len(t, viaRead, 1)
	requireSameRecord(t, r, viaRead[0])

	viaStream := collect(t, j.ReadStream(ctx, journal.StreamID{Partition: "tenant-a", Tag: "account:42"}, 1, 0))
	require.Len(t, viaStream, 1)
	requireSameRecord(t, r, viaStream[0])

	viaAll := collect(t, j.ReadAll(ctx, journal.Position{}, 0))
	require.Len(t, viaAll, 2)
	requireSameRecord(t, r, viaAll[0])
	requireSameRecord(t, p, viaAll[1])

	viaCorr := collect(t, j.ReadByCorrelation(ctx, "corr-1"))
	require.Len(t, viaCorr, 1)
	requireSameRecord(t, r, viaCorr[0])

	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for rec, err := range j.Subscribe(subCtx, tenant, journal.Position{}) {
		require.NoError(t, err)
		requireSameRecord(t, r, rec)
		break
	}
}

func testEmptyQueryItemRejected(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	seedDCB(t, ctx, j)
	bad := []struct {
		name string
		q    journal.Query
	}{
		{"item with neither types nor tags", journal.Query{Items: []journal.QueryItem{{}}}},
		{"one empty item among valid ones", journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{acc1}}, {}}}},
		{"no items", journal.Query{}},
		{"empty tag", journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{""}}}}},
		{"empty type", journal.Query{Items: []journal.QueryItem{{Types: []string{""}}}}},
		{"AllPartitions without All", journal.Query{AllPartitions: true, Items: []journal.QueryItem{{Tags: []journal.Tag{acc1}}}}},
	}
	for _, b := range bad {
		recs, err := collectErr(j.Read(ctx, b.q, journal.ReadOptions{}))
		require.ErrorIs(t, err, journal.ErrInvalidQuery, "Read: %s", b.name)
		require.Empty(t, recs, "Read: %s yields nothing before the error", b.name)

		_, err = collectErr(j.Read(ctx, b.q, journal.ReadOptions{Backwards: true}))
		require.ErrorIs(t, err, journal.ErrInvalidQuery, "Read backwards: %s", b.name)

		recs, err = collectErr(j.Subscribe(ctx, b.q, journal.Position{}))
		require.ErrorIs(t, err, journal.ErrInvalidQuery, "Subscribe: %s", b.name)
		require.Empty(t, recs)

		before := captureState(t, ctx, j)
		ev := newEvent("Opened", acc9)
		_, err = conditional(ctx, j, journal.AppendCondition{FailIfEventsMatch: b.q}, ev)
		require.ErrorIs(t, err, journal.ErrInvalidQuery, "condition: %s", b.name)
		requireUnchanged(t, ctx, j, before, "invalid condition query")
		requireNotStored(t, ctx, j, ev)
	}
}
