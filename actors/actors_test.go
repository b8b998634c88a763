package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/usercode"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/tagconsistency"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	mem   *memory.Journal
	snaps *snapshots.Memory
}

func newFixture() *fixture {
	return &fixture{mem: memory.New(), snaps: snapshots.NewMemory()}
}

// host starts a Host on the fixture's journal; it is shut down at cleanup.
func (f *fixture) host(t *testing.T, mutate ...func(*actors.Config)) *actors.Host {
	t.Helper()
	cfg := actors.Config{
		Journal:        f.mem,
		Sessions:       f.mem,
		Snapshots:      f.snaps,
		SnapshotPolicy: snapshots.DefaultPolicy(),
		Resolve: func(group string) actors.Model {
			if group == "counter" {
				return counter{}
			}
			return nil
		},
		NodeID: "node-a",
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := actors.NewHost(context.Background(), cfg)
	require.NoError(t, err)
	h.StrictStates()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, h.Shutdown(ctx))
	})
	return h
}

func stream(id string) journal.StreamID { return journal.Stream(journal.NewTag("counter", id)) }

func exec(t *testing.T, h *actors.Host, s journal.StreamID, cmd any) actors.Result {
	t.Helper()
	res, err := h.Execute(context.Background(), s, actors.Command{Payload: cmd})
	require.NoError(t, err)
	return res
}

func TestExecuteAppendsAndReturnsState(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("1")
	res := exec(t, h, s, add{5})
	require.Equal(t, uint64(1), res.Version)
	require.Equal(t, 5, res.State)
	require.Len(t, res.Records, 1)
	require.Equal(t, "Added", res.Records[0].Type)
	require.True(t, res.Records[0].HasTag(s.Tag))
	require.Equal(t, journal.DefaultPartition, res.Records[0].Metadata.Partition)

	res = exec(t, h, s, addTwice{2})
	require.Equal(t, uint64(3), res.Version)
	require.Equal(t, 9, res.State)
	require.Len(t, res.Records, 2)

	res = exec(t, h, s, noop{})
	require.Equal(t, uint64(3), res.Version)
	require.Equal(t, 9, res.State)
	require.Empty(t, res.Records)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	_, err := actors.NewHost(context.Background(), actors.Config{Sessions: mem, Resolve: func(string) actors.Model { return nil }, NodeID: "n"})
	require.ErrorContains(t, err, "Journal is nil")
	_, err = actors.NewHost(context.Background(), actors.Config{Journal: mem, Sessions: mem, Resolve: func(string) actors.Model { return nil }})
	require.ErrorContains(t, err, "NodeID is empty")
	_, err = actors.NewHost(context.Background(), actors.Config{Journal: mem, Sessions: mem, Resolve: func(string) actors.Model { return nil }, NodeID: "n", Bounds: actors.Bounds{OpenTimeout: -time.Second}})
	require.ErrorContains(t, err, "OpenTimeout is negative")
}

func TestGroupCommitManyCallers(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("hot")
	const callers, each = 32, 200
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				_, err := h.Execute(context.Background(), s, actors.Command{Payload: add{1}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	res := exec(t, h, s, noop{})
	require.Equal(t, callers*each, res.State)
	require.Equal(t, uint64(callers*each), res.Version)
	var v uint64
	for r, err := range f.mem.ReadStream(context.Background(), s, 1, 0) {
		require.NoError(t, err)
		v++
		require.Equal(t, v, r.Version(s.Tag))
	}
	require.Equal(t, uint64(callers*each), v)
}

func TestDomainErrorFailsOnlyItsCommand(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("limit")
	// 20 concurrent callers, limit 10: exactly 10 succeed, the rest get the domain error.
	var ok, tooBig atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := h.Execute(context.Background(), s, actors.Command{Payload: addUpTo{N: 1, Limit: 10}})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, errTooBig):
				tooBig.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(10), ok.Load())
	require.Equal(t, int32(10), tooBig.Load())
	require.Equal(t, 10, exec(t, h, s, noop{}).State)
}

