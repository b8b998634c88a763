package journaltest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func hashChainCases() []testCase {
	return []testCase{
		{"StreamsVerify", testStreamsVerify},
		{"TamperDetected", testTamperDetected},
		{"HeadHashRecorded", testHeadHashRecorded},
		{"AlterationsDetected", testAlterationsDetected},
		{"RemovedMiddleDetected", testRemovedMiddleDetected},
		{"TruncationDetected", testTruncationDetected},
		{"ReorderDetected", testReorderDetected},
		{"UntaggedChained", testUntaggedChained},
		{"UntaggedReservedTags", testUntaggedReservedTags},
		{"UntaggedTamperDetected", testUntaggedTamperDetected},
		{"UntaggedChainsConcurrent", testUntaggedChainsConcurrent},
	}
}

// seedChains appends multi-tag events over three streams and returns them.
func seedChains(t *testing.T, h Harness) []journal.Record {
	t.Helper()
	ctx := testContext(t)
	j := h.Journal
	const a, b, c journal.Tag = "a:1", "b:1", "c:1"
	var recs []journal.Record
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", a), newEvent("E", a, b)).Records...)
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", b, c)).Records...)
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", c, a, b), newEvent("E", a), newEvent("E")).Records...)
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("E", a), "tenant-b")).Records...)
	return recs
}

func testStreamsVerify(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	seedChains(t, h)
	for _, c := range []struct {
		stream journal.StreamID
		n      uint64
	}{
		{journal.Stream("a:1"), 4},
		{journal.Stream("b:1"), 3},
		{journal.Stream("c:1"), 2},
		{journal.StreamID{Partition: "tenant-b", Tag: "a:1"}, 1},
		{journal.Stream("nothing:1"), 0},
	} {
		recs := collect(t, j.ReadStream(ctx, c.stream, 1, 0))
		requireChained(t, recs, c.stream.Tag)
		n, err := journal.VerifyStream(ctx, j, c.stream)
		require.NoError(t, err, "stream %s verifies", c.stream)
		require.Equal(t, c.n, n, "stream %s: events verified", c.stream)
	}
	// The same content in another partition's stream starts a chain of its own.
	first := collect(t, j.ReadStream(ctx, journal.Stream("a:1"), 1, 1))[0]
	other := collect(t, j.ReadStream(ctx, journal.StreamID{Partition: "tenant-b", Tag: "a:1"}, 1, 1))[0]
	require.NotEqual(t, first.Links[0].Hash, other.Links[0].Hash, "hashes cover each event's own content")
}

func testTamperDetected(t *testing.T, h Harness) {
	if h.Alter == nil {
		t.Skip("Harness.Alter is nil: tamper case skipped")
	}
	ctx := testContext(t)
	j := h.Journal
	recs := seedChains(t, h)
	victim := recs[3] // tags a:1 (version 3), b:1 (version 3), c:1 (version 2)
	require.Equal(t, []journal.Tag{"a:1", "b:1", "c:1"}, victim.Tags)
	for _, tag := range victim.Tags {
		_, err := journal.VerifyStream(ctx, j, journal.Stream(tag))
		require.NoError(t, err, "stream %s verifies before tampering", tag)
	}

	require.NoError(t, h.Alter(ctx, victim.ID, AlterData))
	altered, err := j.ReadEvent(ctx, victim.ID)
	require.NoError(t, err)
	require.NotEqual(t, string(victim.Data), string(altered.Data), "Tamper altered the stored data")

	for _, tag := range victim.Tags {
		stream := journal.Stream(tag)
		n, err := journal.VerifyStream(ctx, j, stream)
		var ce *journal.ChainError
		require.True(t, errors.As(err, &ce), "stream %s: want a *journal.ChainError, got %v", tag, err)
		require.Equal(t, victim.Version(tag), ce.Version, "stream %s: broken at the altered event's version", tag)
		require.Equal(t, victim.Position, ce.Position)
		require.Equal(t, stream, ce.Stream.Normalize())
		require.Equal(t, victim.Version(tag)-1, n, "stream %s: the events before it verified", tag)
	}
	_, err = journal.VerifyStream(ctx, j, journal.StreamID{Partition: "tenant-b", Tag: "a:1"})
	require.NoError(t, err, "a stream without the altered event still verifies")
}

