package journaltest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func sessionCases() []testCase {
	return []testCase{
		{"AcquireTimesOutWhileHeld", testAcquireTimesOutWhileHeld},
		{"AcquireHonoursContext", testAcquireHonoursContext},
		{"ExpiredHolderIsFenced", testExpiredHolderIsFenced},
		{"ReleaseLetsNextOpenerIn", testReleaseLetsNextOpenerIn},
		{"ReacquireFencesOldLease", testReacquireFencesOldLease},
		{"RenewKeepsLeaseAlive", testRenewKeepsLeaseAlive},
		{"NewIncarnationTakesOver", testNewIncarnationTakesOver},
		{"CloseNodeReleases", testCloseNodeReleases},
		{"AppendChecksEveryLease", testAppendChecksEveryLease},
		{"ReleasedEmptyStreamLeavesNothing", testReleasedEmptyStreamLeavesNothing},
		{"RejectsBadNodeSessions", testRejectsBadNodeSessions},
	}
}

// testReleasedEmptyStreamLeavesNothing: leasing a stream that has no events
// (a command for an account that does not exist) and releasing it leaves no
// trace, and fencing still holds: the released lease cannot append after
// another node took the stream.
func testReleasedEmptyStreamLeavesNothing(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	ghost := journal.Stream("ghost:1")
	a := openNode(t, ctx, s, "node-a", longSession)
	b := openNode(t, ctx, s, "node-b", longSession)
	la := acquire(t, ctx, s, a, ghost, atOnce)
	require.NoError(t, s.Release(ctx, la))

	sum, err := j.TagSummary(ctx, ghost)
	require.NoError(t, err)
	require.Zero(t, sum.Version)
	tags, err := j.TagsOfGroup(ctx, journal.DefaultPartition, "ghost")
	require.NoError(t, err)
	require.Empty(t, tags, "a released stream without events is not listed")

	lb := acquire(t, ctx, s, b, ghost, atOnce)
	before := captureState(t, ctx, j)
	_, err = leasedAppend(ctx, j, la)
	requireFenced(t, ctx, j, before, err, "the released lease of a stream that had no events")
	_, err = leasedAppend(ctx, j, lb)
	require.NoError(t, err, "the current holder appends")
	// A stream with events keeps its row and epoch across releases.
	require.NoError(t, s.Release(ctx, lb))
	la2 := acquire(t, ctx, s, a, ghost, atOnce)
	require.Greater(t, la2.Epoch, lb.Epoch)
}

// testRejectsBadNodeSessions: every backend refuses the same bad OpenNode
// arguments with ErrInvalidSession (not an SQL error, not silence).
func testRejectsBadNodeSessions(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	for name, id := range map[string]string{
		"empty": "", "NUL": "node\x00a", "not UTF-8": "node\xff", "newline": "node\na",
		"over 256 bytes": strings.Repeat("n", journal.MaxNodeIDLength+1),
	} {
		_, err := s.OpenNode(ctx, id, longSession)
		require.ErrorIs(t, err, journal.ErrInvalidSession, name)
	}
	_, err := s.OpenNode(ctx, "node-a", 0)
	require.ErrorIs(t, err, journal.ErrInvalidSession, "zero timeout")
	_, err = s.OpenNode(ctx, strings.Repeat("n", journal.MaxNodeIDLength), longSession)
	require.NoError(t, err, "a node ID at the limit")
}

const (
	// shortSession is the node session timeout of cases that wait for expiry.
	// Long enough for opening a node, two acquisitions and an append on a
	// loaded machine (300 ms was not, in CI, as a non-superuser role).
	shortSession = 2 * time.Second
	// longSession outlives every case.
	longSession = time.Minute
	// longWait is an Acquire wait that a case expects to end early.
	longWait = 10 * time.Second
	// atOnce bounds an Acquire that must be granted without waiting for a
	// holder's expiry (generous, for slow CI machines).
	atOnce = 2 * time.Second
)

// sessionsOf returns h.Sessions or skips the test.
func sessionsOf(t *testing.T, h Harness) journal.Sessions {
	t.Helper()
	if h.Sessions == nil {
		t.Skip("Harness.Sessions is nil: session cases skipped")
	}
	return h.Sessions
}

func openNode(t *testing.T, ctx context.Context, s journal.Sessions, id string, timeout time.Duration) journal.NodeSession {
	t.Helper()
	n, err := s.OpenNode(ctx, id, timeout)
	require.NoError(t, err, "OpenNode %s", id)
	require.Equal(t, id, n.NodeID)
	return n
}

