package journaltest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// peerCases check that a journal decides on what the store holds, not on what
// it remembers of its own appends: between two of its appends a peer (another
// process on the same store) appends to the same streams.
func peerCases() []testCase {
	return []testCase{
		{"ExpectationOnAStreamNotWritten", peerExpectationOnAStreamNotWritten},
		{"ConditionSeesThePeersEvent", peerConditionSeesThePeersEvent},
		{"AppendLinksAfterThePeersEvent", peerAppendLinksAfterThePeersEvent},
	}
}

// peerHarness skips the case unless the backend gave a peer.
func peerHarness(t *testing.T, h Harness) journal.Journal {
	t.Helper()
	if h.Peer == nil {
		t.Skip("Harness.Peer is nil")
	}
	return h.Peer
}

// peerExpectationOnAStreamNotWritten: an append to a that expects b at the
// version this journal last wrote fails once the peer has moved b on, and
// writes nothing.
func peerExpectationOnAStreamNotWritten(t *testing.T, h Harness) {
	peer := peerHarness(t, h)
	ctx := testContext(t)
	a, b := journal.Tag("peer-a:1"), journal.Tag("peer-b:1")
	_, err := h.Journal.Append(ctx, []journal.Event{newEvent("Opened", a), newEvent("Opened", b)}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = peer.Append(ctx, []journal.Event{newEvent("Changed", b)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{b: 1}})
	require.NoError(t, err)

	_, err = h.Journal.Append(ctx, []journal.Event{newEvent("Changed", a)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{a: 1, b: 1}})
	require.ErrorIs(t, err, journal.ErrVersionMismatch, "the peer moved b to version 2")
	require.Len(t, collect(t, h.Journal.ReadStream(ctx, journal.Stream(a), 1, 0)), 1, "nothing was written to a")
}

// peerConditionSeesThePeersEvent: an append to x whose condition forbids
// events of x after x's first event fails once the peer has appended to x,
// although this journal wrote x's first event itself.
func peerConditionSeesThePeersEvent(t *testing.T, h Harness) {
	peer := peerHarness(t, h)
	ctx := testContext(t)
	x := journal.Tag("peer-x:1")
	first, _ := openThenPeerChanges(t, h.Journal, peer, x, journal.AppendOptions{})

	_, err := h.Journal.Append(ctx, []journal.Event{newEvent("Changed", x)}, journal.AppendOptions{
		Condition: &journal.AppendCondition{FailIfEventsMatch: journal.TagQuery(x), After: first.Last()},
	})
	require.ErrorIs(t, err, journal.ErrAppendConditionFailed, "the peer's event of x lies after the condition's position")
	require.Len(t, collect(t, h.Journal.ReadStream(ctx, journal.Stream(x), 1, 0)), 2)
}

// peerAppendLinksAfterThePeersEvent: an append that expects the version the
// peer left succeeds, takes the next version and links its hash to the
// peer's event; the stream verifies.
func peerAppendLinksAfterThePeersEvent(t *testing.T, h Harness) {
	peer := peerHarness(t, h)
	ctx := testContext(t)
	s := journal.Tag("peer-s:1")
	_, theirs := openThenPeerChanges(t, h.Journal, peer, s, journal.AppendOptions{Expect: map[journal.Tag]uint64{s: 1}})

	mine, err := h.Journal.Append(ctx, []journal.Event{newEvent("Changed", s)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{s: 2}})
	require.NoError(t, err)
	require.Equal(t, uint64(3), mine.Records[0].Version(s))
	require.Equal(t, theirs.Records[0].Links[0].Hash, mine.Records[0].Links[0].PrevHash, "linked to the peer's event")
	n, err := journal.VerifyStream(ctx, h.Journal, journal.Stream(s))
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
}

// openThenPeerChanges appends an event of tag through j, then one through
// peer with opts, and returns both results.
func openThenPeerChanges(t *testing.T, j, peer journal.Journal, tag journal.Tag, opts journal.AppendOptions) (mine, theirs journal.AppendResult) {
	t.Helper()
	ctx := testContext(t)
	mine, err := j.Append(ctx, []journal.Event{newEvent("Opened", tag)}, journal.AppendOptions{})
	require.NoError(t, err)
	theirs, err = peer.Append(ctx, []journal.Event{newEvent("Changed", tag)}, opts)
	require.NoError(t, err)
	return mine, theirs
}
