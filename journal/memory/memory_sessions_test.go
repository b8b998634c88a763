package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/stretchr/testify/require"
)

func requireSessionErr(t *testing.T, err, sentinel error, stream journal.StreamID) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	var se *journal.SessionError
	require.True(t, errors.As(err, &se), "want *SessionError, got %T: %v", err, err)
	require.Equal(t, stream.Normalize(), se.Stream)
}

func fenced(lease journal.Lease) journal.AppendOptions {
	return journal.AppendOptions{Leases: []journal.Lease{lease}}
}

func TestMemoryLeaseExpiresByTheClock(t *testing.T) {
	t.Parallel()
	s := setup(t)
	stream := journal.Stream("acc:1")
	a, err := s.mem.OpenNode(s.ctx, "node-a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, uint64(1), a.Incarnation)
	require.Equal(t, s.clock.Now().Truncate(time.Microsecond).Add(time.Minute), a.ExpiresAt)
	leaseA, err := s.mem.Acquire(s.ctx, a, stream, 0)
	require.NoError(t, err)
	require.Equal(t, journal.Lease{Stream: stream, NodeID: "node-a", Incarnation: 1, Epoch: 1}, leaseA)

	_, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "acc:1")}, fenced(leaseA))
	require.NoError(t, err)

	// Renewing extends the session from now.
	s.clock.Advance(50 * time.Second)
	a, err = s.mem.RenewNode(s.ctx, a)
	require.NoError(t, err)
	s.clock.Advance(50 * time.Second)
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "acc:1")}, fenced(leaseA))
	require.NoError(t, err)

	// Another node waits while A is live…
	b, err := s.mem.OpenNode(s.ctx, "node-b", time.Minute)
	require.NoError(t, err)
	_, err = s.mem.Acquire(s.ctx, b, stream, 0)
	require.ErrorIs(t, err, journal.ErrOpenTimeout)
	require.Contains(t, err.Error(), `"node-a"`)
	require.Contains(t, err.Error(), stream.String())

	// …and once A's session expires by the clock, A is fenced and B is granted at once.
	s.clock.Advance(11 * time.Second)
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "acc:1")}, fenced(leaseA))
	requireSessionErr(t, err, journal.ErrSessionExpired, stream)
	_, err = s.mem.RenewNode(s.ctx, a)
	require.ErrorIs(t, err, journal.ErrSessionExpired)

	b, err = s.mem.RenewNode(s.ctx, b)
	require.NoError(t, err)
	leaseB, err := s.mem.Acquire(s.ctx, b, stream, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), leaseB.Epoch)
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("B", "acc:1")}, fenced(leaseB))
	require.NoError(t, err)
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "acc:1")}, fenced(leaseA))
	requireSessionErr(t, err, journal.ErrInvalidSession, stream)

	sum, err := s.mem.TagSummary(s.ctx, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(3), sum.Version)
}

func TestMemoryNewIncarnationTakesOverAtOnce(t *testing.T) {
	t.Parallel()
	s := setup(t)
	stream := journal.StreamID{Partition: "t1", Tag: "acc:1"}
	old, err := s.mem.OpenNode(s.ctx, "node-a", time.Hour)
	require.NoError(t, err)
	oldLease, err := s.mem.Acquire(s.ctx, old, stream, 0)
	require.NoError(t, err)
	other, err := s.mem.OpenNode(s.ctx, "node-b", time.Hour)
	require.NoError(t, err)
	_, err = s.mem.Acquire(s.ctx, other, stream, 0)
	require.ErrorIs(t, err, journal.ErrOpenTimeout)

	restarted, err := s.mem.OpenNode(s.ctx, "node-a", time.Hour)
	require.NoError(t, err)
	require.Equal(t, uint64(2), restarted.Incarnation)
	newLease, err := s.mem.Acquire(s.ctx, restarted, stream, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), newLease.Epoch)

	e := ev("A", "acc:1")
	e.Metadata.Partition = "t1"
	_, err = s.mem.Append(s.ctx, []journal.Event{e}, fenced(oldLease))
	requireSessionErr(t, err, journal.ErrInvalidSession, stream)
	_, err = s.mem.RenewNode(s.ctx, old)
	require.ErrorIs(t, err, journal.ErrInvalidSession)
	_, err = s.mem.Acquire(s.ctx, old, journal.Stream("other"), 0)
	require.ErrorIs(t, err, journal.ErrInvalidSession)
	_, err = s.mem.Append(s.ctx, []journal.Event{e}, fenced(newLease))
	require.NoError(t, err)

	// Re-acquiring one's own lease is granted at once with a new epoch.
	again, err := s.mem.Acquire(s.ctx, restarted, stream, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(3), again.Epoch)
	e2 := ev("A", "acc:1")
	e2.Metadata.Partition = "t1"
	_, err = s.mem.Append(s.ctx, []journal.Event{e2}, fenced(newLease))
	requireSessionErr(t, err, journal.ErrInvalidSession, stream)
}

