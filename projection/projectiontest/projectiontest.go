package projectiontest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// Harness gives the suite a journal, a store and a read model to write in
// the store's transactions. Each call of New returns a fresh, empty one.
type Harness[Tx any] struct {
	Journal journal.Journal
	Store   projection.Store[Tx]
	// Apply records, in tx, that each record was applied once more to the
	// read model called model.
	Apply func(ctx context.Context, tx Tx, model string, recs []journal.Record) error
	// Applied returns how many times each event was applied to model.
	Applied func(t *testing.T, model string) map[uuid.UUID]int
	// Clear empties model in tx.
	Clear func(ctx context.Context, tx Tx, model string) error
}

// Run runs every case against the harnesses new returns.
func Run[Tx any](t *testing.T, newHarness func(t *testing.T) Harness[Tx]) {
	cases := []struct {
		name string
		f    func(t *testing.T, h Harness[Tx])
	}{
		{"ClaimIsExclusiveUntilExpiry", testClaim[Tx]},
		{"CommitIsFenced", testCommitFenced[Tx]},
		{"HandlerErrorStoresNothing", testHandlerErrorStoresNothing[Tx]},
		{"CatchUpThenLive", testCatchUpThenLive[Tx]},
		{"CommittedBeforeProgress", testCommittedBeforeProgress[Tx]},
		{"RestartResumesAtCheckpoint", testRestart[Tx]},
		{"StandbyTakesOver", testStandby[Tx]},
		{"TransientFailuresAreRetried", testTransient[Tx]},
		{"PoisonRecordStopsTheProjection", testPoison[Tx]},
		{"ResetStartsOver", testReset[Tx]},
		{"NewVersionTakesOver", testBlueGreen[Tx]},
		{"QueryFilters", testFilter[Tx]},
		{"DeadLettersCommitWithTheBatch", testDeadLetters[Tx]},
		{"PublisherDeliversInOrder", testPublisher[Tx]},
		{"PublisherDeadLetters", testPublisherDeadLetters[Tx]},
		{"DeadLetterReplay", testDeadLetterReplay[Tx]},
		{"DeadLetterReplayOnce", testDeadLetterReplayOnce[Tx]},
		{"PublisherReplaysOnRequest", testPublisherReplaysOnRequest[Tx]},
		{"RowsReadModel", testRowsReadModel[Tx]},
		{"RebuildRowsDoesNotDoubleCount", testRebuildRows[Tx]},
		{"RebuildClearsDeclaredReadModel", testRebuildClearsDeclaredReadModel[Tx]},
		{"PauseAndResume", testPauseResume[Tx]},
		{"StatesThroughPauseAndRebuild", testStatesThroughPauseAndRebuild[Tx]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, newHarness(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// appendN appends n one-event appends to stream tag, in partition part.
func appendN(t *testing.T, ctx context.Context, j journal.Journal, part string, tag journal.Tag, typ string, n int) []journal.Record {
	t.Helper()
	var out []journal.Record
	for range n {
		res, err := j.Append(ctx, []journal.Event{{
			ID: journal.NewEventID(), Type: typ, SchemaVersion: 1, Tags: []journal.Tag{tag},
			Data: []byte(`{}`), Metadata: journal.Metadata{Partition: part},
		}}, journal.AppendOptions{})
		require.NoError(t, err)
		out = append(out, res.Records...)
	}
	return out
}

func opts(owner string) projection.Options {
	return projection.Options{Owner: owner, BatchSize: 16, LeaseTTL: 2 * time.Second, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3}
}

func counting[Tx any](h Harness[Tx], name string, version int) projection.Projection[Tx] {
	return projection.Projection[Tx]{Name: name, Version: version, Handle: func(ctx context.Context, tx Tx, b projection.Batch) error {
		return h.Apply(ctx, tx, fmt.Sprintf("%s@%d", name, version), b.Records)
	}}
}

// running runs r in the background. stop cancels Run's context and returns
// Run's result; done is closed when Run has returned.
func running[Tx any](t *testing.T, r *projection.Runner[Tx]) (stop func() error, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	fin := make(chan struct{})
	var res error
	go func() {
		defer close(fin)
		res = r.Run(ctx)
	}()
	stop = func() error {
		cancel()
		select {
		case <-fin:
			return res
		case <-time.After(30 * time.Second):
			return errors.New("Run did not return within 30s of its context ending")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop, fin
}

// exactlyOnce asserts that model applied each of recs exactly once and nothing else.
func exactlyOnce[Tx any](t *testing.T, h Harness[Tx], model string, recs []journal.Record) {
	t.Helper()
	got := h.Applied(t, model)
	missed, twice := 0, 0
	for _, r := range recs {
		switch n := got[r.ID]; {
		case n == 0:
			missed++
		case n > 1:
			twice++
		}
	}
	require.Zero(t, missed, "events never applied")
	require.Zero(t, twice, "events applied more than once")
	require.Len(t, got, len(recs), "events applied that were not expected")
}

// claim joins k as an unsliced projection (its one slice) for owner and
// claims the slice: the lease, or ok false while another runner holds it.
func claim[Tx any](t *testing.T, ctx context.Context, st projection.Store[Tx], k projection.Key, owner string, ttl time.Duration) (projection.Lease, bool) {
	t.Helper()
	_, err := st.Join(ctx, k, projection.Layout{}, owner, ttl)
	require.NoError(t, err)
	got, err := st.Claim(ctx, k, owner, ttl, []int{0})
	require.NoError(t, err)
	if len(got) == 0 {
		return projection.Lease{}, false
	}
	require.Len(t, got, 1)
	require.Equal(t, 0, got[0].Slice)
	return got[0], true
}

// commit commits recs under l (an unsliced projection's lease) from the
// checkpoint from.
func commit[Tx any](ctx context.Context, st projection.Store[Tx], l projection.Lease, from journal.Position, recs []journal.Record, apply func(ctx context.Context, tx Tx) error) error {
	l.Checkpoint = from
	return st.Commit(ctx, []projection.Lease{l}, recs, make([]int, len(recs)), apply)
}

func testClaim[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	k := projection.Key{Name: "claims", Version: 1}
	a, ok := claim(t, ctx, h.Store, k, "a", time.Minute)
	require.True(t, ok)
	require.EqualValues(t, 1, a.Epoch)
	_, ok = claim(t, ctx, h.Store, k, "b", time.Second)
	require.False(t, ok, "b claimed a live lease of a")
	lost, err := h.Store.Renew(ctx, []projection.Lease{a})
	require.NoError(t, err)
	require.Empty(t, lost)
	// A renewal extends the lease by the lease's TTL: renewed for 100ms, it
	// lapses soon after, then another owner may claim and the old one is
	// fenced.
	short := a
	short.TTL = 100 * time.Millisecond
	lost, err = h.Store.Renew(ctx, []projection.Lease{short})
	require.NoError(t, err)
	require.Empty(t, lost)
	require.Eventually(t, func() bool {
		_, ok = claim(t, ctx, h.Store, k, "b", time.Minute)
		return ok
	}, 10*time.Second, 20*time.Millisecond)
	lost, err = h.Store.Renew(ctx, []projection.Lease{a})
	require.NoError(t, err)
	require.Equal(t, []int{0}, lost)
	st, err := h.Store.Status(ctx, k)
	require.NoError(t, err)
	require.Equal(t, "b", st.Owner)
	require.EqualValues(t, 2, st.Epoch)
	require.Equal(t, projection.StateRunning, st.State)
	require.Zero(t, st.Slices, "an unsliced projection reports no slices")

	// Release frees the lease at once.
	b := projection.Lease{Key: k, Owner: "b", Epoch: 2, TTL: time.Minute}
	require.NoError(t, h.Store.Release(ctx, []projection.Lease{b}))
	c, ok := claim(t, ctx, h.Store, k, "c", time.Minute)
	require.True(t, ok)
	require.EqualValues(t, 3, c.Epoch)

	_, err = h.Store.Claim(ctx, projection.Key{Name: "", Version: 1}, "a", time.Second, []int{0})
	require.ErrorContains(t, err, "name is empty")
	_, err = h.Store.Join(ctx, projection.Key{Name: "x", Version: 0}, projection.Layout{}, "a", time.Second)
	require.ErrorContains(t, err, "versions start at 1")
}

func testCommitFenced[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 3)
	k := projection.Key{Name: "fenced", Version: 1}
	a, ok := claim(t, ctx, h.Store, k, "a", time.Minute)
	require.True(t, ok)
	apply := func(ctx context.Context, tx Tx) error { return h.Apply(ctx, tx, "fenced", recs[:1]) }
	require.NoError(t, commit(ctx, h.Store, a, journal.Position{}, recs[:1], apply))

	// A stale checkpoint (the runner's view is behind the store's) is fenced.
	called := false
	err := commit(ctx, h.Store, a, journal.Position{}, recs[1:2], func(context.Context, Tx) error { called = true; return nil })
	require.ErrorIs(t, err, projection.ErrFenced)
	require.False(t, called, "the handler ran under a fenced commit")

	// A reset moves the epoch on: the old lease is fenced.
	require.NoError(t, h.Store.Reset(ctx, k, nil))
	err = commit(ctx, h.Store, a, recs[0].Position, recs[1:2], func(context.Context, Tx) error { called = true; return nil })
	require.ErrorIs(t, err, projection.ErrFenced)
	require.False(t, called, "the handler ran under a fenced commit")
	st, err := h.Store.Status(ctx, k)
	require.NoError(t, err)
	require.Equal(t, journal.Position{}, st.Checkpoint)
	require.Zero(t, st.Events)

	// An expired lease is fenced even when nobody claimed since.
	b, ok := claim(t, ctx, h.Store, k, "b", 100*time.Millisecond)
	require.True(t, ok)
	time.Sleep(300 * time.Millisecond)
	err = commit(ctx, h.Store, b, journal.Position{}, recs[:1], func(context.Context, Tx) error { called = true; return nil })
	require.ErrorIs(t, err, projection.ErrFenced)
	require.False(t, called)
	exactlyOnce(t, h, "fenced", recs[:1])
}

func testHandlerErrorStoresNothing[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 2)
	k := projection.Key{Name: "herr", Version: 1}
	a, ok := claim(t, ctx, h.Store, k, "a", time.Minute)
	require.True(t, ok)
	boom := errors.New("boom")
	err := commit(ctx, h.Store, a, journal.Position{}, recs, func(context.Context, Tx) error { return boom })
	var herr *projection.HandlerError
	require.ErrorAs(t, err, &herr)
	require.ErrorIs(t, err, boom)
	require.Equal(t, recs[0].Position, herr.At)
	st, err := h.Store.Status(ctx, k)
	require.NoError(t, err)
	require.Equal(t, journal.Position{}, st.Checkpoint, "a failed batch moved the checkpoint")
	require.NoError(t, commit(ctx, h.Store, a, journal.Position{}, recs, func(ctx context.Context, tx Tx) error { return h.Apply(ctx, tx, "herr", recs) }))
	st, err = h.Store.Status(ctx, k)
	require.NoError(t, err)
	require.Equal(t, recs[1].Position, st.Checkpoint)
	require.EqualValues(t, 2, st.Events)
}

// testCommittedBeforeProgress: while Options.Committed runs for a batch,
// the runner's progress does not show that batch yet; WaitFor for its last
// record returns only after the hook returned.
func testCommittedBeforeProgress[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 3)
	entered, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	defer free() // a failed assertion must not leave the runner in the hook
	o := opts("a")
	o.Committed = func(projection.Batch) {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	r, err := projection.NewRunner(h.Journal, h.Store, counting(h, "committed-hook", 1), o)
	require.NoError(t, err)
	stop, _ := running(t, r)
	<-entered
	require.True(t, r.Progress().Checkpoint.IsZero(), "the batch's progress is published before its Committed returned")
	waited := make(chan error, 1)
	go func() { waited <- r.WaitFor(ctx, recs[len(recs)-1].Position) }()
	free()
	require.NoError(t, <-waited)
	require.Equal(t, recs[len(recs)-1].Position, r.Progress().Checkpoint)
	require.NoError(t, stop())
}

func testCatchUpThenLive[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	var recs []journal.Record
	for i := range 5 {
		recs = append(recs, appendN(t, ctx, h.Journal, "", journal.Tag(fmt.Sprintf("s:%d", i)), "E", 20)...)
	}
	recs = append(recs, appendN(t, ctx, h.Journal, "tenant-b", "s:1", "E", 7)...) // another partition
	o := opts("a")
	var committed atomic.Int64
	o.Committed = func(b projection.Batch) { committed.Add(int64(len(b.Records))) }
	r, err := projection.NewRunner(h.Journal, h.Store, counting(h, "live", 1), o)
	require.NoError(t, err)
	stop, _ := running(t, r)
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))
	live := appendN(t, ctx, h.Journal, "", "s:9", "E", 30)
	recs = append(recs, live...)
	require.NoError(t, r.WaitFor(ctx, live[len(live)-1].Position))
	exactlyOnce(t, h, "live@1", recs)
	require.EqualValues(t, len(recs), committed.Load(), "Committed saw every applied record once")
	behind, err := r.Behind(ctx)
	require.NoError(t, err)
	require.Zero(t, behind)
	p := r.Progress()
	require.Equal(t, projection.StateRunning, p.State)
	require.EqualValues(t, len(recs), p.Events)
	st, err := h.Store.Status(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, live[len(live)-1].Position, st.Checkpoint)
	require.EqualValues(t, len(recs), st.Events)
	require.Eventually(t, func() bool {
		st, err := h.Store.Status(ctx, r.Key())
		require.NoError(t, err)
		return st.Active
	}, 10*time.Second, 5*time.Millisecond, "a caught-up projection becomes the active version")
	require.NoError(t, stop())
	require.Equal(t, projection.StateStopped, r.Progress().State)
	st, err = h.Store.Status(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, projection.StateStopped, st.State, "the store says what the runner said: it stopped cleanly")
	require.Empty(t, st.Owner, "and gave its lease up")
}

func testRestart[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 40)
	r1, err := projection.NewRunner(h.Journal, h.Store, counting(h, "restart", 1), opts("a"))
	require.NoError(t, err)
	stop, _ := running(t, r1)
	require.NoError(t, r1.WaitFor(ctx, recs[len(recs)-1].Position))
	require.NoError(t, stop())
	recs = append(recs, appendN(t, ctx, h.Journal, "", "s:2", "E", 25)...)
	r2, err := projection.NewRunner(h.Journal, h.Store, counting(h, "restart", 1), opts("b"))
	require.NoError(t, err)
	stop, _ = running(t, r2)
	require.NoError(t, r2.WaitFor(ctx, recs[len(recs)-1].Position))
	exactlyOnce(t, h, "restart@1", recs)
	require.NoError(t, stop())
	appendN(t, ctx, h.Journal, "", "s:3", "E", 4)
	behind, err := r2.Behind(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, behind, "events after the checkpoint of a stopped runner")
}

func testStandby[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 30)
	a, err := projection.NewRunner(h.Journal, h.Store, counting(h, "standby", 1), opts("a"))
	require.NoError(t, err)
	stopA, _ := running(t, a)
	require.NoError(t, a.WaitFor(ctx, recs[len(recs)-1].Position))
	b, err := projection.NewRunner(h.Journal, h.Store, counting(h, "standby", 1), opts("b"))
	require.NoError(t, err)
	running(t, b)
	require.Eventually(t, func() bool { return b.Progress().State == projection.StateStandby }, 10*time.Second, 5*time.Millisecond)
	more := appendN(t, ctx, h.Journal, "", "s:2", "E", 10)
	require.NoError(t, a.WaitFor(ctx, more[len(more)-1].Position))
	require.Zero(t, b.Progress().Events, "the standby applied events while the other runner held the lease")
	require.NoError(t, stopA()) // releases the lease
	recs = append(recs, more...)
	last := appendN(t, ctx, h.Journal, "", "s:3", "E", 10)
	recs = append(recs, last...)
	require.NoError(t, b.WaitFor(ctx, last[len(last)-1].Position))
	require.Equal(t, projection.StateRunning, b.Progress().State)
	exactlyOnce(t, h, "standby@1", recs)
}

