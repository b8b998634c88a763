package projectiontest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// RunSlices runs the sliced-projection cases against the harnesses new
// returns; their Journal must be a journal.SliceSubscriber.
func RunSlices[Tx any](t *testing.T, newHarness func(t *testing.T) Harness[Tx]) {
	cases := []struct {
		name string
		f    func(t *testing.T, h Harness[Tx])
	}{
		{"SliceCommitIsFenced", testSliceCommitFenced[Tx]},
		{"SlicingIsPartOfTheVersion", testSlicingChanged[Tx]},
		{"SliceRunnersShareTheWork", testSliceRunnersShare[Tx]},
		{"SlicedStatusSumsUpItsSlices", testSlicedStatus[Tx]},
		{"SlicedDeadLetterReplayedOnce", testSlicedDeadLetterReplay[Tx]},
		{"SlicedStatesThroughPauseAndRebuild", testSlicedStatesThroughPauseAndRebuild[Tx]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, newHarness(t)) })
	}
}

// sharedAndApplied waits until runners runners own every slice of k and
// the slices applied deliveries deliveries in all.
func sharedAndApplied[Tx any](t *testing.T, ctx context.Context, st projection.Store[Tx], k projection.Key, runners int, deliveries uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		sts, _, err := st.Slices(ctx, k)
		require.NoError(t, err)
		owners := map[string]bool{}
		var events uint64
		for _, x := range sts {
			owners[x.Owner] = true
			events += x.Events
		}
		return len(owners) == runners && !owners[""] && events == deliveries
	}, 30*time.Second, 10*time.Millisecond, "%d runners did not share the slices of %s and apply %d deliveries", runners, k, deliveries)
}

// tagIn returns a tag of group acct in slice s of sl.
func tagIn(sl projection.Slicing, s int) journal.Tag {
	for i := 0; ; i++ {
		tag := journal.Tag(fmt.Sprintf("acct:%d", i))
		if x, _ := sl.SliceOf(tag); x == s {
			return tag
		}
	}
}

