package journaltest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func summaryCases() []testCase {
	return []testCase{
		{"TagSummary", testTagSummary},
		{"TagsOfGroup", testTagsOfGroup},
		{"TypeSummaries", testTypeSummaries},
		{"CountAfter", testCountAfter},
		{"ReadEvent", testReadEvent},
		{"Head", testHead},
		{"ReadByCorrelation", testReadByCorrelation},
		{"ReadTypesInTimeRange", testReadTypesInTimeRange},
		{"ReadTypes", testReadTypes},
	}
}

func tagSummary(t *testing.T, h Harness, stream journal.StreamID) journal.TagSummary {
	t.Helper()
	sum, err := h.Journal.TagSummary(testContext(t), stream)
	require.NoError(t, err)
	return sum
}

func testTagSummary(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const a, b journal.Tag = "account:1", "account:2"
	recs := appendEach(t, ctx, j, newEvent("E", a), newEvent("E", a, b), newEvent("E"), newEvent("E", a))
	mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("E", a), "tenant-b"))

	sa := tagSummary(t, h, journal.Stream(a))
	require.Equal(t, journal.Stream(a), sa.Stream.Normalize())
	require.Equal(t, uint64(3), sa.Version, "version is the stream's event count")
	require.Equal(t, recs[0].Position, sa.FirstPosition)
	require.Equal(t, recs[3].Position, sa.LastPosition)
	require.True(t, recs[0].RecordedAt.Equal(sa.FirstRecordedAt), "first time %v, want %v", sa.FirstRecordedAt, recs[0].RecordedAt)
	require.True(t, recs[3].RecordedAt.Equal(sa.LastRecordedAt), "last time %v, want %v", sa.LastRecordedAt, recs[3].RecordedAt)

	sb := tagSummary(t, h, journal.Stream(b))
	require.Equal(t, uint64(1), sb.Version)
	require.Equal(t, recs[1].Position, sb.FirstPosition)
	require.Equal(t, recs[1].Position, sb.LastPosition)

	require.Equal(t, sa, tagSummary(t, h, journal.StreamID{Tag: a}), "an empty partition means the default one")

	unknown := tagSummary(t, h, journal.Stream("account:3"))
	require.Zero(t, unknown.Version, "an unknown stream has version 0")
	require.True(t, unknown.FirstPosition.IsZero())
	require.True(t, unknown.LastPosition.IsZero())
	require.True(t, unknown.FirstRecordedAt.IsZero() && unknown.LastRecordedAt.IsZero(), "an unknown stream has no times")

	other := tagSummary(t, h, journal.StreamID{Partition: "tenant-b", Tag: a})
	require.Equal(t, uint64(1), other.Version, "summaries are per partition")
}

func testTagsOfGroup(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	tags := []journal.Tag{"account:2", "account:10", "account:1", "accountant:1", "account", "account:x:y", "acc:1", "user:1"}
	for i, tag := range tags {
		events := make([]journal.Event, i%3+1)
		for k := range events {
			events[k] = newEvent("E", tag)
		}
		mustAppend(t, ctx, j, journal.AppendOptions{}, events...)
	}
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", "account:2", "user:1"))
	mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("E", "account:3"), "tenant-b"))

	got, err := j.TagsOfGroup(ctx, journal.DefaultPartition, "account")
	require.NoError(t, err)
	type entry struct {
		tag     journal.Tag
		version uint64
	}
	var entries []entry
	for _, s := range got {
		entries = append(entries, entry{s.Stream.Tag, s.Version})
		require.Equal(t, journal.DefaultPartition, s.Stream.Normalize().Partition)
		sum := tagSummary(t, h, journal.Stream(s.Stream.Tag))
		require.Equal(t, sum.FirstPosition, s.FirstPosition, "tag %s", s.Stream.Tag)
		require.Equal(t, sum.LastPosition, s.LastPosition, "tag %s", s.Stream.Tag)
	}
	// Ordered by tag (byte order); the group is the text before the first colon.
	require.Equal(t, []entry{
		{"account", 2},
		{"account:1", 3},
		{"account:10", 2},
		{"account:2", 2},
		{"account:x:y", 3},
	}, entries)

	for _, g := range []string{"acc_unt", "acc%", "accoun", "nobody"} {
		none, err := j.TagsOfGroup(ctx, journal.DefaultPartition, g)
		require.NoError(t, err)
		require.Empty(t, none, "group %q matches no tag", g)
	}
	users, err := j.TagsOfGroup(ctx, "", "user")
	require.NoError(t, err)
	require.Len(t, users, 1, "an empty partition means the default one")
	require.Equal(t, uint64(3), users[0].Version)

	tenant, err := j.TagsOfGroup(ctx, "tenant-b", "account")
	require.NoError(t, err)
	require.Len(t, tenant, 1)
	require.Equal(t, journal.Tag("account:3"), tenant[0].Stream.Tag)
}