func testHeadHashRecorded(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	recs := seedChains(t, h)
	for _, stream := range []journal.StreamID{journal.Stream("a:1"), journal.Stream("b:1"), journal.Stream("c:1"), {Partition: "tenant-b", Tag: "a:1"}} {
		var last journal.Record
		for _, r := range recs {
			if r.Partition() == stream.Partition && r.HasTag(stream.Tag) {
				last = r
			}
		}
		sum, err := j.TagSummary(ctx, stream)
		require.NoError(t, err)
		require.Equal(t, last.Version(stream.Tag), sum.Version, "stream %s", stream)
		require.Equal(t, linkOf(t, last, stream.Tag).Hash, sum.HeadHash, "stream %s: HeadHash is the newest event's hash", stream)
	}
	group, err := j.TagsOfGroup(ctx, journal.DefaultPartition, "a")
	require.NoError(t, err)
	require.Len(t, group, 1)
	require.Equal(t, linkOf(t, recs[4], "a:1").Hash, group[0].HeadHash, "TagsOfGroup reports head hashes too")
	empty, err := j.TagSummary(ctx, journal.Stream("nothing:1"))
	require.NoError(t, err)
	require.Equal(t, journal.Hash{}, empty.HeadHash, "a stream without events has the zero head hash")
}

// linkOf returns r's link for tag.
func linkOf(t *testing.T, r journal.Record, tag journal.Tag) journal.StreamLink {
	t.Helper()
	for _, l := range r.Links {
		if l.Tag == tag {
			return l
		}
	}
	require.Failf(t, "no link", "record %s has no link for tag %s", r.ID, tag)
	return journal.StreamLink{}
}

// seedStream appends n single-event appends to stream, each event also
// carrying the tag other (so a second chain runs through the same events),
// and checks that both streams verify.
func seedStream(t *testing.T, j journal.Journal, stream journal.StreamID, other journal.Tag, n int) []journal.Record {
	t.Helper()
	ctx := testContext(t)
	var recs []journal.Record
	for range n {
		recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("E", stream.Tag, other), stream.Partition)).Records...)
	}
	for _, tag := range []journal.Tag{stream.Tag, other} {
		got, err := journal.VerifyStream(ctx, j, journal.StreamID{Partition: stream.Partition, Tag: tag})
		require.NoError(t, err, "stream %s verifies before tampering", tag)
		require.Equal(t, uint64(n), got)
	}
	return recs
}

// requireBroken checks that VerifyStream reports stream broken at version and
// position, after verifying n events.
func requireBroken(t *testing.T, j journal.Journal, stream journal.StreamID, version uint64, pos journal.Position, n uint64, what string) {
	t.Helper()
	got, err := journal.VerifyStream(testContext(t), j, stream)
	var ce *journal.ChainError
	require.True(t, errors.As(err, &ce), "%s: stream %s: want a *journal.ChainError, got %v", what, stream, err)
	require.Equal(t, stream.Normalize(), ce.Stream.Normalize(), what)
	require.Equal(t, version, ce.Version, "%s: broken version (%s)", what, ce.Reason)
	require.Equal(t, pos, ce.Position, "%s: broken position (%s)", what, ce.Reason)
	require.Equal(t, n, got, "%s: the events before the break verified", what)
	require.NotEmpty(t, ce.Reason, what)
}