func TestIdempotencyKeyAppendsOnceAcrossRestarts(t *testing.T) {
	t.Parallel()
	f := newFixture()
	s := stream("idem")
	cmd := actors.Command{Payload: addTwice{3}, Metadata: journal.Metadata{IdempotencyKey: "k1", CorrelationID: "c1"}}

	h1 := f.host(t, func(c *actors.Config) { c.NodeID = "n1" })
	first, err := h1.Execute(context.Background(), s, cmd)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	require.Len(t, first.Records, 2)
	again, err := h1.Execute(context.Background(), s, cmd)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Records, again.Records)
	require.NoError(t, h1.Shutdown(context.Background()))

	// A new host (no memory of the key, snapshot on passivation present)
	// finds the key through the journal.
	h2 := f.host(t, func(c *actors.Config) { c.NodeID = "n2" })
	exec(t, h2, s, add{1}) // activates the actor from the snapshot
	dup, err := h2.Execute(context.Background(), s, cmd)
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, first.Records[0].ID, dup.Records[0].ID)
	require.Len(t, dup.Records, 2)
	require.Equal(t, 7, exec(t, h2, s, noop{}).State)

	sum, err := f.mem.TagSummary(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, uint64(3), sum.Version)
}

func TestIdempotencyKeyTwiceInOneBatch(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("idem-batch")
	r, err := h.Reserve(context.Background(), s) // hold the actor so both queue into one batch
	require.NoError(t, err)
	cmd := actors.Command{Payload: add{4}, Metadata: journal.Metadata{IdempotencyKey: "same"}}
	results := make(chan actors.Result, 2)
	for range 2 {
		go func() {
			res, err := h.Execute(context.Background(), s, cmd)
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	require.Eventually(t, func() bool { return queued(h, s) }, 5*time.Second, time.Millisecond)
	require.NoError(t, r.Grantor.Cancel(context.Background(), nil))
	a, b := <-results, <-results
	require.Equal(t, a.Records[0].ID, b.Records[0].ID)
	require.NotEqual(t, a.Duplicate, b.Duplicate)
	require.Equal(t, 4, exec(t, h, s, noop{}).State)
}

// queued reports that both commands wait at the actor.
func queued(h *actors.Host, s journal.StreamID) bool {
	return h.Pending(s) >= 2
}

func TestPanicFailsOnlyThatCommandAndRebuilds(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("panic")
	exec(t, h, s, add{2})
	_, err := h.Execute(context.Background(), s, actors.Command{Payload: boom{}})
	var pe *usercode.PanicError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, usercode.ErrPanic)
	require.Equal(t, "decide", pe.Phase)
	require.Contains(t, err.Error(), "boom in decide")

	_, err = h.Execute(context.Background(), s, actors.Command{Payload: poison{}})
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "evolve", pe.Phase)
	require.Contains(t, err.Error(), "poisoned event")

	res := exec(t, h, s, add{3})
	require.Equal(t, 5, res.State)
	require.Equal(t, uint64(2), res.Version)
}

func TestPanicInBatchKeepsOtherCommands(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("panic-batch")
	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	errs := make(chan error, 3)
	for _, c := range []any{add{1}, boom{}, add{10}} {
		go func() {
			_, err := h.Execute(context.Background(), s, actors.Command{Payload: c})
			errs <- err
		}()
		require.Eventually(t, func() bool { return h.Pending(s) >= 1 }, 5*time.Second, time.Millisecond)
	}
	require.Eventually(t, func() bool { return h.Pending(s) == 3 }, 5*time.Second, time.Millisecond)
	require.NoError(t, r.Grantor.Cancel(context.Background(), nil))
	var panics, oks int
	for range 3 {
		if err := <-errs; err == nil {
			oks++
		} else {
			require.ErrorIs(t, err, usercode.ErrPanic)
			panics++
		}
	}
	require.Equal(t, 2, oks)
	require.Equal(t, 1, panics)
	require.Equal(t, 11, exec(t, h, s, noop{}).State)
}