func testTypeSummaries(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	empty, err := j.TypeSummaries(ctx)
	require.NoError(t, err)
	require.Empty(t, empty)

	var recs []journal.Record
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Withdrawn", "a:1"), newEvent("Deposited", "a:1"), newEvent("Deposited")).Records...)
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Deposited", "a:2"), newEvent("Closed")).Records...)
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("Withdrawn", "a:1"), "tenant-b")).Records...)
	_, err = j.Append(ctx, []journal.Event{newEvent("Rejected", "a:1")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"a:1": 0}})
	require.ErrorIs(t, err, journal.ErrVersionMismatch)

	got, err := j.TypeSummaries(ctx)
	require.NoError(t, err)
	counts := make([]journal.TypeSummary, len(got))
	for i, s := range got {
		counts[i] = journal.TypeSummary{Type: s.Type, Count: s.Count}
	}
	require.Equal(t, []journal.TypeSummary{
		{Type: "Closed", Count: 1},
		{Type: "Deposited", Count: 3},
		{Type: "Withdrawn", Count: 2},
	}, counts, "counts per type across partitions, ordered by type; rejected appends count nothing")
	for _, s := range got {
		var first, last *journal.Record
		for i := range recs {
			if recs[i].Type != s.Type {
				continue
			}
			if first == nil {
				first = &recs[i]
			}
			last = &recs[i]
		}
		require.Equal(t, first.Position, s.FirstPosition, "first position of %s", s.Type)
		require.Equal(t, last.Position, s.LastPosition, "last position of %s", s.Type)
		require.True(t, first.RecordedAt.Equal(s.FirstRecordedAt), "first time of %s: %v, want %v", s.Type, s.FirstRecordedAt, first.RecordedAt)
		require.True(t, last.RecordedAt.Equal(s.LastRecordedAt), "last time of %s: %v, want %v", s.Type, s.LastRecordedAt, last.RecordedAt)
	}
}

func testCountAfter(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	require.Zero(t, count(t, ctx, j))
	recs := appendEach(t, ctx, j, newEvent("A"), newEvent("B", "x:1"), newEvent("C"))
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("D"), "tenant-b"), inPartition(newEvent("E"), "tenant-b")).Records...)
	n := uint64(len(recs))
	require.Equal(t, n, count(t, ctx, j), "every partition counts")
	for i, r := range recs {
		c, err := j.CountAfter(ctx, r.Position)
		require.NoError(t, err)
		require.Equal(t, n-uint64(i)-1, c, "count after record %d", i)
	}
	c, err := j.CountAfter(ctx, justAfter(recs[1].Position))
	require.NoError(t, err)
	require.Equal(t, n-2, c, "after a position between events")
	c, err = j.CountAfter(ctx, farBeyond(recs[len(recs)-1].Position))
	require.NoError(t, err)
	require.Zero(t, c)
}

func testReadEvent(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	_, err := j.ReadEvent(ctx, uuid.New())
	require.ErrorIs(t, err, journal.ErrNotFound, "empty journal")

	recs := appendEach(t, ctx, j, newEvent("A", "x:1"), inPartition(newEvent("B", "x:1"), "tenant-b"))
	for _, r := range recs {
		got, err := j.ReadEvent(ctx, r.ID)
		require.NoError(t, err)
		requireSameRecord(t, r, got)
	}
	_, err = j.ReadEvent(ctx, journal.NewEventID())
	require.ErrorIs(t, err, journal.ErrNotFound)
	_, err = j.ReadEvent(ctx, uuid.Nil)
	require.ErrorIs(t, err, journal.ErrNotFound)
}

