package projectiontest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// stateChecker returns a function that asserts k's status (through Status
// and Statuses, which must agree) has state want and paused, and returns it.
func stateChecker[Tx any](t *testing.T, ctx context.Context, h Harness[Tx], k projection.Key) func(want projection.State, paused bool, msg string) projection.Status {
	return func(want projection.State, paused bool, msg string) projection.Status {
		t.Helper()
		got, err := h.Store.Status(ctx, k)
		require.NoError(t, err)
		all, err := h.Store.Statuses(ctx)
		require.NoError(t, err)
		i := slices.IndexFunc(all, func(x projection.Status) bool { return x.Key == k })
		require.GreaterOrEqual(t, i, 0, "Statuses lists %s", k)
		require.Equal(t, got.State, all[i].State, "Status and Statuses agree: %s", msg)
		require.Equal(t, got.Paused, all[i].Paused, "Status and Statuses agree: %s", msg)
		require.Equal(t, want, got.State, msg)
		require.Equal(t, paused, got.Paused, msg)
		return got
	}
}

// testStatesThroughPauseAndRebuild: an unsliced projection's status stays
// true through pause → rebuild → resume, rebuild → pause → rebuild →
// resume, and a failure paused and rebuilt: paused while the pause holds
// (never idle), standby once resumed, running once claimed; Claim is
// refused while paused, also after a rebuild, and a runner then starts
// from zero.
func testStatesThroughPauseAndRebuild[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	pauser, ok := h.Store.(projection.Pauser)
	require.True(t, ok, "the store implements projection.Pauser")
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 6)
	applied := func(k projection.Key) {
		t.Helper()
		l, ok := claim(t, ctx, h.Store, k, "a", time.Minute)
		require.True(t, ok)
		require.NoError(t, commit(ctx, h.Store, l, l.Checkpoint, recs[:3], func(ctx context.Context, tx Tx) error {
			return h.Apply(ctx, tx, k.String(), recs[:3])
		}))
	}

	// Pause, then rebuild.
	k := projection.Key{Name: "pause-then-rebuild", Version: 1}
	state := stateChecker(t, ctx, h, k)
	applied(k)
	state(projection.StateRunning, false, "applying")
	require.NoError(t, pauser.Pause(ctx, k))
	state(projection.StatePaused, true, "paused")
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	st := state(projection.StatePaused, true, "rebuilt while paused: the pause holds, it is not idle")
	require.Equal(t, journal.Position{}, st.Checkpoint)
	require.Zero(t, st.Events)
	_, err := h.Store.Claim(ctx, k, "b", time.Minute, []int{0})
	require.ErrorIs(t, err, projection.ErrPaused, "no runner claims it while the pause holds")
	require.NoError(t, pauser.Resume(ctx, k))
	state(projection.StateStandby, false, "resumed: claimable, not claimed yet")
	l, ok := claim(t, ctx, h.Store, k, "b", time.Minute)
	require.True(t, ok)
	require.Equal(t, journal.Position{}, l.Checkpoint, "the runner starts over")
	state(projection.StateRunning, false, "claimed after the resume")
	require.NoError(t, h.Store.Release(ctx, []projection.Lease{l}))
	state(projection.StateStopped, false, "released")

	// Rebuild, then pause, rebuild again and resume.
	k = projection.Key{Name: "rebuild-then-pause", Version: 1}
	state = stateChecker(t, ctx, h, k)
	applied(k)
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	state(projection.StateIdle, false, "rebuilt, not paused")
	require.NoError(t, pauser.Pause(ctx, k))
	state(projection.StatePaused, true, "paused after the rebuild")
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	state(projection.StatePaused, true, "rebuilt again while paused")
	require.NoError(t, pauser.Resume(ctx, k))
	state(projection.StateStandby, false, "resumed")
	require.NoError(t, pauser.Resume(ctx, k), "resuming a projection that is not paused changes nothing")
	state(projection.StateStandby, false, "resumed twice")
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	state(projection.StateIdle, false, "rebuilt after the resume")

	// A failure, paused, then rebuilt.
	k = projection.Key{Name: "failed-paused-rebuilt", Version: 1}
	state = stateChecker(t, ctx, h, k)
	l, ok = claim(t, ctx, h.Store, k, "a", time.Minute)
	require.True(t, ok)
	require.NoError(t, h.Store.Fail(ctx, l, recs[0].Position, "poison"))
	require.NoError(t, pauser.Pause(ctx, k))
	state(projection.StateFailed, true, "a paused failure reports the failure")
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	st = state(projection.StatePaused, true, "the rebuild clears the failure, the pause holds")
	require.Empty(t, st.Error)
	require.NoError(t, pauser.Resume(ctx, k))
	state(projection.StateStandby, false, "resumed")

	require.Error(t, pauser.Resume(ctx, projection.Key{Name: "never-ran", Version: 1}), "an unknown projection cannot be resumed")
}