func TestContextEndedBeforeDecisionIsNotExecuted(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("ctx")
	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.Execute(ctx, s, actors.Command{Payload: add{100}})
		done <- err
	}()
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, r.Grantor.Cancel(context.Background(), nil))
	res := exec(t, h, s, noop{})
	require.Equal(t, 0, res.State)
	require.Equal(t, uint64(0), res.Version)

	_, err = h.Execute(ctx, s, actors.Command{Payload: add{1}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestReservationQueuesCommandsAndAdoptsConfirmedEvents(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("dcb")
	exec(t, h, s, add{1})
	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Version)
	require.Equal(t, 1, r.State)
	require.False(t, r.LastPosition.IsZero())

	// A command and a second reservation queue behind the reservation, in that order.
	cmdDone := make(chan actors.Result, 1)
	go func() { cmdDone <- exec(t, h, s, add{100}) }()
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	second := make(chan *tagconsistency.Reservation, 1)
	go func() {
		r2, err := h.Reserve(context.Background(), s)
		if err != nil {
			t.Error(err)
		}
		second <- r2
	}()
	require.Eventually(t, func() bool { return h.Pending(s) == 2 }, 5*time.Second, time.Millisecond)

	// The holder appends with the actor's lease and expected version.
	other := journal.NewTag("transfer", "t1")
	res, err := f.mem.Append(context.Background(), []journal.Event{{
		ID: journal.NewEventID(), Type: "Added", SchemaVersion: 1, Tags: []journal.Tag{s.Tag, other},
		Data: []byte(`{"n":10}`),
	}}, journal.AppendOptions{Expect: map[journal.Tag]uint64{s.Tag: r.Version}, Leases: []journal.Lease{r.Lease}})
	require.NoError(t, err)
	require.NoError(t, r.Grantor.Confirm(context.Background(), res.Records))
	require.Error(t, r.Grantor.Cancel(context.Background(), nil), "a reservation ends once")

	got := <-cmdDone
	require.Equal(t, 111, got.State)
	require.Equal(t, uint64(3), got.Version)

	r2 := <-second
	require.Equal(t, uint64(3), r2.Version)
	require.Equal(t, 111, r2.State)
	require.NoError(t, r2.Grantor.Cancel(context.Background(), nil))
}

func TestReservationWaitTimesOutNamingTheTag(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t, func(c *actors.Config) {
		c.ReservationTimeout = 100 * time.Millisecond
		c.ReservationHold = time.Second
	})
	s := stream("busy")
	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	_, err = h.Reserve(context.Background(), s)
	var rte *tagconsistency.ReservationTimeoutError
	require.ErrorAs(t, err, &rte)
	require.Equal(t, s, rte.Stream)
	require.Contains(t, err.Error(), string(s.Tag))
	// The first reservation outlived the timeout too: the actor cancelled it.
	require.Eventually(t, func() bool {
		_, err := h.Execute(context.Background(), s, actors.Command{Payload: noop{}})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, r.Grantor.Confirm(context.Background(), nil), tagconsistency.ErrReservationLost)
}

func TestAppendBehindTheActorsBackIsCaughtUp(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("bypass")
	exec(t, h, s, add{1})
	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	// Someone appends with the lease but the actor is told the append failed.
	_, err = f.mem.Append(context.Background(), []journal.Event{{
		ID: journal.NewEventID(), Type: "Added", SchemaVersion: 1, Tags: []journal.Tag{s.Tag}, Data: []byte(`{"n":5}`),
	}}, journal.AppendOptions{Leases: []journal.Lease{r.Lease}})
	require.NoError(t, err)
	require.NoError(t, r.Grantor.Cancel(context.Background(), journal.ErrOutcomeUnknown))
	res := exec(t, h, s, add{1})
	require.Equal(t, 7, res.State)
	require.Equal(t, uint64(3), res.Version)
}

// A DCB command whose append was fenced (the lease revoked behind the actor's
// back, as a partition move does) cancels its reservations with that error:
// the actor drops the lease and acquires the stream again before the next
// grant, so the next reservation carries a current lease, not the refused one.
func TestReservationAfterRevokedLeaseCarriesANewLease(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("revoked-dcb")
	exec(t, h, s, add{1})
	ctx := context.Background()
	r, err := h.Reserve(ctx, s)
	require.NoError(t, err)
	require.NoError(t, f.mem.Release(ctx, r.Lease))
	ev := []journal.Event{{ID: journal.NewEventID(), Type: "Added", SchemaVersion: 1, Tags: []journal.Tag{s.Tag}, Data: []byte(`{"n":5}`)}}
	_, err = f.mem.Append(ctx, ev, journal.AppendOptions{Expect: map[journal.Tag]uint64{s.Tag: r.Version}, Leases: []journal.Lease{r.Lease}})
	require.True(t, journal.LeaseRevoked(err), "the released lease is refused: %v", err)
	require.NoError(t, r.Grantor.Cancel(ctx, err))

	r2, err := h.Reserve(ctx, s)
	require.NoError(t, err)
	require.Greater(t, r2.Lease.Epoch, r.Lease.Epoch, "the stream was acquired again")
	require.Equal(t, r.Version, r2.Version)
	res, err := f.mem.Append(ctx, ev, journal.AppendOptions{Expect: map[journal.Tag]uint64{s.Tag: r2.Version}, Leases: []journal.Lease{r2.Lease}})
	require.NoError(t, err)
	require.NoError(t, r2.Grantor.Confirm(ctx, res.Records))
	require.Equal(t, 7, exec(t, h, s, add{1}).State)
}

// An aggregate append fenced by a revoked lease is not seen by its caller:
// the actor acquires the stream again and decides the batch anew.
func TestAppendAfterRevokedLeaseSucceeds(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := stream("revoked-append")
	exec(t, h, s, add{1})
	ctx := context.Background()
	for round := range 3 {
		r, err := h.Reserve(ctx, s) // to learn the lease; the actor holds it
		require.NoError(t, err)
		require.NoError(t, r.Grantor.Cancel(ctx, nil))
		require.NoError(t, f.mem.Release(ctx, r.Lease))
		res := exec(t, h, s, add{1})
		require.Equal(t, 2+round, res.State, "round %d", round)
		require.Equal(t, uint64(2+round), res.Version)
	}
}

func TestPlainTagStreamServesReservationsOnly(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t)
	s := journal.Stream("course:7")
	_, err := h.Execute(context.Background(), s, actors.Command{Payload: add{1}})
	require.ErrorIs(t, err, actors.ErrNoAggregate)
	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	require.Nil(t, r.State)
	res, err := f.mem.Append(context.Background(), []journal.Event{{
		ID: journal.NewEventID(), Type: "Enrolled", SchemaVersion: 1, Tags: []journal.Tag{s.Tag}, Data: []byte(`{}`),
	}}, journal.AppendOptions{Expect: map[journal.Tag]uint64{s.Tag: 0}, Leases: []journal.Lease{r.Lease}})
	require.NoError(t, err)
	require.NoError(t, r.Grantor.Confirm(context.Background(), res.Records))
	r, err = h.Reserve(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Version)
	require.NoError(t, r.Grantor.Cancel(context.Background(), nil))
}