func testTransient[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 50)
	bad := recs[23].ID
	var failures atomic.Int32
	p := projection.Projection[Tx]{Name: "transient", Version: 1, Handle: func(ctx context.Context, tx Tx, b projection.Batch) error {
		for _, r := range b.Records {
			if r.ID == bad && failures.Load() < 2 {
				failures.Add(1)
				return errors.New("flaky downstream")
			}
		}
		return h.Apply(ctx, tx, "transient", b.Records)
	}}
	r, err := projection.NewRunner(h.Journal, h.Store, p, opts("a"))
	require.NoError(t, err)
	running(t, r)
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))
	require.EqualValues(t, 2, failures.Load())
	exactlyOnce(t, h, "transient", recs)
	require.Empty(t, r.Progress().Error, "the error of a retried batch stays after it succeeded")
}

func testPoison[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 40)
	bad := recs[21]
	var tries atomic.Int32
	p := projection.Projection[Tx]{Name: "poison", Version: 1, Handle: func(ctx context.Context, tx Tx, b projection.Batch) error {
		for _, r := range b.Records {
			if r.ID == bad.ID {
				if len(b.Records) == 1 {
					tries.Add(1)
				}
				return errors.New("cannot apply this event")
			}
		}
		return h.Apply(ctx, tx, "poison", b.Records)
	}}
	r, err := projection.NewRunner(h.Journal, h.Store, p, opts("a"))
	require.NoError(t, err)
	stop, done := running(t, r)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the projection did not stop on a record that always fails")
	}
	runErr := stop()
	var failed *projection.FailedError
	require.ErrorAs(t, runErr, &failed)
	require.Equal(t, bad.Position, failed.At)
	require.Equal(t, 3, failed.Attempts)
	require.EqualValues(t, 3, tries.Load(), "MaxAttempts tries of the failing record alone")
	require.ErrorContains(t, runErr, "cannot apply this event")
	exactlyOnce(t, h, "poison", recs[:21]) // everything before it, nothing after
	st, err := h.Store.Status(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, projection.StateFailed, st.State)
	require.Equal(t, bad.Position, st.FailedAt)
	require.Equal(t, recs[20].Position, st.Checkpoint)
	require.Contains(t, st.Error, "cannot apply this event")
	pr := r.Progress()
	require.Equal(t, projection.StateFailed, pr.State)
	require.Equal(t, bad.Position, pr.FailedAt)
}