// testSlicedStatesThroughPauseAndRebuild: the same for a sliced projection,
// whose status sums its slices up: paused through a rebuild, slices
// refused while paused, standby once resumed, running once a slice is
// claimed, stopped once released.
func testSlicedStatesThroughPauseAndRebuild[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	st := h.Store
	pauser, ok := h.Store.(projection.Pauser)
	require.True(t, ok, "the store implements projection.Pauser")
	sl := projection.Slicing{Group: "acct", Count: 4, Partition: journal.DefaultPartition}
	var recs [][]journal.Record
	for s := range sl.Count {
		recs = append(recs, appendN(t, ctx, h.Journal, "", tagIn(sl, s), "E", 2))
	}
	applied := func(k projection.Key) {
		t.Helper()
		_, err := st.Join(ctx, k, sl.Layout(), "a", time.Minute)
		require.NoError(t, err)
		ls, err := st.Claim(ctx, k, "a", time.Minute, []int{0, 1, 2, 3})
		require.NoError(t, err)
		require.Len(t, ls, 4)
		for _, l := range ls {
			rs := recs[l.Slice]
			require.NoError(t, st.Commit(ctx, []projection.Lease{l}, rs, slices.Repeat([]int{l.Slice}, len(rs)), func(ctx context.Context, tx Tx) error {
				return h.Apply(ctx, tx, k.String(), rs)
			}))
		}
	}
	zero := func(k projection.Key) {
		t.Helper()
		sts, _, err := st.Slices(ctx, k)
		require.NoError(t, err)
		for _, x := range sts {
			require.Equal(t, journal.Position{}, x.Checkpoint, "slice %d is back at zero", x.Slice)
		}
	}

	// Pause, then rebuild.
	k := projection.Key{Name: "sliced-pause-then-rebuild", Version: 1}
	state := stateChecker(t, ctx, h, k)
	applied(k)
	state(projection.StateRunning, false, "applying")
	require.NoError(t, pauser.Pause(ctx, k))
	state(projection.StatePaused, true, "paused")
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	got := state(projection.StatePaused, true, "rebuilt while paused: the pause holds, it is not idle")
	require.Zero(t, got.Events)
	zero(k)
	_, err := st.Claim(ctx, k, "b", time.Minute, []int{0})
	require.ErrorIs(t, err, projection.ErrPaused, "no runner claims a slice while the pause holds")
	require.NoError(t, pauser.Resume(ctx, k))
	state(projection.StateStandby, false, "resumed: claimable, not claimed yet")
	ls, err := st.Claim(ctx, k, "b", time.Minute, []int{0, 1})
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, journal.Position{}, ls[0].Checkpoint, "the runner starts over")
	state(projection.StateRunning, false, "a slice claimed after the resume")
	require.NoError(t, st.Release(ctx, ls))
	state(projection.StateStopped, false, "released")

	// Rebuild, then pause, rebuild again and resume.
	k = projection.Key{Name: "sliced-rebuild-then-pause", Version: 1}
	state = stateChecker(t, ctx, h, k)
	applied(k)
	sts, _, err := st.Slices(ctx, k)
	require.NoError(t, err)
	var held []projection.Lease
	for _, x := range sts {
		held = append(held, projection.Lease{Key: k, Slice: x.Slice, Owner: x.Owner, Epoch: x.Epoch})
	}
	require.NoError(t, st.Release(ctx, held))
	state(projection.StateStopped, false, "ran, released")
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	state(projection.StateIdle, false, "rebuilt, not paused")
	zero(k)
	require.NoError(t, pauser.Pause(ctx, k))
	state(projection.StatePaused, true, "paused after the rebuild")
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	state(projection.StatePaused, true, "rebuilt again while paused")
	require.NoError(t, pauser.Resume(ctx, k))
	state(projection.StateStandby, false, "resumed")
	ls, err = st.Claim(ctx, k, "c", time.Minute, []int{3})
	require.NoError(t, err)
	require.Len(t, ls, 1)
	state(projection.StateRunning, false, "claimed")
}
