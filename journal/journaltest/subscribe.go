package journaltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func subscribeCases() []testCase {
	return []testCase{
		{"CatchUpThenLive", testSubscribeCatchUpThenLive},
		{"ResumesAfterPosition", testSubscribeResumesAfterPosition},
		{"EndsWithContextError", testSubscribeEndsWithContextError},
		{"QueryFiltered", testSubscribeQueryFiltered},
	}
}

// deliveryTimeout bounds the wait for one record a subscription must deliver.
const deliveryTimeout = 10 * time.Second

// subscription runs a Subscribe in its own goroutine and hands its records
// over a channel.
type subscription struct {
	recs   chan journal.Record
	errs   chan error // the error that ended the iteration, or errEnded
	cancel context.CancelFunc
	done   chan struct{}
}

var errEnded = errors.New("journaltest: the subscription ended without an error")

// subscribe starts a subscription that lives until the test ends.
func subscribe(t *testing.T, ctx context.Context, j journal.Journal, q journal.Query, after journal.Position) *subscription {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	s := &subscription{
		recs:   make(chan journal.Record),
		errs:   make(chan error, 1),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		for r, err := range j.Subscribe(sctx, q, after) {
			if err != nil {
				s.errs <- err
				return
			}
			select {
			case s.recs <- r:
			case <-sctx.Done():
				s.errs <- sctx.Err()
				return
			}
		}
		s.errs <- errEnded
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s
}

// next returns the subscription's next record, failing the test on an error
// or when none arrives within deliveryTimeout.
func (s *subscription) next(t *testing.T) journal.Record {
	t.Helper()
	select {
	case r := <-s.recs:
		return r
	case err := <-s.errs:
		require.FailNow(t, "the subscription ended early", "%v", err)
	case <-time.After(deliveryTimeout):
		require.FailNow(t, "timed out waiting for the subscription's next record")
	}
	return journal.Record{}
}

// take returns the subscription's next n records.
func (s *subscription) take(t *testing.T, n int) []journal.Record {
	t.Helper()
	out := make([]journal.Record, 0, n)
	for range n {
		out = append(out, s.next(t))
	}
	return out
}

func testSubscribeCatchUpThenLive(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	stored := appendEach(t, ctx, j, newEvent("A", "x:1"), newEvent("B"), newEvent("C", "x:1", "y:1"))

	s := subscribe(t, ctx, j, journal.AllEvents(), journal.Position{})
	catchUp := s.take(t, 3)
	require.Equal(t, ids(stored), ids(catchUp), "catch-up delivers the stored events in order")
	for i := range stored {
		requireSameRecord(t, stored[i], catchUp[i])
	}

	live1 := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("D", "x:1"), newEvent("E")).Records
	// A rejected append is never delivered.
	_, err := j.Append(ctx, []journal.Event{newEvent("F", "x:1")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"x:1": 0}})
	require.ErrorIs(t, err, journal.ErrVersionMismatch)
	live2 := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("G")).Records
	live := s.take(t, 3)
	require.Equal(t, append(ids(live1), ids(live2)...), ids(live), "live events follow in order, rejected appends never")
	all := append(catchUp, live...)
	requireAscending(t, all)
	for i := range live1 {
		requireSameRecord(t, live1[i], live[i])
	}
}

func testSubscribeResumesAfterPosition(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	var events []journal.Event
	for range 5 {
		events = append(events, newEvent("A", "x:1"))
	}
	stored := appendEach(t, ctx, j, events...)

	s := subscribe(t, ctx, j, journal.AllEvents(), stored[1].Position)
	require.Equal(t, ids(stored[2:]), ids(s.take(t, 3)), "resumes after the position, exclusive")
	more := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("A", "x:1")).Records
	require.Equal(t, ids(more), ids(s.take(t, 1)))

	// From the head: only what comes next.
	fromHead := subscribe(t, ctx, j, journal.AllEvents(), head(t, ctx, j))
	last := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("B")).Records
	require.Equal(t, ids(last), ids(fromHead.take(t, 1)), "a subscription from the head sees only new events")
	require.Equal(t, ids(last), ids(s.take(t, 1)))

	// From a position that no longer is an event boundary (between two events).
	between := subscribe(t, ctx, j, journal.AllEvents(), justAfter(stored[3].Position))
	require.Equal(t, ids(stored[4:]), ids(between.take(t, 1)))
}

func testSubscribeEndsWithContextError(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	stored := appendEach(t, ctx, j, newEvent("A"), newEvent("B"))

	// Cancelled while live (idle, waiting for new events).
	sctx, cancel := context.WithCancel(ctx)
	got := make(chan journal.Record)
	final := make(chan error, 1)
	go func() {
		for r, err := range j.Subscribe(sctx, journal.AllEvents(), journal.Position{}) {
			if err != nil {
				final <- err
				return
			}
			select {
			case got <- r:
			case <-sctx.Done():
			}
		}
		final <- errEnded
	}()
	require.Equal(t, stored[0].ID, waitFor(t, got, deliveryTimeout, "the first event").ID)
	require.Equal(t, stored[1].ID, waitFor(t, got, deliveryTimeout, "the second event").ID)
	cancel()
	err := waitFor(t, final, deliveryTimeout, "the subscription to end after cancel")
	require.ErrorIs(t, err, context.Canceled, "the last pair carries the context's error")

	// A deadline ends it the same way, even with no events to deliver.
	dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer dcancel()
	recs, err := collectErr(j.Subscribe(dctx, journal.TagQuery("nothing:1"), journal.Position{}))
	require.Empty(t, recs)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// An already cancelled context ends it at once.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = collectErr(j.Subscribe(cctx, journal.AllEvents(), journal.Position{}))
	require.ErrorIs(t, err, context.Canceled)

	// A consumer may stop early: the journal goes on working.
	for _, err := range j.Subscribe(ctx, journal.AllEvents(), journal.Position{}) {
		require.NoError(t, err)
		break
	}
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("C"))
}

func testSubscribeQueryFiltered(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	q := journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{"x:1"}}, {Types: []string{"Marker"}}}}

	var want []uuid.UUID
	pre := appendEach(t, ctx, j, newEvent("A", "x:1"), newEvent("A", "y:1"), newEvent("B", "x:1", "y:1"), newEvent("C"))
	want = append(want, pre[0].ID, pre[2].ID)

	s := subscribe(t, ctx, j, q, journal.Position{})
	for i := range 6 {
		var events []journal.Event
		switch i % 3 {
		case 0:
			events = []journal.Event{newEvent("A", "y:1"), newEvent("A", "x:1")}
			want = append(want, events[1].ID)
		case 1:
			events = []journal.Event{newEvent("A", "z:1"), inPartition(newEvent("A", "x:1"), "tenant-b")}
			mustAppend(t, ctx, j, journal.AppendOptions{}, events[1])
			events = events[:1]
		case 2:
			events = []journal.Event{newEvent("Marker")}
			want = append(want, events[0].ID)
		}
		mustAppend(t, ctx, j, journal.AppendOptions{}, events...)
	}
	last := newEvent("Marker", "x:1")
	mustAppend(t, ctx, j, journal.AppendOptions{}, last)
	want = append(want, last.ID)

	got := s.take(t, len(want))
	require.Equal(t, want, ids(got), "only matching events of the query's partition, in order")
	requireAscending(t, got)
	for _, r := range got {
		require.True(t, q.Matches(&r), "record %s does not match the query", r.ID)
	}
}