func testReset[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 30)
	r, err := projection.NewRunner(h.Journal, h.Store, counting(h, "reset", 1), opts("a"))
	require.NoError(t, err)
	running(t, r)
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))
	require.NoError(t, h.Store.Reset(ctx, r.Key(), func(ctx context.Context, tx Tx) error { return h.Clear(ctx, tx, "reset@1") }))
	// The runner is fenced, claims again and replays from zero into the
	// cleared read model.
	more := appendN(t, ctx, h.Journal, "", "s:1", "E", 5)
	recs = append(recs, more...)
	require.Eventually(t, func() bool {
		st, err := h.Store.Status(ctx, r.Key())
		require.NoError(t, err)
		return st.Checkpoint == more[len(more)-1].Position && st.Events == uint64(len(recs))
	}, 20*time.Second, 10*time.Millisecond)
	exactlyOnce(t, h, "reset@1", recs)
}

func testBlueGreen[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 60)
	v1, err := projection.NewRunner(h.Journal, h.Store, counting(h, "bg", 1), opts("a"))
	require.NoError(t, err)
	stop1, done1 := running(t, v1)
	require.NoError(t, v1.WaitFor(ctx, recs[len(recs)-1].Position))
	require.Eventually(t, func() bool {
		st, err := h.Store.Status(ctx, v1.Key())
		require.NoError(t, err)
		return st.Active
	}, 10*time.Second, 10*time.Millisecond)

	v2, err := projection.NewRunner(h.Journal, h.Store, counting(h, "bg", 2), opts("b"))
	require.NoError(t, err)
	running(t, v2)
	require.NoError(t, v2.WaitFor(ctx, recs[len(recs)-1].Position))
	select {
	case <-done1:
		require.ErrorIs(t, stop1(), projection.ErrSuperseded)
	case <-ctx.Done():
		t.Fatal("version 1 kept running after version 2 caught up")
	}
	st1, err := h.Store.Status(ctx, v1.Key())
	require.NoError(t, err)
	st2, err := h.Store.Status(ctx, v2.Key())
	require.NoError(t, err)
	require.False(t, st1.Active)
	require.Equal(t, projection.StateSuperseded, st1.State)
	require.True(t, st2.Active)
	exactlyOnce(t, h, "bg@1", recs)
	exactlyOnce(t, h, "bg@2", recs)
	all, err := h.Store.Statuses(ctx)
	require.NoError(t, err)
	var keys []projection.Key
	for _, s := range all {
		if s.Key.Name == "bg" {
			keys = append(keys, s.Key)
		}
	}
	require.Equal(t, []projection.Key{{Name: "bg", Version: 1}, {Name: "bg", Version: 2}}, keys)
}