func testSliceCommitFenced[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	st := h.Store
	sl := projection.Slicing{Group: "acct", Count: 4, Partition: journal.DefaultPartition}
	k := projection.Key{Name: "sliced-fenced", Version: 1}
	recs := appendN(t, ctx, h.Journal, "", tagIn(sl, 0), "E", 3)
	members, err := st.Join(ctx, k, sl.Layout(), "a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, members)
	a, err := st.Claim(ctx, k, "a", time.Minute, []int{0, 1})
	require.NoError(t, err)
	require.Len(t, a, 2)
	got, err := st.Claim(ctx, k, "b", time.Minute, []int{0, 1, 2})
	require.NoError(t, err)
	require.Len(t, got, 1, "b gets only the free slice 2")
	require.Equal(t, 2, got[0].Slice)

	apply := func(ctx context.Context, tx Tx) error { return h.Apply(ctx, tx, "sliced-fenced", recs[:1]) }
	require.NoError(t, st.Commit(ctx, a[:1], recs[:1], []int{0}, apply))
	// The runner's view of slice 0 is behind the store's: fenced.
	called := false
	never := func(context.Context, Tx) error { called = true; return nil }
	require.ErrorIs(t, st.Commit(ctx, a[:1], recs[1:2], []int{0}, never), projection.ErrFenced)
	require.False(t, called, "the handler ran under a fenced commit")

	// A reset moves every slice back to zero and fences its lease.
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	a0 := a[0]
	a0.Checkpoint = recs[0].Position
	require.ErrorIs(t, st.Commit(ctx, []projection.Lease{a0}, recs[1:2], []int{0}, never), projection.ErrFenced)
	require.False(t, called)
	sts, gotSl, err := st.Slices(ctx, k)
	require.NoError(t, err)
	require.Equal(t, sl.Layout(), gotSl)
	require.Len(t, sts, 4)
	for _, x := range sts {
		require.Equal(t, journal.Position{}, x.Checkpoint)
		require.Empty(t, x.Owner)
	}

	// An expired slice lease is fenced, and claimable by another runner.
	short, err := st.Claim(ctx, k, "a", 100*time.Millisecond, []int{3})
	require.NoError(t, err)
	require.Len(t, short, 1)
	require.Eventually(t, func() bool {
		got, err := st.Claim(ctx, k, "b", time.Minute, []int{3})
		require.NoError(t, err)
		return len(got) == 1
	}, 10*time.Second, 10*time.Millisecond)
	lost, err := st.Renew(ctx, short)
	require.NoError(t, err)
	require.Equal(t, []int{3}, lost)
	require.ErrorIs(t, st.Commit(ctx, short, recs[:1], []int{3}, never), projection.ErrFenced)
	require.False(t, called)

	// A paused projection's slices cannot be claimed.
	p, ok := h.Store.(projection.Pauser)
	require.True(t, ok)
	require.NoError(t, p.Pause(ctx, k))
	_, err = st.Claim(ctx, k, "a", time.Minute, []int{0})
	require.ErrorIs(t, err, projection.ErrPaused)
	require.NoError(t, p.Resume(ctx, k))
	got, err = st.Claim(ctx, k, "a", time.Minute, []int{0})
	require.NoError(t, err)
	require.Len(t, got, 1)
	exactlyOnce(t, h, "sliced-fenced", recs[:1])
}

func testSlicingChanged[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	st := h.Store
	k := projection.Key{Name: "sliced-changed", Version: 1}
	_, err := st.Join(ctx, k, projection.Layout{Group: "acct", Count: 4, Partition: journal.DefaultPartition}, "a", time.Minute)
	require.NoError(t, err)
	_, err = st.Join(ctx, k, projection.Layout{Group: "acct", Count: 8, Partition: journal.DefaultPartition}, "b", time.Minute)
	require.ErrorIs(t, err, projection.ErrSlicingChanged)
	_, err = st.Join(ctx, k, projection.Layout{}, "b", time.Minute)
	require.ErrorIs(t, err, projection.ErrSlicingChanged, "a sliced version cannot run unsliced")
	// A runner with the new slicing refuses to start, saying so.
	sl := projection.Slicing{Group: "acct", Count: 8}
	p := counting(h, k.Name, k.Version)
	p.Slicing = &sl
	r, err := projection.NewRunner(h.Journal, h.Store, p, opts("b"))
	require.NoError(t, err)
	err = r.Run(ctx)
	require.ErrorIs(t, err, projection.ErrSlicingChanged)
	require.ErrorIs(t, err, journal.ErrConfiguration)
	// A sliced projection with a Query is refused at definition.
	p.Query = journal.AllEvents()
	_, err = projection.NewRunner(h.Journal, h.Store, p, opts("b"))
	require.ErrorContains(t, err, "leave it empty")
}

// testSliceRunnersShareTheWork: two runners of a projection sliced in 8
// share the slices, apply every event of the group once per slice it is in
// (a transfer with two tags in two slices twice), skip events of other
// groups, and the version becomes active once every slice caught up.
func testSliceRunnersShare[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	st := h.Store
	sl := projection.Slicing{Group: "acct", Count: 8}
	k := projection.Key{Name: "sliced-share", Version: 1}
	var recs []journal.Record
	for i := range 40 {
		recs = append(recs, appendN(t, ctx, h.Journal, "", journal.Tag(fmt.Sprintf("acct:%d", i)), "Opened", 2)...)
	}
	appendN(t, ctx, h.Journal, "", "region:1", "Other", 5)
	a, b := tagIn(sl, 1), tagIn(sl, 6)
	res, err := h.Journal.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "Moved", SchemaVersion: 1, Tags: []journal.Tag{a, b}, Data: []byte(`{}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	transfer := res.Records[0]

	var mu sync.Mutex
	delivered := map[int][]journal.Tag{} // slice → the tags the transfer's delivery stands for
	p := projection.Projection[Tx]{Name: k.Name, Version: k.Version, Slicing: &sl, Handle: func(ctx context.Context, tx Tx, b projection.Batch) error {
		for i, r := range b.Records {
			if r.ID == transfer.ID {
				mu.Lock()
				delivered[b.Slices[i]] = sl.TagsIn(r, b.Slices[i])
				mu.Unlock()
			}
		}
		for _, r := range b.Records { // one at a time: a batch may hold a record twice
			if err := h.Apply(ctx, tx, "sliced-share", []journal.Record{r}); err != nil {
				return err
			}
		}
		return nil
	}}
	for _, owner := range []string{"r1", "r2"} {
		r, err := projection.NewRunner(h.Journal, h.Store, p, opts(owner))
		require.NoError(t, err)
		running(t, r)
	}
	sharedAndApplied(t, ctx, st, k, 2, uint64(len(recs)+2))
	got := h.Applied(t, "sliced-share")
	require.Equal(t, 2, got[transfer.ID], "the transfer is delivered once to each of its two slices")
	mu.Lock()
	require.Equal(t, map[int][]journal.Tag{1: {a}, 6: {b}}, delivered)
	mu.Unlock()
	delete(got, transfer.ID)
	require.Len(t, got, len(recs), "only the group's events are applied")
	for _, r := range recs {
		require.Equal(t, 1, got[r.ID])
	}
	require.Eventually(t, func() bool {
		s, err := h.Store.Status(ctx, k)
		require.NoError(t, err)
		return s.Active
	}, 30*time.Second, 10*time.Millisecond, "the version did not become active once caught up")
}

// testSlicedStatus: a sliced projection's Status (and Statuses) sums up its
// slices: the oldest slice checkpoint, the deliveries applied, the runners
// holding live slice leases, running while one does, stopped after.
func testSlicedStatus[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	st := h.Store
	sl := projection.Slicing{Group: "acct", Count: 4, Partition: journal.DefaultPartition}
	k := projection.Key{Name: "sliced-status", Version: 1}
	var recs [][]journal.Record
	for s := range sl.Count {
		recs = append(recs, appendN(t, ctx, h.Journal, "", tagIn(sl, s), "E", 2))
	}
	status := func() projection.Status {
		t.Helper()
		got, err := h.Store.Status(ctx, k)
		require.NoError(t, err)
		all, err := h.Store.Statuses(ctx)
		require.NoError(t, err)
		i := slices.IndexFunc(all, func(x projection.Status) bool { return x.Key == k })
		require.GreaterOrEqual(t, i, 0, "Statuses lists the sliced projection")
		require.Equal(t, got.State, all[i].State)
		require.Equal(t, got.Events, all[i].Events)
		require.Equal(t, got.Checkpoint, all[i].Checkpoint)
		require.Equal(t, got.SliceOwners, all[i].SliceOwners)
		return got
	}
	_, err := st.Join(ctx, k, sl.Layout(), "a", time.Minute)
	require.NoError(t, err)
	got := status()
	require.Equal(t, projection.StateIdle, got.State)
	require.Equal(t, 4, got.Slices)
	require.Zero(t, got.SliceOwners)

	a, err := st.Claim(ctx, k, "a", time.Minute, []int{0, 1})
	require.NoError(t, err)
	b, err := st.Claim(ctx, k, "b", time.Minute, []int{2, 3})
	require.NoError(t, err)
	require.Len(t, a, 2)
	require.Len(t, b, 2)
	got = status()
	require.Equal(t, projection.StateRunning, got.State)
	require.Equal(t, 2, got.SliceOwners)
	require.Empty(t, got.Owner, "a sliced projection has no single owner")

	// Slices 1-3 apply both their records, slice 0 its first: the
	// projection's checkpoint is slice 0's, the oldest.
	leases := append(a, b...)
	for _, l := range leases {
		s, n := l.Slice, 2
		if s == 0 {
			n = 1
		}
		apply := func(ctx context.Context, tx Tx) error { return h.Apply(ctx, tx, "sliced-status", recs[s][:n]) }
		require.NoError(t, st.Commit(ctx, []projection.Lease{l}, recs[s][:n], slices.Repeat([]int{s}, n), apply))
	}
	got = status()
	require.EqualValues(t, 7, got.Events)
	require.Equal(t, recs[0][0].Position, got.Checkpoint)

	// Without a live slice lease it is stopped, its progress kept.
	require.NoError(t, st.Release(ctx, a))
	require.Equal(t, 1, status().SliceOwners)
	require.NoError(t, st.Release(ctx, b))
	got = status()
	require.Equal(t, projection.StateStopped, got.State)
	require.Zero(t, got.SliceOwners)
	require.EqualValues(t, 7, got.Events)

	p, ok := h.Store.(projection.Pauser)
	require.True(t, ok)
	require.NoError(t, p.Pause(ctx, k))
	require.Equal(t, projection.StatePaused, status().State)
	require.NoError(t, p.Resume(ctx, k))
	require.Equal(t, projection.StateStandby, status().State, "resumed, with no runner yet")

	// A reset moves every slice back to zero: idle, as before it ran.
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	got = status()
	require.Equal(t, projection.StateIdle, got.State)
	require.Equal(t, journal.Position{}, got.Checkpoint)
}

// testSlicedDeadLetterReplay: a sliced projection's handler dead-letters a
// poison record; once a replay is requested, one of the two runners that
// share the slices replays it, exactly once, and the letter is gone.
func testSlicedDeadLetterReplay[Tx any](t *testing.T, h Harness[Tx]) {
	replayer(t, h)
	ctx := ctxT(t)
	st := h.Store
	sl := projection.Slicing{Group: "acct", Count: 4}
	k := projection.Key{Name: "sliced-replay", Version: 1}
	var recs []journal.Record
	for i := range 8 {
		recs = append(recs, appendN(t, ctx, h.Journal, "", journal.Tag(fmt.Sprintf("acct:%d", i)), "Opened", 3)...)
	}
	poison := recs[10]
	var replays atomic.Int32
	p := projection.Projection[Tx]{Name: k.Name, Version: k.Version, Slicing: &sl,
		Handle: deadLettering(h, k, "sliced-replay", poison),
		Replay: func(ctx context.Context, tx Tx, d projection.DeadLetter) error {
			replays.Add(1)
			return h.Apply(ctx, tx, "sliced-replay", []journal.Record{d.Record})
		}}
	for _, owner := range []string{"r1", "r2"} {
		o := opts(owner)
		o.ReplayInterval = 20 * time.Millisecond
		r, err := projection.NewRunner(h.Journal, h.Store, p, o)
		require.NoError(t, err)
		running(t, r)
	}
	sharedAndApplied(t, ctx, st, k, 2, uint64(len(recs)))
	dl, err := h.Store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, poison.ID, dl[0].Record.ID)
	require.Zero(t, h.Applied(t, "sliced-replay")[poison.ID])

	n, err := replayer(t, h).RequestReplay(ctx, k)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool {
		dl, err := h.Store.DeadLetters(ctx, k)
		require.NoError(t, err)
		return len(dl) == 0
	}, 30*time.Second, 10*time.Millisecond, "no runner replayed the requested letter")
	require.EqualValues(t, 1, replays.Load(), "the letter is replayed by one runner, once")
	exactlyOnce(t, h, "sliced-replay", recs)
}