func testHead(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	require.True(t, head(t, ctx, j).IsZero())
	r1 := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("A"), newEvent("B"))
	require.Equal(t, r1.Last(), head(t, ctx, j), "Head is the newest position")
	r2 := mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("C"), "tenant-b"))
	require.Equal(t, r2.Last(), head(t, ctx, j), "Head spans every partition")
	require.True(t, r2.Last().After(r1.Last()))

	// Head round-trips through its string form.
	p, err := journal.ParsePosition(head(t, ctx, j).String())
	require.NoError(t, err)
	require.Equal(t, r2.Last(), p)
	require.Empty(t, collect(t, j.ReadAll(ctx, p, 0)), "nothing lies after Head")
}

func testReadByCorrelation(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	corr := func(e journal.Event, id string) journal.Event {
		e.Metadata.CorrelationID = id
		return e
	}
	r1 := mustAppend(t, ctx, j, journal.AppendOptions{}, corr(newEvent("A", "x:1"), "c1"), corr(newEvent("B"), "c2")).Records
	r2 := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("C")).Records
	r3 := mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(corr(newEvent("D"), "c1"), "tenant-b"), inPartition(corr(newEvent("E"), "c1"), "tenant-b")).Records
	_ = r2

	got := collect(t, j.ReadByCorrelation(ctx, "c1"))
	require.Equal(t, []uuid.UUID{r1[0].ID, r3[0].ID, r3[1].ID}, ids(got), "every event of the correlation, in position order")
	requireSameRecord(t, r1[0], got[0])
	require.Equal(t, []uuid.UUID{r1[1].ID}, ids(collect(t, j.ReadByCorrelation(ctx, "c2"))))
	require.Empty(t, collect(t, j.ReadByCorrelation(ctx, "c3")))
	require.Empty(t, collect(t, j.ReadByCorrelation(ctx, "C1")), "correlation IDs are case-sensitive")
	require.ErrorIs(t, drain(j.ReadByCorrelation(ctx, "")), journal.ErrInvalidQuery, "an empty correlation ID")
}

