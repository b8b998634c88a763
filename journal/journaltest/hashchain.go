package journaltest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func hashChainCases() []testCase {
	return []testCase{
		{"StreamsVerify", testStreamsVerify},
		{"TamperDetected", testTamperDetected},
		{"HeadHashRecorded", testHeadHashRecorded},
		{"UntaggedRejected", testUntaggedRejected},
		{"AlterationsDetected", testAlterationsDetected},
		{"RemovedMiddleDetected", testRemovedMiddleDetected},
		{"TruncationDetected", testTruncationDetected},
		{"ReorderDetected", testReorderDetected},
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
	recs = append(recs, mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", c, a, b), newEvent("E", a), newEvent("E", misc)).Records...)
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

func testUntaggedRejected(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	_, err := j.Append(ctx, []journal.Event{newEvent("Tagged", "a:1"), newEvent("Untagged")}, journal.AppendOptions{})
	var ie *journal.InvalidEventError
	require.ErrorAs(t, err, &ie, "an event without tags would be in no chain")
	require.Equal(t, 1, ie.Index)
	require.Equal(t, "Tags", ie.Field)
	head, err := j.Head(ctx)
	require.NoError(t, err)
	require.True(t, head.IsZero(), "nothing was written")
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