func testFilter[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	var want []journal.Record
	for range 5 {
		want = append(want, appendN(t, ctx, h.Journal, "", "s:1", "Wanted", 3)...)
		appendN(t, ctx, h.Journal, "", "s:1", "Other", 4)
	}
	p := counting(h, "filter", 1)
	p.Query = journal.Query{Items: []journal.QueryItem{{Types: []string{"Wanted"}}}}
	r, err := projection.NewRunner(h.Journal, h.Store, p, opts("a"))
	require.NoError(t, err)
	running(t, r)
	require.NoError(t, r.WaitFor(ctx, want[len(want)-1].Position))
	exactlyOnce(t, h, "filter@1", want)
}

func testDeadLetters[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 3)
	k := projection.Key{Name: "dl", Version: 1}
	a, ok := claim(t, ctx, h.Store, k, "a", time.Minute)
	require.True(t, ok)
	require.NoError(t, commit(ctx, h.Store, a, journal.Position{}, recs, func(ctx context.Context, tx Tx) error {
		return h.Store.DeadLetter(ctx, tx, projection.DeadLetter{Key: k, Record: recs[1], Error: "HTTP 410", Attempts: 4})
	}))
	dl, err := h.Store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, recs[1].ID, dl[0].Record.ID)
	require.Equal(t, recs[1].Position, dl[0].Record.Position)
	require.Equal(t, recs[1].Type, dl[0].Record.Type)
	require.Equal(t, "HTTP 410", dl[0].Error)
	require.Equal(t, 4, dl[0].Attempts)
	require.False(t, dl[0].At.IsZero())
}