// testReadTypesInTimeRange: ReadTypes with From and To reads the types in
// [From, To), across partitions, in position order.
func testReadTypesInTimeRange(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	first := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Deposited", "a:1"), newEvent("Withdrawn", "a:1")).Records
	// Append filler until the backend's clock has moved past the first append.
	var filler []journal.Record
	deadline := time.Now().Add(5 * time.Second)
	for len(filler) == 0 || !filler[len(filler)-1].RecordedAt.After(first[1].RecordedAt) {
		require.True(t, time.Now().Before(deadline), "RecordedAt never advanced past %s", first[1].RecordedAt)
		filler = append(filler, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Filler")).Records...)
	}
	second := appendEach(t, ctx, j, newEvent("Deposited", "a:1"), inPartition(newEvent("Withdrawn", "a:2"), "tenant-b"))
	second = append(second, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Closed", "a:1")).Records...)
	require.False(t, second[0].RecordedAt.Before(filler[len(filler)-1].RecordedAt), "RecordedAt does not go back in time")

	types := []string{"Deposited", "Withdrawn"}
	read := func(types []string, from, to time.Time) []uuid.UUID {
		recs := collect(t, j.ReadTypes(ctx, journal.TypeQuery{Types: types, From: from, To: to}))
		requireAscending(t, recs)
		for _, r := range recs {
			require.False(t, r.RecordedAt.Before(from), "RecordedAt ≥ from")
			require.True(t, r.RecordedAt.Before(to), "RecordedAt < to")
		}
		return ids(recs)
	}
	far := time.Now().Add(time.Hour)
	long := time.Now().Add(-time.Hour)

	require.Equal(t, []uuid.UUID{first[0].ID, first[1].ID, second[0].ID, second[1].ID}, read(types, long, far), "every partition, in position order")
	require.Equal(t, []uuid.UUID{first[0].ID, second[0].ID}, read([]string{"Deposited"}, long, far))
	require.Equal(t, []uuid.UUID{first[0].ID, first[1].ID}, read(types, first[0].RecordedAt, filler[len(filler)-1].RecordedAt), "from is inclusive")
	require.Equal(t, []uuid.UUID{second[0].ID, second[1].ID}, read(types, first[1].RecordedAt.Add(time.Microsecond), far), "events before from are excluded")
	require.Empty(t, read(types, long, first[0].RecordedAt), "to is exclusive")
	require.Empty(t, read([]string{"Nope"}, long, far))
	require.Equal(t, []uuid.UUID{second[2].ID}, read([]string{"Closed"}, long, far))
}

// testReadTypes: ReadTypes reads types across partitions in either
// direction, within a time range, up to a limit, and resumes from a cursor
// without repeating or skipping a record; bad queries are ErrInvalidQuery.
func testReadTypes(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	var all []journal.Record
	for i := range 4 {
		all = append(all, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Deposited", "a:1"), newEvent("Filler")).Records...)
		all = append(all, mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("Withdrawn", "a:2"), "tenant-b")).Records...)
		if i == 1 {
			all = append(all, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Closed")).Records...)
		}
	}
	types := []string{"Deposited", "Withdrawn", "Closed"}
	var want []uuid.UUID
	for _, r := range all {
		if r.Type != "Filler" {
			want = append(want, r.ID)
		}
	}
	reversed := slices.Clone(want)
	slices.Reverse(reversed)
	read := func(q journal.TypeQuery) []journal.Record {
		t.Helper()
		return collect(t, j.ReadTypes(ctx, q))
	}

	asc := read(journal.TypeQuery{Types: types})
	requireAscending(t, asc)
	require.Equal(t, want, ids(asc), "every partition, in position order")
	desc := read(journal.TypeQuery{Types: types, Descending: true})
	require.Equal(t, reversed, ids(desc), "newest first")

	// Pages of 3, each resuming from the last record of the one before.
	for _, descending := range []bool{false, true} {
		var got []uuid.UUID
		var cursor journal.Position
		for range len(want) {
			page := read(journal.TypeQuery{Types: types, Descending: descending, Cursor: cursor, Limit: 3})
			require.LessOrEqual(t, len(page), 3, "the limit holds")
			if len(page) == 0 {
				break
			}
			got = append(got, ids(page)...)
			cursor = page[len(page)-1].Position
		}
		if descending {
			require.Equal(t, reversed, got, "descending pages cover every record once")
		} else {
			require.Equal(t, want, got, "ascending pages cover every record once")
		}
	}

	// A time range: the records whose RecordedAt falls in it, wherever the
	// backend's clock put them.
	from, to := asc[2].RecordedAt, asc[len(asc)-1].RecordedAt
	var inRange []uuid.UUID
	for _, r := range asc {
		if !r.RecordedAt.Before(from) && r.RecordedAt.Before(to) {
			inRange = append(inRange, r.ID)
		}
	}
	got := read(journal.TypeQuery{Types: types, From: from, To: to})
	require.Equal(t, inRange, ids(got), "From inclusive, To exclusive")
	require.Equal(t, []uuid.UUID{want[len(want)-1]}, ids(read(journal.TypeQuery{Types: types, From: to})), "an open upper bound")
	require.Equal(t, ids(asc[:1]), ids(read(journal.TypeQuery{Types: []string{"Deposited"}, Limit: 1})))
	require.Empty(t, read(journal.TypeQuery{Types: []string{"Nope"}}))

	for name, q := range map[string]journal.TypeQuery{
		"no types":       {},
		"an empty type":  {Types: []string{""}},
		"negative limit": {Types: types, Limit: -1},
		"empty range":    {Types: types, From: to, To: from},
	} {
		err := drain(j.ReadTypes(ctx, q))
		require.ErrorIs(t, err, journal.ErrInvalidQuery, name)
	}
}