func acquire(t *testing.T, ctx context.Context, s journal.Sessions, n journal.NodeSession, stream journal.StreamID, wait time.Duration) journal.Lease {
	t.Helper()
	l, err := s.Acquire(ctx, n, stream, wait)
	require.NoError(t, err, "Acquire %s for node %s", stream, n.NodeID)
	require.Equal(t, stream.Normalize(), l.Stream.Normalize())
	require.Equal(t, n.NodeID, l.NodeID)
	require.Equal(t, n.Incarnation, l.Incarnation)
	require.NotZero(t, l.Epoch)
	return l
}

// leasedAppend appends one event on lease's stream carrying the lease.
func leasedAppend(ctx context.Context, j journal.Journal, leases ...journal.Lease) (journal.AppendResult, error) {
	tags := make([]journal.Tag, len(leases))
	for i, l := range leases {
		tags[i] = l.Stream.Tag
	}
	return j.Append(ctx, []journal.Event{newEvent("Leased", tags...)}, journal.AppendOptions{Leases: leases})
}

// requireFenced fails unless err is a session rejection and nothing was written.
func requireFenced(t *testing.T, ctx context.Context, j journal.Journal, before snapshotState, err error, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	require.True(t, errors.Is(err, journal.ErrSessionExpired) || errors.Is(err, journal.ErrInvalidSession),
		"%s: want ErrSessionExpired or ErrInvalidSession, got %v", msg, err)
	requireUnchanged(t, ctx, j, before, msg)
}

func testAcquireTimesOutWhileHeld(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	stream := journal.Stream("account:1")
	a := openNode(t, ctx, s, "node-a", longSession)
	b := openNode(t, ctx, s, "node-b", longSession)
	la := acquire(t, ctx, s, a, stream, atOnce)

	const wait = 250 * time.Millisecond
	start := time.Now()
	_, err := s.Acquire(ctx, b, stream, wait)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, journal.ErrOpenTimeout, "another live node holds the stream")
	require.GreaterOrEqual(t, elapsed, wait*3/4, "Acquire waits up to its wait before giving up")
	require.Less(t, elapsed, wait+5*time.Second, "Acquire gives up soon after its wait")

	// The holder is unaffected.
	res, err := leasedAppend(ctx, j, la)
	require.NoError(t, err, "the holder appends with its lease")
	require.Equal(t, uint64(1), res.Records[0].Version(stream.Tag))

	// A lease that names the current epoch but another holder is rejected.
	before := captureState(t, ctx, j)
	forged := journal.Lease{Stream: stream, NodeID: b.NodeID, Incarnation: b.Incarnation, Epoch: la.Epoch}
	_, err = leasedAppend(ctx, j, forged)
	requireFenced(t, ctx, j, before, err, "a lease of a node that does not hold the stream")
	require.ErrorIs(t, err, journal.ErrInvalidSession)
}

func testAcquireHonoursContext(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	stream := journal.Stream("account:1")
	a := openNode(t, ctx, s, "node-a", longSession)
	b := openNode(t, ctx, s, "node-b", longSession)
	acquire(t, ctx, s, a, stream, atOnce)

	cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Acquire(cctx, b, stream, longWait)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, journal.ErrOpenTimeout),
		"a context that ends during the wait ends Acquire: got %v", err)
	require.Less(t, time.Since(start), longWait/2, "Acquire returns when its context ends, not at the end of its wait")
}

func testExpiredHolderIsFenced(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	s1, s2 := journal.Stream("account:1"), journal.Stream("account:2")
	a := openNode(t, ctx, s, "node-a", shortSession)
	la1 := acquire(t, ctx, s, a, s1, atOnce)
	la2 := acquire(t, ctx, s, a, s2, atOnce)
	_, err := leasedAppend(ctx, j, la1)
	require.NoError(t, err, "a fresh lease appends")

	// node-b waits for node-a's session to expire, then gets the stream with a
	// higher epoch.
	b := openNode(t, ctx, s, "node-b", longSession)
	lb := acquire(t, ctx, s, b, s1, longWait)
	require.Greater(t, lb.Epoch, la1.Epoch, "each acquisition raises the epoch")

	before := captureState(t, ctx, j)
	_, err = leasedAppend(ctx, j, la1)
	requireFenced(t, ctx, j, before, err, "the stale holder's append")

	// node-a's other lease expired with its node session, though nobody took it.
	_, err = leasedAppend(ctx, j, la2)
	requireFenced(t, ctx, j, before, err, "an append with a lease of an expired node session")
	require.ErrorIs(t, err, journal.ErrSessionExpired)

	_, err = s.RenewNode(ctx, a)
	require.ErrorIs(t, err, journal.ErrSessionExpired, "an expired node session cannot be renewed")

	res, err := leasedAppend(ctx, j, lb)
	require.NoError(t, err, "the new holder appends")
	require.Equal(t, uint64(2), res.Records[0].Version(s1.Tag), "the stream goes on from the last stored version")
}