func testPublisher[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	var recs []journal.Record
	for i := range 4 {
		recs = append(recs, appendN(t, ctx, h.Journal, "", journal.Tag(fmt.Sprintf("s:%d", i%2)), "E", 10)...)
	}
	ch := make(chan journal.Record, len(recs))
	pub, err := projection.NewPublisher(h.Journal, h.Store, "pub", journal.Query{}, projection.ChannelSink(ch), projection.PublisherOptions{}, opts("a"))
	require.NoError(t, err)
	running(t, pub)
	require.NoError(t, pub.WaitFor(ctx, recs[len(recs)-1].Position))
	require.Len(t, ch, len(recs))
	for i := range recs {
		got := <-ch
		require.Equal(t, recs[i].ID, got.ID, "published out of position order")
	}
	dl, err := h.Store.DeadLetters(ctx, pub.Key())
	require.NoError(t, err)
	require.Empty(t, dl)
}

func testPublisherDeadLetters[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 6)
	// Event 1 fails twice, then is accepted; event 2 is refused (410) at
	// once; event 3 always fails with 503; the rest are accepted.
	var mu sync.Mutex
	calls := map[string]int{}
	var accepted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m projection.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || r.Header.Get("Idempotency-Key") != m.ID {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		calls[m.ID]++
		switch {
		case m.ID == recs[1].ID.String() && calls[m.ID] <= 2, m.ID == recs[3].ID.String():
			http.Error(w, "try later", http.StatusServiceUnavailable)
		case m.ID == recs[2].ID.String():
			http.Error(w, "gone", http.StatusGone)
		default:
			accepted = append(accepted, m.ID)
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	sink := &projection.WebhookSink{URL: srv.URL}
	pub, err := projection.NewPublisher(h.Journal, h.Store, "hook", journal.Query{}, sink,
		projection.PublisherOptions{Attempts: 4, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}, opts("a"))
	require.NoError(t, err)
	running(t, pub)
	require.NoError(t, pub.WaitFor(ctx, recs[len(recs)-1].Position))
	mu.Lock()
	require.Equal(t, []string{recs[0].ID.String(), recs[1].ID.String(), recs[4].ID.String(), recs[5].ID.String()}, accepted)
	require.Equal(t, 3, calls[recs[1].ID.String()])
	require.Equal(t, 1, calls[recs[2].ID.String()], "a permanent refusal is not retried")
	require.Equal(t, 4, calls[recs[3].ID.String()], "Attempts tries before the dead letter")
	mu.Unlock()
	dl, err := h.Store.DeadLetters(ctx, pub.Key())
	require.NoError(t, err)
	require.Len(t, dl, 2)
	require.Equal(t, recs[2].ID, dl[0].Record.ID)
	require.Equal(t, 1, dl[0].Attempts)
	require.Contains(t, dl[0].Error, "HTTP 410")
	require.Equal(t, recs[3].ID, dl[1].Record.ID)
	require.Equal(t, 4, dl[1].Attempts)
	require.Contains(t, dl[1].Error, "HTTP 503")
}

// replayer returns h's store as a DeadLetterReplayer, or skips.
func replayer[Tx any](t *testing.T, h Harness[Tx]) projection.DeadLetterReplayer[Tx] {
	rp, ok := h.Store.(projection.DeadLetterReplayer[Tx])
	if !ok {
		t.Skipf("the store %T does not implement projection.DeadLetterReplayer", h.Store)
	}
	return rp
}

// poisonDeadLettered runs a projection whose handler dead-letters the record
// poison (in its transaction) and applies the others to model; it returns
// once every record of recs was handled.
func poisonDeadLettered[Tx any](t *testing.T, ctx context.Context, h Harness[Tx], k projection.Key, model string, recs []journal.Record, poison journal.Record) {
	t.Helper()
	p := projection.Projection[Tx]{Name: k.Name, Version: k.Version, Handle: deadLettering(h, k, model, poison)}
	r, err := projection.NewRunner(h.Journal, h.Store, p, opts("a"))
	require.NoError(t, err)
	stop, _ := running(t, r)
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))
	require.NoError(t, stop())
}

