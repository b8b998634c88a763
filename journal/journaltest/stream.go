package journaltest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func streamCases() []testCase {
	return []testCase{
		{"ReadStreamFromVersionAndLimit", testReadStreamFromVersionAndLimit},
		{"VersionsGapFreeAcrossMultiTagEvents", testVersionsGapFreeAcrossMultiTagEvents},
		{"ExpectPerTag", testExpectPerTag},
		{"ExpectMismatchWritesNothing", testExpectMismatchWritesNothing},
	}
}

// versions returns the versions of recs within tag's stream.
func versions(recs []journal.Record, tag journal.Tag) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Version(tag)
	}
	return out
}

// oneTo returns 1..n.
func oneTo(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

func testReadStreamFromVersionAndLimit(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const tag journal.Tag = "order:1"
	var events []journal.Event
	for range 6 {
		events = append(events, newEvent("ItemAdded", tag))
	}
	other := newEvent("ItemAdded", "order:2")
	recs := appendEach(t, ctx, j, events[0], events[1], other)
	recs = append(recs[:2], mustAppend(t, ctx, j, journal.AppendOptions{}, events[2:]...).Records...)
	s := journal.Stream(tag)

	all := collect(t, j.ReadStream(ctx, s, 1, 0))
	require.Equal(t, eventIDs(events...), ids(all), "the stream holds only its own events, in order")
	require.Equal(t, oneTo(6), versions(all, tag))
	requireAscending(t, all)
	for i := range all {
		requireSameRecord(t, recs[i], all[i])
	}

	require.Equal(t, eventIDs(events...), ids(collect(t, j.ReadStream(ctx, s, 0, 0))), "fromVersion 0 reads from the start")
	require.Equal(t, eventIDs(events[3:]...), ids(collect(t, j.ReadStream(ctx, s, 4, 0))), "fromVersion is inclusive")
	require.Equal(t, eventIDs(events[1:3]...), ids(collect(t, j.ReadStream(ctx, s, 2, 2))), "limit")
	require.Equal(t, eventIDs(events[5]), ids(collect(t, j.ReadStream(ctx, s, 6, 10))), "limit beyond the end")
	require.Empty(t, collect(t, j.ReadStream(ctx, s, 7, 0)), "fromVersion after the last version")
	require.Empty(t, collect(t, j.ReadStream(ctx, journal.Stream("order:3"), 1, 0)), "unknown stream")
	require.Equal(t, eventIDs(events...), ids(collect(t, j.ReadStream(ctx, journal.StreamID{Tag: tag}, 1, 0))), "an empty partition means the default partition")
	require.Equal(t, eventIDs(other), ids(collect(t, j.ReadStream(ctx, journal.Stream("order:2"), 1, 0))))
}

func testVersionsGapFreeAcrossMultiTagEvents(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const a, b, c journal.Tag = "a:1", "b:1", "c:1"
	res1 := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", a), newEvent("E", a, b))
	res2 := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", b))
	res3 := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", c, a, b), newEvent("E"), newEvent("E", b, c))
	recs := append(append(append([]journal.Record{}, res1.Records...), res2.Records...), res3.Records...)

	// Record.Version per tag, 0 for a tag the event does not carry.
	want := []struct{ a, b, c uint64 }{
		{1, 0, 0},
		{2, 1, 0},
		{0, 2, 0},
		{3, 3, 1},
		{0, 0, 0},
		{0, 4, 2},
	}
	for i, w := range want {
		require.Equal(t, w.a, recs[i].Version(a), "record %d version of %s", i, a)
		require.Equal(t, w.b, recs[i].Version(b), "record %d version of %s", i, b)
		require.Equal(t, w.c, recs[i].Version(c), "record %d version of %s", i, c)
	}

	for tag, n := range map[journal.Tag]int{a: 3, b: 4, c: 2} {
		got := collect(t, j.ReadStream(ctx, journal.Stream(tag), 1, 0))
		require.Equal(t, oneTo(n), versions(got, tag), "stream %s has versions 1..%d", tag, n)
		requireAscending(t, got)
		sum, err := j.TagSummary(ctx, journal.Stream(tag))
		require.NoError(t, err)
		require.Equal(t, uint64(n), sum.Version)
	}
}

func testExpectPerTag(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const a, b, fresh journal.Tag = "a:1", "b:1", "fresh:1"

	_, err := j.Append(ctx, []journal.Event{newEvent("E", a)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{a: 0}})
	require.NoError(t, err, "Expect 0 on an empty stream")
	_, err = j.Append(ctx, []journal.Event{newEvent("E", a, b)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{a: 1, b: 0}})
	require.NoError(t, err, "Expect on every tag of a multi-tag event")
	res, err := j.Append(ctx, []journal.Event{newEvent("E", a), newEvent("E", a, b)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{a: 2}})
	require.NoError(t, err, "Expect on one tag leaves the others unchecked")
	require.Equal(t, []uint64{3, 4}, versions(res.Records, a), "a multi-event append takes consecutive versions")
	require.Equal(t, uint64(2), res.Records[1].Version(b))

	_, err = j.Append(ctx, []journal.Event{newEvent("E", fresh, a)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{fresh: 0, a: 4}})
	require.NoError(t, err)

	// Mismatches, each detailed.
	for _, c := range []struct {
		name     string
		events   []journal.Event
		expect   map[journal.Tag]uint64
		stream   journal.Tag
		expected uint64
		actual   uint64
	}{
		{"stale expectation", []journal.Event{newEvent("E", a)}, map[journal.Tag]uint64{a: 4}, a, 4, 5},
		{"expectation ahead", []journal.Event{newEvent("E", a)}, map[journal.Tag]uint64{a: 9}, a, 9, 5},
		{"expect empty on a non-empty stream", []journal.Event{newEvent("E", b)}, map[journal.Tag]uint64{b: 0}, b, 0, 2},
		{"expect a version of an empty stream", []journal.Event{newEvent("E", "empty:1")}, map[journal.Tag]uint64{"empty:1": 1}, "empty:1", 1, 0},
		{"one of two tags wrong", []journal.Event{newEvent("E", a, b)}, map[journal.Tag]uint64{a: 5, b: 1}, b, 1, 2},
	} {
		before := captureState(t, ctx, j)
		_, err := j.Append(ctx, c.events, journal.AppendOptions{Expect: c.expect})
		require.ErrorIs(t, err, journal.ErrVersionMismatch, c.name)
		var vm *journal.VersionMismatchError
		require.True(t, errors.As(err, &vm), "%s: want a *journal.VersionMismatchError, got %T: %v", c.name, err, err)
		require.Equal(t, journal.Stream(c.stream), vm.Stream.Normalize(), c.name)
		require.Equal(t, c.expected, vm.Expected, "%s: Expected", c.name)
		require.Equal(t, c.actual, vm.Actual, "%s: Actual", c.name)
		requireUnchanged(t, ctx, j, before, c.name)
		requireNotStored(t, ctx, j, c.events...)
	}
}

func testExpectMismatchWritesNothing(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const a, b journal.Tag = "a:1", "b:1"
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", a), newEvent("E", b))

	// The first event alone would pass; the failing expectation must undo the whole append.
	before := captureState(t, ctx, j)
	events := []journal.Event{newEvent("E", a), newEvent("E", b), newEvent("E", "c:1")}
	_, err := j.Append(ctx, events, journal.AppendOptions{Expect: map[journal.Tag]uint64{a: 1, b: 0}})
	require.ErrorIs(t, err, journal.ErrVersionMismatch)
	requireUnchanged(t, ctx, j, before, "version mismatch")
	requireNotStored(t, ctx, j, events...)
	for tag, v := range map[journal.Tag]uint64{a: 1, b: 1, "c:1": 0} {
		sum, err := j.TagSummary(ctx, journal.Stream(tag))
		require.NoError(t, err)
		require.Equal(t, v, sum.Version, "stream %s keeps its version", tag)
	}

	// The stream goes on from where it was.
	res := mustAppend(t, ctx, j, journal.AppendOptions{Expect: map[journal.Tag]uint64{a: 1, b: 1}}, newEvent("E", a, b))
	require.Equal(t, uint64(2), res.Records[0].Version(a))
	require.Equal(t, uint64(2), res.Records[0].Version(b))
}

func partitionCases() []testCase {
	return []testCase{
		{"PartitionsIsolateStreamsAndQueries", testPartitionsIsolate},
	}
}

func testPartitionsIsolate(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const tag journal.Tag = "account:1"
	a1 := mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("Opened", tag), "tenant-a"), inPartition(newEvent("Deposited", tag), "tenant-a")).Records
	// The same tag in another partition is another stream: it starts empty.
	b1 := mustAppend(t, ctx, j, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: 0}}, inPartition(newEvent("Opened", tag), "tenant-b")).Records
	d1 := mustAppend(t, ctx, j, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: 0}}, newEvent("Opened", tag)).Records
	require.Equal(t, uint64(1), b1[0].Version(tag))
	require.Equal(t, uint64(1), d1[0].Version(tag))
	require.Equal(t, "tenant-b", b1[0].Partition())

	// Expect in one partition is judged against that partition's stream only.
	_, err := j.Append(ctx, []journal.Event{inPartition(newEvent("Deposited", tag), "tenant-b")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: 2}})
	require.ErrorIs(t, err, journal.ErrVersionMismatch)
	b2 := mustAppend(t, ctx, j, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: 1}}, inPartition(newEvent("Deposited", tag), "tenant-b")).Records
	require.Equal(t, uint64(2), b2[0].Version(tag))

	stream := func(p string) []journal.Record {
		return collect(t, j.ReadStream(ctx, journal.StreamID{Partition: p, Tag: tag}, 1, 0))
	}
	require.Equal(t, ids(a1), ids(stream("tenant-a")))
	require.Equal(t, ids(append(b1, b2...)), ids(stream("tenant-b")))
	require.Equal(t, ids(d1), ids(stream("")))
	require.Equal(t, ids(d1), ids(stream(journal.DefaultPartition)))
	require.Empty(t, stream("tenant-c"))

	read := func(q journal.Query) []journal.Record { return collect(t, j.Read(ctx, q, journal.ReadOptions{})) }
	require.Equal(t, ids(a1), ids(read(journal.Query{Partition: "tenant-a", Items: []journal.QueryItem{{Tags: []journal.Tag{tag}}}})))
	require.Equal(t, ids(append(b1, b2...)), ids(read(journal.Query{Partition: "tenant-b", All: true})))
	require.Equal(t, ids(d1), ids(read(journal.TagQuery(tag))), "a query without partition reads the default partition")
	require.Equal(t, ids(d1), ids(read(journal.AllEvents())))
	require.Len(t, read(journal.Query{All: true, AllPartitions: true}), 5, "AllPartitions reads every partition")
	require.Len(t, collect(t, j.ReadAll(ctx, journal.Position{}, 0)), 5, "ReadAll reads every partition")
	require.Equal(t, uint64(5), count(t, ctx, j))

	// A condition in one partition ignores matches in another.
	_, err = j.Append(ctx, []journal.Event{inPartition(newEvent("Closed", tag), "tenant-a")}, journal.AppendOptions{
		Condition: &journal.AppendCondition{FailIfEventsMatch: journal.Query{Partition: "tenant-a", Items: []journal.QueryItem{{Tags: []journal.Tag{tag}}}}, After: a1[1].Position},
	})
	require.NoError(t, err, "events of tenant-b and default after After do not fail tenant-a's condition")
	_, err = j.Append(ctx, []journal.Event{inPartition(newEvent("Opened", "account:2"), "tenant-c")}, journal.AppendOptions{
		Condition: &journal.AppendCondition{FailIfEventsMatch: journal.Query{Partition: "tenant-c", All: true}},
	})
	require.NoError(t, err, "an empty partition has no matches")

	// Summaries are per partition.
	for p, v := range map[string]uint64{"tenant-a": 3, "tenant-b": 2, journal.DefaultPartition: 1} {
		sum, err := j.TagSummary(ctx, journal.StreamID{Partition: p, Tag: tag})
		require.NoError(t, err)
		require.Equal(t, v, sum.Version, "partition %s", p)
		require.Equal(t, journal.StreamID{Partition: p, Tag: tag}, sum.Stream.Normalize())
	}
	groups, err := j.TagsOfGroup(ctx, "tenant-c", "account")
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, journal.Tag("account:2"), groups[0].Stream.Tag)

	// An append's events share one partition.
	before := captureState(t, ctx, j)
	mixed := []journal.Event{inPartition(newEvent("E", tag), "tenant-a"), inPartition(newEvent("E", tag), "tenant-b")}
	_, err = j.Append(ctx, mixed, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrInvalidEvent, "events of one append must share a partition")
	requireUnchanged(t, ctx, j, before, "mixed partitions")
}