func testAlterationsDetected(t *testing.T, h Harness) {
	if h.Alter == nil {
		t.Skip("Harness.Alter is nil: alteration cases skipped")
	}
	ctx := testContext(t)
	for _, what := range Alterations() {
		stream := journal.Stream(journal.NewTag("forged", string(what)))
		recs := seedStream(t, h.Journal, stream, journal.NewTag("witness", string(what)), 3)
		require.NoError(t, h.Alter(ctx, recs[1].ID, what), "alter %s", what)
		requireBroken(t, h.Journal, stream, 2, recs[1].Position, 1, "altered "+string(what))
		requireBroken(t, h.Journal, journal.Stream(journal.NewTag("witness", string(what))), 2, recs[1].Position, 1, "altered "+string(what)+", second chain")
	}
}

func testRemovedMiddleDetected(t *testing.T, h Harness) {
	if h.Remove == nil {
		t.Skip("Harness.Remove is nil: removal case skipped")
	}
	stream := journal.StreamID{Partition: "tenant-r", Tag: "account:1"}
	recs := seedStream(t, h.Journal, stream, "branch:1", 4)
	require.NoError(t, h.Remove(testContext(t), recs[1].ID))
	// Version 3 is read where version 2 belongs.
	requireBroken(t, h.Journal, stream, 3, recs[2].Position, 1, "removed middle event")
}

func testTruncationDetected(t *testing.T, h Harness) {
	if h.Remove == nil {
		t.Skip("Harness.Remove is nil: truncation case skipped")
	}
	stream := journal.Stream("account:1")
	recs := seedStream(t, h.Journal, stream, "branch:1", 4)
	require.NoError(t, h.Remove(testContext(t), recs[3].ID))
	// Every remaining link is intact; only the recorded head says version 4
	// existed, at the removed event's position.
	requireBroken(t, h.Journal, stream, 4, recs[3].Position, 3, "removed newest event")
	requireBroken(t, h.Journal, journal.Stream("branch:1"), 4, recs[3].Position, 3, "removed newest event, second chain")
}

func testReorderDetected(t *testing.T, h Harness) {
	if h.Swap == nil {
		t.Skip("Harness.Swap is nil: re-ordering case skipped")
	}
	stream := journal.Stream("account:1")
	recs := seedStream(t, h.Journal, stream, "branch:1", 4)
	require.NoError(t, h.Swap(testContext(t), stream, 2, 3))
	// The event of version 3 is read where version 2 belongs.
	requireBroken(t, h.Journal, stream, 3, recs[2].Position, 1, "swapped events")
}

// seedUntagged appends n untagged events of type typ to partition, one per
// append, each followed by a tagged event of the same type (which stays out
// of the untagged chain), and checks that the chain verifies.
func seedUntagged(t *testing.T, j journal.Journal, partition, typ string, n int) []journal.Record {
	t.Helper()
	ctx := testContext(t)
	var recs []journal.Record
	for range n {
		res := mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent(typ), partition), inPartition(newEvent(typ, "noise:1"), partition))
		recs = append(recs, res.Records[0])
	}
	chain := journal.StreamID{Partition: partition, Tag: journal.UntaggedChain(typ)}
	got, err := journal.VerifyStream(ctx, j, chain)
	require.NoError(t, err, "untagged chain %s verifies before tampering", chain)
	require.Equal(t, uint64(n), got)
	return recs
}