// deadLettering is a handler that writes poison to k's dead letters (in its
// transaction) and applies the other records to model.
func deadLettering[Tx any](h Harness[Tx], k projection.Key, model string, poison journal.Record) func(ctx context.Context, tx Tx, b projection.Batch) error {
	return func(ctx context.Context, tx Tx, b projection.Batch) error {
		var ok []journal.Record
		for _, r := range b.Records {
			if r.ID == poison.ID {
				if err := h.Store.DeadLetter(ctx, tx, projection.DeadLetter{Key: k, Record: r, Error: "cannot apply this event", Attempts: 1}); err != nil {
					return err
				}
				continue
			}
			ok = append(ok, r)
		}
		return h.Apply(ctx, tx, model, ok)
	}
}

// testDeadLetterReplay: a poison record goes to the dead letters; a replay
// with the handler still broken keeps it (new error, one more attempt);
// with the handler fixed the replay applies it once and removes it.
func testDeadLetterReplay[Tx any](t *testing.T, h Harness[Tx]) {
	replayer(t, h)
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 8)
	k := projection.Key{Name: "replay", Version: 1}
	poisonDeadLettered(t, ctx, h, k, "replay", recs, recs[3])
	dl, err := h.Store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, recs[3].ID, dl[0].Record.ID)

	rep, err := projection.ReplayDeadLetters(ctx, h.Store, k, func(ctx context.Context, tx Tx, d projection.DeadLetter) error {
		return errors.New("still broken")
	})
	require.NoError(t, err)
	require.Zero(t, rep.Replayed)
	require.Len(t, rep.Failed, 1)
	require.Equal(t, "still broken", rep.Failed[0].Error)
	require.Equal(t, 2, rep.Failed[0].Attempts)
	dl, err = h.Store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Len(t, dl, 1, "a replay that fails keeps the letter")
	require.Equal(t, "still broken", dl[0].Error)
	require.Equal(t, 2, dl[0].Attempts)
	require.Equal(t, recs[3].Type, dl[0].Record.Type)

	var seen []uuid.UUID
	rep, err = projection.ReplayDeadLetters(ctx, h.Store, k, func(ctx context.Context, tx Tx, d projection.DeadLetter) error {
		seen = append(seen, d.Record.ID)
		require.Equal(t, recs[3].Data, d.Record.Data, "the letter carries its event")
		return h.Apply(ctx, tx, "replay", []journal.Record{d.Record})
	})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Replayed)
	require.Empty(t, rep.Failed)
	require.Equal(t, []uuid.UUID{recs[3].ID}, seen)
	dl, err = h.Store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Empty(t, dl, "a replayed letter is removed")
	exactlyOnce(t, h, "replay", recs)

	rep, err = projection.ReplayDeadLetters(ctx, h.Store, k, func(context.Context, Tx, projection.DeadLetter) error {
		t.Error("nothing is left to replay")
		return nil
	})
	require.NoError(t, err)
	require.Zero(t, rep.Replayed)
	err = replayer(t, h).ReplayDeadLetter(ctx, k, recs[3].Position, func(context.Context, Tx, projection.DeadLetter) error { return nil })
	require.ErrorIs(t, err, projection.ErrNoDeadLetter)
}