func TestPassivationSnapshotsAndReleases(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t, func(c *actors.Config) { c.IdleTimeout = 50 * time.Millisecond })
	s := stream("idle")
	exec(t, h, s, add{3})
	require.Eventually(t, func() bool { return h.ActiveActors() == 0 }, 5*time.Second, 5*time.Millisecond)
	snap, err := f.snaps.Load(context.Background(), s, ^uint64(0))
	require.NoError(t, err)
	require.Equal(t, uint64(1), snap.Version)
	require.JSONEq(t, "3", string(snap.State))
	// Released: another node acquires at once.
	other, err := f.mem.OpenNode(context.Background(), "other", time.Minute)
	require.NoError(t, err)
	_, err = f.mem.Acquire(context.Background(), other, s, 0)
	require.NoError(t, err)
}

func TestSnapshotRetentionKeepsTheNewest(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t, func(c *actors.Config) { c.SnapshotPolicy = snapshots.Policy{Every: 1, Keep: 2} })
	s := stream("retained")
	for range 6 {
		exec(t, h, s, add{1})
	}
	var infos []snapshots.Info
	require.Eventually(t, func() bool {
		var err error
		infos, err = f.snaps.List(context.Background(), s)
		return err == nil && len(infos) > 0 && infos[len(infos)-1].Version == 6 && len(infos) <= 2
	}, 5*time.Second, 5*time.Millisecond, "the newest snapshot is saved and at most 2 are kept: %v", infos)
	snap, err := f.snaps.Load(context.Background(), s, ^uint64(0))
	require.NoError(t, err)
	require.Equal(t, uint64(6), snap.Version, "pruning never removes the snapshot just saved")
	require.JSONEq(t, "6", string(snap.State))
}

