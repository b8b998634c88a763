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
	if h.Tamper == nil {
		t.Skip("Harness.Tamper is nil: tamper case skipped")
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

	require.NoError(t, h.Tamper(ctx, victim.ID))
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