func TestMemoryReleaseAndCloseNode(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a, err := s.mem.OpenNode(s.ctx, "a", time.Hour)
	require.NoError(t, err)
	b, err := s.mem.OpenNode(s.ctx, "b", time.Hour)
	require.NoError(t, err)
	l1, err := s.mem.Acquire(s.ctx, a, journal.Stream("s1"), 0)
	require.NoError(t, err)
	l2, err := s.mem.Acquire(s.ctx, a, journal.Stream("s2"), 0)
	require.NoError(t, err)

	require.NoError(t, s.mem.Release(s.ctx, l1))
	require.NoError(t, s.mem.Release(s.ctx, l1), "releasing twice is not an error")
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "s1")}, fenced(l1))
	requireSessionErr(t, err, journal.ErrInvalidSession, l1.Stream)
	got, err := s.mem.Acquire(s.ctx, b, journal.Stream("s1"), 0)
	require.NoError(t, err)
	require.Greater(t, got.Epoch, l2.Epoch, "epochs come from one counter: above every epoch granted before")
	require.NoError(t, s.mem.Release(s.ctx, l1), "a stale release does not free the new holder's lease")
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("B", "s1")}, fenced(got))
	require.NoError(t, err)

	require.NoError(t, s.mem.CloseNode(s.ctx, a))
	require.NoError(t, s.mem.CloseNode(s.ctx, a))
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "s2")}, fenced(l2))
	requireSessionErr(t, err, journal.ErrInvalidSession, l2.Stream)
	_, err = s.mem.RenewNode(s.ctx, a)
	require.ErrorIs(t, err, journal.ErrInvalidSession)
	l2b, err := s.mem.Acquire(s.ctx, b, journal.Stream("s2"), 0)
	require.NoError(t, err)
	require.Greater(t, l2b.Epoch, got.Epoch)

	require.ErrorIs(t, s.mem.CloseNode(s.ctx, journal.NodeSession{NodeID: "ghost", Incarnation: 1}), journal.ErrInvalidSession)
	_, err = s.mem.OpenNode(s.ctx, "", time.Minute)
	require.Error(t, err)
	_, err = s.mem.OpenNode(s.ctx, "x", 0)
	require.Error(t, err)
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "s3")}, fenced(journal.Lease{Stream: journal.Stream("s3"), NodeID: "b", Incarnation: 1, Epoch: 1}))
	requireSessionErr(t, err, journal.ErrInvalidSession, journal.Stream("s3"))
}

// TestMemoryAcquireWaits covers the three ways a waiting Acquire ends: the
// holder releases, the holder's session expires by the clock, the wait or the
// context runs out.
func TestMemoryAcquireWaits(t *testing.T) {
	t.Parallel()
	s := setup(t)
	holder, err := s.mem.OpenNode(s.ctx, "holder", time.Minute)
	require.NoError(t, err)
	waiter, err := s.mem.OpenNode(s.ctx, "waiter", time.Hour)
	require.NoError(t, err)

	type result struct {
		lease journal.Lease
		err   error
	}
	acquire := func(ctx context.Context, stream journal.StreamID, wait time.Duration) <-chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := s.mem.Acquire(ctx, waiter, stream, wait)
			ch <- result{l, err}
		}()
		return ch
	}
	await := func(ch <-chan result) result {
		select {
		case r := <-ch:
			return r
		case <-s.ctx.Done():
			t.Fatal("Acquire did not return")
			return result{}
		}
	}

	// Woken by a release.
	l1, err := s.mem.Acquire(s.ctx, holder, journal.Stream("r"), 0)
	require.NoError(t, err)
	ch := acquire(s.ctx, journal.Stream("r"), time.Minute)
	require.NoError(t, s.mem.Release(s.ctx, l1))
	r := await(ch)
	require.NoError(t, r.err)
	require.Equal(t, uint64(2), r.lease.Epoch)

	// Granted when the holder expires by the clock, while waiting.
	_, err = s.mem.Acquire(s.ctx, holder, journal.Stream("e"), 0)
	require.NoError(t, err)
	ch = acquire(s.ctx, journal.Stream("e"), time.Minute)
	s.clock.Advance(2 * time.Minute)
	r = await(ch)
	require.NoError(t, r.err)
	require.Equal(t, "waiter", r.lease.NodeID)

	// Times out while the holder stays live.
	holder2, err := s.mem.OpenNode(s.ctx, "holder2", time.Hour)
	require.NoError(t, err)
	_, err = s.mem.Acquire(s.ctx, holder2, journal.Stream("t"), 0)
	require.NoError(t, err)
	start := time.Now()
	r = await(acquire(s.ctx, journal.Stream("t"), 30*time.Millisecond))
	require.ErrorIs(t, r.err, journal.ErrOpenTimeout)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	require.Contains(t, r.err.Error(), `"holder2"`)

	// Ends with the context.
	ctx, cancel := context.WithCancel(s.ctx)
	ch = acquire(ctx, journal.Stream("t"), time.Hour)
	cancel()
	r = await(ch)
	require.ErrorIs(t, r.err, context.Canceled)

	// Ends when the journal closes.
	ch = acquire(s.ctx, journal.Stream("t"), time.Hour)
	require.NoError(t, s.mem.Close())
	r = await(ch)
	require.ErrorIs(t, r.err, journal.ErrStoreNotOpen)
}

func TestMemoryAcquireRequiresALiveSession(t *testing.T) {
	t.Parallel()
	s := setup(t)
	n, err := s.mem.OpenNode(s.ctx, "n", time.Second)
	require.NoError(t, err)
	s.clock.Advance(time.Second)
	_, err = s.mem.Acquire(s.ctx, n, journal.Stream("x"), 0)
	requireSessionErr(t, err, journal.ErrSessionExpired, journal.Stream("x"))
	_, err = s.mem.Acquire(s.ctx, journal.NodeSession{NodeID: "ghost", Incarnation: 1}, journal.Stream("x"), 0)
	requireSessionErr(t, err, journal.ErrInvalidSession, journal.Stream("x"))
	_, err = s.mem.Acquire(s.ctx, n, journal.StreamID{}, 0)
	require.Error(t, err)
}