func TestOpenTimeoutWhileAnotherNodeHoldsTheStream(t *testing.T) {
	t.Parallel()
	f := newFixture()
	a := f.host(t, func(c *actors.Config) { c.NodeID = "a" })
	b := f.host(t, func(c *actors.Config) { c.NodeID = "b"; c.OpenTimeout = 100 * time.Millisecond })
	s := stream("contended")
	exec(t, a, s, add{1})
	_, err := b.Execute(context.Background(), s, actors.Command{Payload: add{1}})
	require.ErrorIs(t, err, journal.ErrOpenTimeout)
	require.Eventually(t, func() bool { return b.ActiveActors() == 0 }, 5*time.Second, time.Millisecond)
}

func TestFencedAppendStopsTheActor(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	mem := memory.NewWithConfig(memory.Config{Clock: func() time.Time { return time.Unix(0, clock.Load()) }})
	f := &fixture{mem: mem, snaps: snapshots.NewMemory()}
	a := f.host(t, func(c *actors.Config) { c.NodeID = "a" })
	s := stream("fenced")
	exec(t, a, s, add{1})
	clock.Add(int64(2 * time.Minute)) // a's node session expires (its renewal is 20 s away)
	c := f.host(t, func(c *actors.Config) { c.NodeID = "c" })
	exec(t, c, s, add{10})
	_, err := a.Execute(context.Background(), s, actors.Command{Payload: add{100}})
	require.ErrorIs(t, err, journal.ErrSessionExpired)
	require.Eventually(t, func() bool { return a.ActiveActors() == 0 }, 5*time.Second, time.Millisecond)
	sum, err := mem.TagSummary(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, uint64(2), sum.Version)
}

func TestLostNodeSessionStopsActorsAndReopens(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	mem := memory.NewWithConfig(memory.Config{Clock: func() time.Time { return time.Unix(0, clock.Load()) }})
	f := &fixture{mem: mem, snaps: snapshots.NewMemory()}
	// The journal's clock is the test's; the host's own lease clock is real
	// time. The timeout only sets how often the host renews (every second),
	// and is long enough that a loaded machine never lets the lease lapse
	// before the test moves the journal's clock.
	h := f.host(t, func(c *actors.Config) { c.SessionTimeout = 3 * time.Second })
	s := stream("session")
	exec(t, h, s, add{1})
	first := h.Node().Incarnation

	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	pending := make(chan error, 1)
	go func() {
		_, err := h.Execute(context.Background(), s, actors.Command{Payload: add{100}})
		pending <- err
	}()
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)

	clock.Add(int64(time.Hour)) // the next renewal finds the node session expired
	require.ErrorIs(t, <-pending, journal.ErrSessionExpired)
	require.ErrorIs(t, r.Grantor.Confirm(context.Background(), nil), tagconsistency.ErrReservationLost)

	// The host opened a new incarnation and serves again, from the journal.
	require.Eventually(t, func() bool { return h.Node().Incarnation > first }, 5*time.Second, time.Millisecond)
	var res actors.Result
	require.Eventually(t, func() bool {
		res, err = h.Execute(context.Background(), s, actors.Command{Payload: add{1}})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, res.State)
}