// testDeadLetterReplayOnce: replays of the same letters racing from several
// goroutines apply each letter once.
func testDeadLetterReplayOnce[Tx any](t *testing.T, h Harness[Tx]) {
	replayer(t, h)
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 6)
	k := projection.Key{Name: "replay-race", Version: 1}
	a, ok := claim(t, ctx, h.Store, k, "a", time.Minute)
	require.True(t, ok)
	require.NoError(t, commit(ctx, h.Store, a, journal.Position{}, recs, func(ctx context.Context, tx Tx) error {
		for _, r := range recs {
			if err := h.Store.DeadLetter(ctx, tx, projection.DeadLetter{Key: k, Record: r, Error: "HTTP 503", Attempts: 5}); err != nil {
				return err
			}
		}
		return nil
	}))
	var wg sync.WaitGroup
	var replayed atomic.Int32
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := projection.ReplayDeadLetters(ctx, h.Store, k, func(ctx context.Context, tx Tx, d projection.DeadLetter) error {
				return h.Apply(ctx, tx, "replay-race", []journal.Record{d.Record})
			})
			assert(t, err == nil, "replay: %v", err)
			replayed.Add(int32(rep.Replayed))
		}()
	}
	wg.Wait()
	require.EqualValues(t, len(recs), replayed.Load())
	exactlyOnce(t, h, "replay-race", recs)
	dl, err := h.Store.DeadLetters(ctx, k)
	require.NoError(t, err)
	require.Empty(t, dl)
}

func assert(t *testing.T, ok bool, format string, args ...any) {
	if !ok {
		t.Errorf(format, args...)
	}
}

// sinkFunc adapts a function to projection.Sink.
type sinkFunc func(ctx context.Context, rec journal.Record) error