func testReleaseLetsNextOpenerIn(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	stream := journal.Stream("account:1")
	a := openNode(t, ctx, s, "node-a", longSession)
	b := openNode(t, ctx, s, "node-b", longSession)
	la := acquire(t, ctx, s, a, stream, atOnce)
	_, err := leasedAppend(ctx, j, la)
	require.NoError(t, err)

	require.NoError(t, s.Release(ctx, la))
	start := time.Now()
	lb := acquire(t, ctx, s, b, stream, longWait)
	require.Less(t, time.Since(start), atOnce, "a released stream is granted at once")
	require.Greater(t, lb.Epoch, la.Epoch)

	before := captureState(t, ctx, j)
	_, err = leasedAppend(ctx, j, la)
	requireFenced(t, ctx, j, before, err, "an append with a released lease")
	require.ErrorIs(t, err, journal.ErrInvalidSession)
	require.NoError(t, s.Release(ctx, la), "releasing a lease that is no longer current is not an error")

	_, err = leasedAppend(ctx, j, lb)
	require.NoError(t, err, "releasing a stale lease leaves the current holder alone")
	_, err = s.Acquire(ctx, a, stream, 50*time.Millisecond)
	require.ErrorIs(t, err, journal.ErrOpenTimeout, "the former holder now waits like any other node")
}

func testReacquireFencesOldLease(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	stream := journal.Stream("account:1")
	a := openNode(t, ctx, s, "node-a", longSession)

	// A stream actor passivates and a new activation on the same node takes
	// the stream again: the old activation's lease is fenced by the epoch.
	old := acquire(t, ctx, s, a, stream, atOnce)
	require.NoError(t, s.Release(ctx, old))
	cur := acquire(t, ctx, s, a, stream, atOnce)
	require.Greater(t, cur.Epoch, old.Epoch, "every acquisition raises the epoch, also by the same node")

	before := captureState(t, ctx, j)
	_, err := leasedAppend(ctx, j, old)
	requireFenced(t, ctx, j, before, err, "an append with an earlier epoch of the same node")
	require.ErrorIs(t, err, journal.ErrInvalidSession)
	_, err = leasedAppend(ctx, j, cur)
	require.NoError(t, err)
}

func testRenewKeepsLeaseAlive(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	stream := journal.Stream("account:1")
	const timeout = 400 * time.Millisecond
	opened := time.Now()
	a := openNode(t, ctx, s, "node-a", timeout)
	la := acquire(t, ctx, s, a, stream, atOnce)
	firstExpiry := a.ExpiresAt

	// Renew well within the timeout until far past the original expiry.
	tick := time.NewTicker(timeout / 8)
	defer tick.Stop()
	for time.Since(opened) < 3*timeout {
		<-tick.C
		renewed, err := s.RenewNode(ctx, a)
		require.NoError(t, err, "renewing a live node session")
		require.Equal(t, a.NodeID, renewed.NodeID)
		require.Equal(t, a.Incarnation, renewed.Incarnation)
		require.False(t, renewed.ExpiresAt.Before(a.ExpiresAt), "renewal never shortens the session")
		a = renewed
	}
	require.True(t, a.ExpiresAt.After(firstExpiry), "renewal extended the session")

	b := openNode(t, ctx, s, "node-b", longSession)
	_, err := s.Acquire(ctx, b, stream, 50*time.Millisecond)
	require.ErrorIs(t, err, journal.ErrOpenTimeout, "the lease outlived the original timeout")

	res, err := leasedAppend(ctx, j, la)
	require.NoError(t, err, "the lease is valid while its node session is renewed")
	require.Equal(t, uint64(1), res.Records[0].Version(stream.Tag))
}