// slowJournal embeds the in-memory journal and makes Append slow: it must
// not pass for an in-process journal.
type slowJournal struct{ *memory.Journal }

func (s slowJournal) Append(ctx context.Context, evs []journal.Event, o journal.AppendOptions) (journal.AppendResult, error) {
	time.Sleep(time.Millisecond)
	return s.Journal.Append(ctx, evs, o)
}

// TestInlineAppendOnlyForTheJournalItself: the in-memory journal's appends
// run on the actors' goroutines; a type embedding it keeps the I/O path.
func TestInlineAppendOnlyForTheJournalItself(t *testing.T) {
	t.Parallel()
	f := newFixture()
	require.True(t, f.host(t).AppendsInline())
	wrapped := f.host(t, func(c *actors.Config) { c.Journal, c.NodeID = slowJournal{f.mem}, "node-b" })
	require.False(t, wrapped.AppendsInline(), "a wrapper's InlineAppend names the embedded journal, not itself")
	require.EqualValues(t, 1, exec(t, wrapped, stream("w"), add{1}).Version, "and still appends")
}

// A posted confirmation (tagconsistency.PostingGrantor) ends the reservation
// like Confirm without an answer: the actor adopts the records and serves the
// caller's next command, which it queued behind it; a posted confirmation of
// a reservation the actor already cancelled makes it re-read the stream.
func TestPostedConfirmationIsAdopted(t *testing.T) {
	t.Parallel()
	f := newFixture()
	h := f.host(t, func(c *actors.Config) { c.ReservationHold = 200 * time.Millisecond })
	s := stream("posted")
	exec(t, h, s, add{1})
	appendHeld := func(r *tagconsistency.Reservation, n int) []journal.Record {
		t.Helper()
		res, err := f.mem.Append(context.Background(), []journal.Event{{
			ID: journal.NewEventID(), Type: "Added", SchemaVersion: 1, Tags: []journal.Tag{s.Tag},
			Data: fmt.Appendf(nil, `{"n":%d}`, n),
		}}, journal.AppendOptions{Expect: map[journal.Tag]uint64{s.Tag: r.Version}, Leases: []journal.Lease{r.Lease}})
		require.NoError(t, err)
		return res.Records
	}

	r, err := h.Reserve(context.Background(), s)
	require.NoError(t, err)
	pg, ok := r.Grantor.(tagconsistency.PostingGrantor)
	require.True(t, ok, "the actors' grants take posted confirmations")
	pg.PostConfirm(appendHeld(r, 10))
	require.Error(t, r.Grantor.Cancel(context.Background(), nil), "a reservation ends once")
	got := exec(t, h, s, add{100})
	require.Equal(t, 111, got.State)
	require.Equal(t, uint64(3), got.Version)

	// Held past ReservationHold: the actor cancels the reservation (and
	// re-reads the stream), then grants the next one. The late posted
	// confirmation finds the reservation gone: the actor re-reads again and
	// answers nobody (nothing waits for a posted confirmation).
	r, err = h.Reserve(context.Background(), s)
	require.NoError(t, err)
	recs := appendHeld(r, 1000)
	r2, err := h.Reserve(context.Background(), s) // granted once r expired
	require.NoError(t, err)
	require.Equal(t, uint64(4), r2.Version, "the expired holder's append was read")
	r.Grantor.(tagconsistency.PostingGrantor).PostConfirm(recs)
	r2.Grantor.(tagconsistency.PostingGrantor).PostConfirm(nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err = h.Execute(ctx, s, actors.Command{Payload: add{1}})
	require.NoError(t, err, "the actor serves again after a late posted confirmation")
	require.Equal(t, 1112, got.State)
	require.Equal(t, uint64(5), got.Version)
}