func (f sinkFunc) Publish(ctx context.Context, rec journal.Record) error { return f(ctx, rec) }

// testPublisherReplaysOnRequest: the sink refuses one event permanently; it
// becomes a dead letter. A replay requested while the sink still refuses it
// keeps the letter (new error, request cleared); once the sink is fixed, a
// request makes the running publisher deliver it and remove the letter.
func testPublisherReplaysOnRequest[Tx any](t *testing.T, h Harness[Tx]) {
	rp := replayer(t, h)
	ctx := ctxT(t)
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 5)
	var mu sync.Mutex
	broken := true
	got := map[uuid.UUID]int{}
	sink := sinkFunc(func(ctx context.Context, rec journal.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if rec.ID == recs[2].ID && broken {
			return projection.Permanent(errors.New("HTTP 410"))
		}
		got[rec.ID]++
		return nil
	})
	o := opts("a")
	o.ReplayInterval = 20 * time.Millisecond
	pub, err := projection.NewPublisher(h.Journal, h.Store, "replaying", journal.Query{}, sink, projection.PublisherOptions{}, o)
	require.NoError(t, err)
	running(t, pub)
	require.NoError(t, pub.WaitFor(ctx, recs[len(recs)-1].Position))
	dl, err := h.Store.DeadLetters(ctx, pub.Key())
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.True(t, dl[0].ReplayRequestedAt.IsZero())

	n, err := rp.RequestReplay(ctx, pub.Key())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool {
		dl, err := h.Store.DeadLetters(ctx, pub.Key())
		require.NoError(t, err)
		require.Len(t, dl, 1, "a replay that fails keeps the letter")
		return dl[0].ReplayRequestedAt.IsZero() && dl[0].Attempts == 2
	}, 10*time.Second, 5*time.Millisecond, "the publisher did not try the requested replay")

	mu.Lock()
	broken = false
	mu.Unlock()
	n, err = rp.RequestReplay(ctx, pub.Key())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool {
		dl, err := h.Store.DeadLetters(ctx, pub.Key())
		require.NoError(t, err)
		return len(dl) == 0
	}, 10*time.Second, 5*time.Millisecond, "the publisher did not replay the letter")
	mu.Lock()
	defer mu.Unlock()
	for _, r := range recs {
		require.Equal(t, 1, got[r.ID], "event %s", r.ID)
	}
}

// testPauseResume: a paused projection's runner stops applying (its lease is
// fenced, claims fail with ErrPaused) and says so, the store reports it
// paused, events appended meanwhile wait; after Resume the runner continues
// from its checkpoint and applies everything exactly once.
func testPauseResume[Tx any](t *testing.T, h Harness[Tx]) {
	ctx := ctxT(t)
	pauser, ok := h.Store.(projection.Pauser)
	require.True(t, ok, "the store implements projection.Pauser")
	recs := appendN(t, ctx, h.Journal, "", "s:1", "E", 20)
	r, err := projection.NewRunner(h.Journal, h.Store, counting(h, "pause", 1), opts("a"))
	require.NoError(t, err)
	stop, _ := running(t, r)
	defer func() { _ = stop() }()
	require.NoError(t, r.WaitFor(ctx, recs[len(recs)-1].Position))

	require.Error(t, pauser.Pause(ctx, projection.Key{Name: "never-ran", Version: 1}), "an unknown projection cannot be paused")
	require.NoError(t, pauser.Pause(ctx, r.Key()))
	require.NoError(t, pauser.Pause(ctx, r.Key()), "pausing twice changes nothing")
	require.Eventually(t, func() bool { return r.Progress().State == projection.StatePaused }, 10*time.Second, 5*time.Millisecond,
		"the runner notices the pause")
	st, err := h.Store.Status(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, projection.StatePaused, st.State)
	require.Empty(t, st.Owner)
	_, err = h.Store.Claim(ctx, r.Key(), "b", time.Minute, []int{0})
	require.ErrorIs(t, err, projection.ErrPaused)

	more := appendN(t, ctx, h.Journal, "", "s:1", "E", 10)
	st, err = h.Store.Status(ctx, r.Key())
	require.NoError(t, err)
	require.Equal(t, recs[len(recs)-1].Position, st.Checkpoint, "a paused projection applies nothing")
	require.Equal(t, projection.StatePaused, r.Progress().State)

	require.NoError(t, pauser.Resume(ctx, r.Key()))
	require.NoError(t, r.WaitFor(ctx, more[len(more)-1].Position))
	exactlyOnce(t, h, "pause@1", append(recs, more...))
	require.Equal(t, projection.StateRunning, r.Progress().State)
}