func testNewIncarnationTakesOver(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	s1, s2 := journal.Stream("account:1"), journal.Stream("account:2")
	old := openNode(t, ctx, s, "node-a", longSession)
	lo1 := acquire(t, ctx, s, old, s1, atOnce)
	lo2 := acquire(t, ctx, s, old, s2, atOnce)
	_, err := leasedAppend(ctx, j, lo1)
	require.NoError(t, err)

	// The process restarts with the same node ID.
	cur := openNode(t, ctx, s, "node-a", longSession)
	require.Greater(t, cur.Incarnation, old.Incarnation, "a new incarnation has a higher number")

	// The old incarnation's appends are fenced from now on, even on streams
	// the new one has not taken yet.
	before := captureState(t, ctx, j)
	_, err = leasedAppend(ctx, j, lo2)
	requireFenced(t, ctx, j, before, err, "an append of a superseded incarnation")

	start := time.Now()
	lc := acquire(t, ctx, s, cur, s1, longWait)
	require.Less(t, time.Since(start), atOnce, "the new incarnation takes its old leases over at once")
	require.Greater(t, lc.Epoch, lo1.Epoch)

	_, err = leasedAppend(ctx, j, lo1)
	requireFenced(t, ctx, j, before, err, "the old incarnation's append after the takeover")
	_, err = s.RenewNode(ctx, old)
	require.ErrorIs(t, err, journal.ErrInvalidSession, "a superseded incarnation cannot renew")
	require.ErrorIs(t, err, journal.ErrNodeSuperseded, "and is told why: a newer incarnation of its node ID exists (a restart, or a twin process)")

	res, err := leasedAppend(ctx, j, lc)
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Records[0].Version(s1.Tag))

	// Other nodes still wait for the new incarnation.
	b := openNode(t, ctx, s, "node-b", longSession)
	_, err = s.Acquire(ctx, b, s1, 50*time.Millisecond)
	require.ErrorIs(t, err, journal.ErrOpenTimeout)
}

func testCloseNodeReleases(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	s1, s2 := journal.Stream("account:1"), journal.Stream("account:2")
	a := openNode(t, ctx, s, "node-a", longSession)
	la1 := acquire(t, ctx, s, a, s1, atOnce)
	acquire(t, ctx, s, a, s2, atOnce)
	require.NoError(t, s.CloseNode(ctx, a))

	b := openNode(t, ctx, s, "node-b", longSession)
	start := time.Now()
	lb1 := acquire(t, ctx, s, b, s1, longWait)
	acquire(t, ctx, s, b, s2, longWait)
	require.Less(t, time.Since(start), atOnce, "CloseNode releases every lease of the node")
	require.Greater(t, lb1.Epoch, la1.Epoch)

	before := captureState(t, ctx, j)
	_, err := leasedAppend(ctx, j, la1)
	requireFenced(t, ctx, j, before, err, "an append with a lease of a closed node")
	_, err = s.RenewNode(ctx, a)
	require.ErrorIs(t, err, journal.ErrInvalidSession, "a closed node session cannot be renewed")
	_, err = leasedAppend(ctx, j, lb1)
	require.NoError(t, err)
}

func testAppendChecksEveryLease(t *testing.T, h Harness) {
	s := sessionsOf(t, h)
	ctx := testContext(t)
	j := h.Journal
	s1, s2 := journal.Stream("account:1"), journal.Stream("account:2")
	a := openNode(t, ctx, s, "node-a", longSession)
	b := openNode(t, ctx, s, "node-b", longSession)
	la1 := acquire(t, ctx, s, a, s1, atOnce)
	la2 := acquire(t, ctx, s, a, s2, atOnce)
	_, err := leasedAppend(ctx, j, la1, la2)
	require.NoError(t, err, "an append fenced by two current leases")

	require.NoError(t, s.Release(ctx, la2))
	acquire(t, ctx, s, b, s2, atOnce)
	before := captureState(t, ctx, j)
	_, err = leasedAppend(ctx, j, la1, la2)
	requireFenced(t, ctx, j, before, err, "one stale lease among current ones fails the whole append")
	require.ErrorIs(t, err, journal.ErrInvalidSession)
	var se *journal.SessionError
	require.ErrorAs(t, err, &se, "session rejections carry a *journal.SessionError")
	require.Equal(t, s2, se.Stream.Normalize(), "the error names the stream whose lease failed")
}