func testUntaggedChained(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	res := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Noted"), newEvent("Tagged", "a:1"), newEvent("Noted"), newEvent("Other"))
	noted1, noted2, other := res.Records[0], res.Records[2], res.Records[3]
	later := mustAppend(t, ctx, j, journal.AppendOptions{}, inPartition(newEvent("Noted"), "tenant-b")).Records
	later = append(later, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Noted")).Records...)
	for _, r := range []journal.Record{noted1, noted2, other, later[0], later[1]} {
		require.Empty(t, r.Tags, "an untagged event stays untagged")
		require.Len(t, r.Links, 1, "an untagged event has one link, to its untagged chain")
		require.Equal(t, journal.UntaggedChain(r.Type), r.Links[0].Tag)
	}
	require.Equal(t, uint64(1), noted1.Links[0].Version)
	require.Equal(t, journal.Hash{}, noted1.Links[0].PrevHash)
	require.Equal(t, uint64(2), noted2.Links[0].Version, "untagged events of one type share a chain")
	require.Equal(t, noted1.Links[0].Hash, noted2.Links[0].PrevHash)
	require.Equal(t, uint64(1), other.Links[0].Version, "another type has its own chain")
	require.Equal(t, uint64(1), later[0].Links[0].Version, "another partition has its own chains")
	require.Equal(t, uint64(3), later[1].Links[0].Version)

	// Read back as stored, by ID, by type, in the feed and as the chain's stream.
	got, err := j.ReadEvent(ctx, noted2.ID)
	require.NoError(t, err)
	requireSameRecord(t, noted2, got)
	byType := collect(t, j.Read(ctx, journal.Query{Items: []journal.QueryItem{{Types: []string{"Noted"}}}}, journal.ReadOptions{}))
	require.Equal(t, ids([]journal.Record{noted1, noted2, later[1]}), ids(byType), "untagged events match by type")
	byTag := collect(t, j.Read(ctx, journal.TagQuery("a:1"), journal.ReadOptions{}))
	require.Len(t, byTag, 1, "an untagged event matches no tag query")
	all := collect(t, j.ReadAll(ctx, journal.Position{}, 0))
	require.Len(t, all, 6)
	requireSameRecord(t, noted1, all[0])
	chain := journal.Stream(journal.UntaggedChain("Noted"))
	stream := collect(t, j.ReadStream(ctx, chain, 1, 0))
	require.Equal(t, ids([]journal.Record{noted1, noted2, later[1]}), ids(stream), "the chain reads like a stream")
	requireChained(t, stream, chain.Tag)

	// The chain's head is recorded and exposed like a stream's.
	sum, err := j.TagSummary(ctx, chain)
	require.NoError(t, err)
	require.Equal(t, uint64(3), sum.Version)
	require.Equal(t, later[1].Links[0].Hash, sum.HeadHash)
	require.Equal(t, noted1.Position, sum.FirstPosition)
	require.Equal(t, later[1].Position, sum.LastPosition)
	group, err := j.TagsOfGroup(ctx, journal.DefaultPartition, journal.UntaggedGroup)
	require.NoError(t, err)
	require.Len(t, group, 2, "one untagged chain per type")
	require.Equal(t, journal.UntaggedChain("Noted"), group[0].Stream.Tag)
	require.Equal(t, journal.UntaggedChain("Other"), group[1].Stream.Tag)
	for _, s := range append(group, journal.TagSummary{Stream: journal.StreamID{Partition: "tenant-b", Tag: journal.UntaggedChain("Noted")}}) {
		_, err := journal.VerifyStream(ctx, j, s.Stream)
		require.NoError(t, err, "chain %s verifies", s.Stream)
	}

	// Idempotent like any append: a retry returns the original records.
	again, err := j.Append(ctx, []journal.Event{noted1.Event}, journal.AppendOptions{})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	requireSameRecord(t, noted1, again.Records[0])

	// An expectation on the chain's version fences untagged appends too.
	_, err = j.Append(ctx, []journal.Event{newEvent("Noted")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{chain.Tag: 2}})
	require.ErrorIs(t, err, journal.ErrVersionMismatch)
	ok := mustAppend(t, ctx, j, journal.AppendOptions{Expect: map[journal.Tag]uint64{chain.Tag: 3}}, newEvent("Noted"))
	require.Equal(t, uint64(4), ok.Records[0].Links[0].Version)
}

func testUntaggedReservedTags(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	_, err := j.Append(ctx, []journal.Event{newEvent("A", "a:1"), newEvent("B", journal.UntaggedChain("B"))}, journal.AppendOptions{})
	var ie *journal.InvalidEventError
	require.ErrorAs(t, err, &ie, "an event may not carry a reserved tag")
	require.Equal(t, 1, ie.Index)
	require.Equal(t, "Tags[0]", ie.Field)
	require.ErrorIs(t, err, journal.ErrInvalidEvent)
	_, err = j.Append(ctx, []journal.Event{newEvent("A", "$system:1")}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrInvalidEvent)
	head, err := j.Head(ctx)
	require.NoError(t, err)
	require.True(t, head.IsZero(), "nothing was written")

	for _, r := range collect2(j.Read(ctx, journal.TagQuery(journal.UntaggedChain("A")), journal.ReadOptions{})) {
		require.ErrorIs(t, r, journal.ErrInvalidQuery, "a query may not name a reserved tag")
	}
	_, err = j.Append(ctx, []journal.Event{newEvent("A")}, journal.AppendOptions{Condition: &journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(journal.UntaggedChain("A"))}})
	require.ErrorIs(t, err, journal.ErrInvalidQuery)
}

// collect2 returns the errors a read yields.
func collect2(seq func(func(journal.Record, error) bool)) []error {
	var errs []error
	for _, err := range seq {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// testUntaggedTamperDetected: the five kinds of tampering VerifyStream detects
// on a tag stream (altered content, a removed event, re-ordered events, a
// truncated end) are detected on an untagged chain too.
func testUntaggedTamperDetected(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	if h.Alter != nil {
		for _, what := range Alterations() {
			typ := "Forged" + string(what)
			recs := seedUntagged(t, j, journal.DefaultPartition, typ, 3)
			require.NoError(t, h.Alter(ctx, recs[1].ID, what), "alter %s", what)
			requireBroken(t, j, journal.Stream(journal.UntaggedChain(typ)), 2, recs[1].Position, 1, "untagged, altered "+string(what))
		}
	}
	if h.Remove != nil {
		recs := seedUntagged(t, j, "tenant-r", "Removed", 4)
		require.NoError(t, h.Remove(ctx, recs[1].ID))
		requireBroken(t, j, journal.StreamID{Partition: "tenant-r", Tag: journal.UntaggedChain("Removed")}, 3, recs[2].Position, 1, "untagged, removed middle event")

		recs = seedUntagged(t, j, journal.DefaultPartition, "Truncated", 4)
		require.NoError(t, h.Remove(ctx, recs[3].ID))
		requireBroken(t, j, journal.Stream(journal.UntaggedChain("Truncated")), 4, recs[3].Position, 3, "untagged, removed newest event")
	}
	if h.Swap != nil {
		chain := journal.Stream(journal.UntaggedChain("Swapped"))
		recs := seedUntagged(t, j, journal.DefaultPartition, "Swapped", 4)
		require.NoError(t, h.Swap(ctx, chain, 2, 3))
		requireBroken(t, j, chain, 3, recs[2].Position, 1, "untagged, swapped events")
	}
	if h.Alter == nil && h.Remove == nil && h.Swap == nil {
		t.Skip("Harness.Alter, Remove and Swap are nil: untagged tamper cases skipped")
	}
}

// testUntaggedChainsConcurrent: concurrent untagged appends, of one type and
// of several, each chain without gaps or forks.
func testUntaggedChainsConcurrent(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			typ := "Shared"
			if w%2 == 1 {
				typ = fmt.Sprintf("Own%d", w)
			}
			for range each {
				if _, err := j.Append(ctx, []journal.Event{newEvent(typ), newEvent("Shared")}, journal.AppendOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n, err := journal.VerifyStream(ctx, j, journal.Stream(journal.UntaggedChain("Shared")))
	require.NoError(t, err)
	require.Equal(t, uint64(writers*each+writers/2*each), n, "every Shared event is in the chain, once")
	for w := 1; w < writers; w += 2 {
		n, err := journal.VerifyStream(ctx, j, journal.Stream(journal.UntaggedChain(fmt.Sprintf("Own%d", w))))
		require.NoError(t, err)
		require.Equal(t, uint64(each), n)
	}
}
