package pgadmin_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// holdGate holds the handlers of runners: while it is closed a handler
// waits (in its transaction, before applying anything) until it is opened.
type holdGate struct {
	mu     sync.Mutex
	closed bool
	open   chan struct{}
}

func (g *holdGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.open = true, make(chan struct{})
}

func (g *holdGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
}

func (g *holdGate) wait(ctx context.Context) error {
	g.mu.Lock()
	closed, ch := g.closed, g.open
	g.mu.Unlock()
	if !closed {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appliedModel is a read model of (tag, version) deliveries in table
// applied: each handler call checks, in its transaction, that every stream
// version it applies is the stream's next (no gap, no repeat, in order)
// and records each violation.
type appliedModel struct {
	f     *fixture
	model string
	mu    sync.Mutex
	wrong []string
}

func newAppliedModel(t *testing.T, f *fixture, model string) *appliedModel {
	_, err := f.pool.Exec(t.Context(), `CREATE TABLE IF NOT EXISTS `+quote(f.cfg.Schema)+`.applied (model text, tag text, version bigint, event_id uuid NOT NULL, PRIMARY KEY (model, tag, version))`)
	require.NoError(t, err)
	return &appliedModel{f: f, model: model}
}

// apply records the delivery of rec for tags.
func (m *appliedModel) apply(ctx context.Context, tx pgx.Tx, rec journal.Record, tags []journal.Tag) error {
	s := quote(m.f.cfg.Schema)
	for _, tag := range tags {
		v := rec.Version(tag)
		var last int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s+`.applied WHERE model = $1 AND tag = $2`, m.model, string(tag)).Scan(&last); err != nil {
			return err
		}
		if uint64(last)+1 != v {
			m.mu.Lock()
			m.wrong = append(m.wrong, fmt.Sprintf("%s: version %d applied after %d", tag, v, last))
			m.mu.Unlock()
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s+`.applied VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, m.model, string(tag), int64(v), rec.ID); err != nil {
			return err
		}
	}
	return nil
}

// equalsJournal asserts that the model holds every stream version of recs
// exactly once, with its event, and that no delivery was out of order.
func (m *appliedModel) equalsJournal(t *testing.T, recs []journal.Record) {
	t.Helper()
	want := map[string]uuid.UUID{}
	for _, r := range recs {
		for _, l := range r.Links {
			want[fmt.Sprintf("%s/%d", l.Tag, l.Version)] = r.ID
		}
	}
	rows, err := m.f.pool.Query(t.Context(), `SELECT tag, version, event_id FROM `+quote(m.f.cfg.Schema)+`.applied WHERE model = $1`, m.model)
	require.NoError(t, err)
	got := map[string]uuid.UUID{}
	for rows.Next() {
		var tag string
		var v int64
		var id uuid.UUID
		require.NoError(t, rows.Scan(&tag, &v, &id))
		got[fmt.Sprintf("%s/%d", tag, v)] = id
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got, "the read model equals the journal")
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Empty(t, m.wrong, "every stream's versions were applied once each, in order")
}

// archiveLoad appends the events of the test: 16 acct streams, each event
// in one stream, every fifth in two (a transfer), first perWriter events
// from each of 4 writers, concurrently. It returns them.
func archiveLoad(t *testing.T, f *fixture, round, perWriter int) []journal.Record {
	t.Helper()
	var mu sync.Mutex
	var out []journal.Record
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				a := journal.Tag(fmt.Sprintf("acct:%d", w*4+i%4))
				tags := []journal.Tag{a}
				if i%5 == 4 {
					tags = append(tags, journal.Tag(fmt.Sprintf("acct:%d", w*4+(i+1)%4)))
				}
				e := event("Changed", tags...)
				e.Data = []byte(fmt.Sprintf(`{"round":%d,"writer":%d,"i":%d}`, round, w, i))
				res, err := f.journal.Append(t.Context(), []journal.Event{e}, journal.AppendOptions{})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				out = append(out, res.Records...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	slices.SortFunc(out, func(a, b journal.Record) int { return a.Position.Compare(b.Position) })
	return out
}

// streamVersions returns each stream's newest version in recs.
func streamVersions(recs []journal.Record) map[journal.Tag]uint64 {
	out := map[journal.Tag]uint64{}
	for _, r := range recs {
		for _, l := range r.Links {
			out[l.Tag] = max(out[l.Tag], l.Version)
		}
	}
	return out
}

// movedEvents counts the events of recs a run moves out of the hot table:
// those hot before it (hot) that every chain's cut (cuts) passed and that
// are at or below the feed floor.
func movedEvents(recs []journal.Record, hot map[uuid.UUID]bool, cuts map[journal.Tag]uint64, floor journal.Position) int {
	n := 0
	for _, r := range recs {
		if !hot[r.ID] || r.Position.After(floor) {
			continue
		}
		cut := true
		for _, l := range r.Links {
			cut = cut && l.Version <= cuts[l.Tag]
		}
		if cut {
			n++
			delete(hot, r.ID)
		}
	}
	return n
}

// heldProjection returns an unsliced projection k of q that applies each
// record to m after waiting at gate, and a function reading its status.
func heldProjection(t *testing.T, store *postgres.ProjectionStore, k projection.Key, q journal.Query, m *appliedModel, gate *holdGate) (projection.Projection[pgx.Tx], func() projection.Status) {
	p := projection.Projection[pgx.Tx]{Name: k.Name, Version: k.Version, Query: q,
		Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
			if err := gate.wait(ctx); err != nil {
				return err
			}
			for _, rec := range b.Records {
				if err := m.apply(ctx, tx, rec, rec.Tags); err != nil {
					return err
				}
			}
			return nil
		}}
	return p, func() projection.Status {
		st, err := store.Status(t.Context(), k)
		require.NoError(t, err)
		return st
	}
}

// runRunners starts n runners of p on goroutines and returns a function that
// stops them and asserts that each returned nil.
func runRunners(t *testing.T, f *fixture, store *postgres.ProjectionStore, p projection.Projection[pgx.Tx], n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		r, err := projection.NewRunner(f.journal, store, p, projection.Options{Owner: fmt.Sprintf("runner-%d", i), BatchSize: 16,
			LeaseTTL: 20 * time.Second, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Run(ctx)
		}()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "runner %d", i)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestArchiveWhileSlicedRunnersLag: a sliced projection (4 runners, 8
// slices of 16 acct streams, transfers in two slices) applies a first load,
// then its runners are held while 4 writers append a second one; an
// archive whose policy would cut every stream to its last version runs
// meanwhile: it moves nothing a slice has not applied (each slice's lag is
// the same before and after, counted exactly), and exactly the stream
// versions and events the slices passed. Released, the runners catch up:
// every delivery applied once per slice, each stream in order, the read
// model equal to the journal, lag zero. Caught up, a second archive moves
// exactly the rest of what the policy asks, tag index and event rows.
func TestArchiveWhileSlicedRunnersLag(t *testing.T) {
	t.Parallel()
	f := setupPool(t, 16)
	ctx := t.Context()
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	sl := projection.Slicing{Group: "acct", Count: 8, Partition: journal.DefaultPartition}
	k := projection.Key{Name: "balances", Version: 1}
	m := newAppliedModel(t, f, k.String())
	var gate holdGate
	p := projection.Projection[pgx.Tx]{Name: k.Name, Version: k.Version, Slicing: &sl,
		Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
			if err := gate.wait(ctx); err != nil {
				return err
			}
			for i, rec := range b.Records {
				if err := m.apply(ctx, tx, rec, sl.TagsIn(rec, b.Slices[i])); err != nil {
					return err
				}
			}
			return nil
		}}
	deliveries := func(recs []journal.Record) (per map[int]int, last map[int]journal.Position, total int) {
		per, last = map[int]int{}, map[int]journal.Position{}
		for _, r := range recs {
			seen := map[int]bool{}
			for _, tag := range r.Tags {
				if s, ok := sl.SliceOf(tag); ok && !seen[s] {
					seen[s] = true
					per[s]++
					last[s] = r.Position
					total++
				}
			}
		}
		return per, last, total
	}
	applied := func() (events uint64, ckpts map[int]journal.Position) {
		sts, _, err := store.Slices(ctx, k)
		require.NoError(t, err)
		ckpts = map[int]journal.Position{}
		for _, x := range sts {
			events += x.Events
			ckpts[x.Slice] = x.Checkpoint
		}
		return events, ckpts
	}
	lags := func() map[int]uint64 {
		ls, err := f.admin.SliceLags(ctx, k, 0)
		require.NoError(t, err)
		out := map[int]uint64{}
		for i, l := range ls {
			out[i] = l.Events
		}
		return out
	}

	stop := runRunners(t, f, store, p, 4)
	first := archiveLoad(t, f, 1, 40)
	_, lastFirst, n1 := deliveries(first)
	require.Eventually(t, func() bool { n, _ := applied(); return n == uint64(n1) }, time.Minute, 5*time.Millisecond, "the first load is applied")

	gate.hold()
	second := archiveLoad(t, f, 2, 60)
	all := append(slices.Clone(first), second...)
	perSecond, _, n2 := deliveries(second)
	n, ckpts := applied()
	require.EqualValues(t, n1, n, "held: nothing of the second load is applied")
	for s := range sl.Count {
		require.Equal(t, lastFirst[s], ckpts[s], "slice %d stands at its last delivery of the first load", s)
	}
	before := lags()
	for s := range sl.Count {
		require.EqualValues(t, perSecond[s], before[s], "slice %d's lag is what it has not applied", s)
	}

	// The archive while the runners lag: each stream is cut to what its
	// slice applied (the first load), the policy's last version at most;
	// an event leaves when every chain it is linked to is cut past it.
	heads := streamVersions(all)
	firstVersions := streamVersions(first)
	cuts := map[journal.Tag]uint64{}
	var wantVersions uint64
	for tag, v := range heads {
		cuts[tag] = min(firstVersions[tag], v-1)
		wantVersions += cuts[tag]
	}
	hot := map[uuid.UUID]bool{}
	for _, r := range all {
		hot[r.ID] = true
	}
	// A slice holds an event row through its tag index rows (the chains'
	// cuts), not through a floor: a slice without events holds nothing.
	wantEvents := movedEvents(all, hot, cuts, all[len(all)-1].Position)
	prog, err := f.admin.Archive(ctx, keep("acct", 1, true), pgadmin.ArchiveOptions{BatchSize: 50})
	require.NoError(t, err)
	require.Equal(t, wantVersions, prog.Versions, "the tag index rows every slice passed, no more")
	require.EqualValues(t, wantEvents, prog.Events, "the event rows every chain and every slice passed")
	require.NotZero(t, prog.Versions)
	require.NotZero(t, prog.Events)
	for tag, cut := range cuts {
		sum, err := f.journal.TagSummary(ctx, journal.Stream(tag))
		require.NoError(t, err)
		require.Equal(t, cut, sum.Cut.Version, "%s", tag)
	}
	require.Equal(t, before, lags(), "the archive changed no slice's lag")

	// Released, the runners catch up on everything.
	gate.release()
	require.Eventually(t, func() bool { n, _ := applied(); return n == uint64(n1+n2) }, time.Minute, 5*time.Millisecond, "the runners catch up")
	stop()
	m.equalsJournal(t, all)
	n, ckpts = applied()
	require.EqualValues(t, n1+n2, n, "every delivery applied once per slice")
	perAll, lastAll, _ := deliveries(all)
	empty := 0
	for s := range sl.Count {
		require.Equal(t, lastAll[s], ckpts[s], "slice %d stands at its last delivery", s)
		if perAll[s] == 0 {
			empty++
		}
	}
	require.NotZero(t, empty, "a slice without events (its checkpoint zero) is part of the test: it held nothing back")
	for s, l := range lags() {
		require.Zero(t, l, "slice %d is caught up", s)
	}

	// Caught up: the second run cuts every stream to its last version and
	// moves every event row not the last of a stream.
	var wantRest uint64
	for tag, v := range heads {
		wantRest += v - 1 - cuts[tag]
		cuts[tag] = v - 1
	}
	wantEvents = movedEvents(all, hot, cuts, all[len(all)-1].Position)
	prog, err = f.admin.Archive(ctx, keep("acct", 1, true), pgadmin.ArchiveOptions{BatchSize: 50})
	require.NoError(t, err)
	require.Equal(t, wantRest, prog.Versions)
	require.EqualValues(t, wantEvents, prog.Events)
	require.NotZero(t, prog.Versions)
	require.NotZero(t, prog.Events)
	require.Equal(t, len(hot), f.count(t, "events", "true"), "only each stream's last event stays hot")
	require.Equal(t, len(heads), f.count(t, "event_tags", "true"))
	for tag := range heads {
		n, err := journal.VerifyStream(ctx, f.journal, journal.Stream(tag))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	}
}

// TestArchiveWhileUnslicedRunnersLag: the same for an unsliced projection
// (two runners, one standing by): held behind the writers, an archive cuts
// each stream only up to the projection's checkpoint and keeps every event
// row it has not applied (an unsliced projection may read streams through
// their tag index: TestArchiveWhileATagQueryProjectionLags); its lag is
// unchanged. Released, it applies every event once, in order, the read
// model equal to the journal; caught up, a second archive cuts the rest
// and moves the event rows it passed.
func TestArchiveWhileUnslicedRunnersLag(t *testing.T) {
	t.Parallel()
	f := setupPool(t, 16)
	ctx := t.Context()
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	k := projection.Key{Name: "balances", Version: 1}
	m := newAppliedModel(t, f, k.String())
	var gate holdGate
	p, status := heldProjection(t, store, k, journal.Query{}, m, &gate)

	stop := runRunners(t, f, store, p, 2)
	first := archiveLoad(t, f, 1, 40)
	require.Eventually(t, func() bool { return status().Events == uint64(len(first)) }, time.Minute, 5*time.Millisecond, "the first load is applied")

	gate.hold()
	second := archiveLoad(t, f, 2, 60)
	all := append(slices.Clone(first), second...)
	ckpt := status().Checkpoint
	require.Equal(t, first[len(first)-1].Position, ckpt, "held at the end of the first load")
	lag, err := f.journal.CountAfter(ctx, ckpt)
	require.NoError(t, err)
	require.EqualValues(t, len(second), lag)

	// The policy keeps each stream's last version; the projection's
	// checkpoint holds each stream's cut at its last version at or before
	// the checkpoint (the first load's).
	heads, applied := streamVersions(all), streamVersions(first)
	cuts := map[journal.Tag]uint64{}
	var wantVersions, restVersions uint64
	for tag, v := range heads {
		cuts[tag] = min(v-1, applied[tag])
		wantVersions += cuts[tag]
		restVersions += v - 1 - cuts[tag]
	}
	require.NotZero(t, restVersions, "the second load is held back")
	hot := map[uuid.UUID]bool{}
	for _, r := range all {
		hot[r.ID] = true
	}
	wantEvents := movedEvents(all, hot, cuts, ckpt)
	prog, err := f.admin.Archive(ctx, keep("acct", 1, true), pgadmin.ArchiveOptions{BatchSize: 50})
	require.NoError(t, err)
	require.Equal(t, wantVersions, prog.Versions, "every stream is cut up to the projection's checkpoint")
	require.EqualValues(t, wantEvents, prog.Events, "only the event rows the projection passed leave")
	require.NotZero(t, prog.Events)
	after, err := f.journal.CountAfter(ctx, ckpt)
	require.NoError(t, err)
	require.Equal(t, lag, after, "the archive changed the projection's lag")

	gate.release()
	require.Eventually(t, func() bool { return status().Events == uint64(len(all)) }, time.Minute, 5*time.Millisecond, "the runners catch up")
	stop()
	m.equalsJournal(t, all)
	st := status()
	require.Equal(t, all[len(all)-1].Position, st.Checkpoint)
	require.EqualValues(t, len(all), st.Events, "every event applied once")

	for tag, v := range heads {
		cuts[tag] = v - 1
	}
	wantEvents = movedEvents(all, hot, cuts, st.Checkpoint)
	prog, err = f.admin.Archive(ctx, keep("acct", 1, true), pgadmin.ArchiveOptions{BatchSize: 50})
	require.NoError(t, err)
	require.Equal(t, restVersions, prog.Versions, "the rest of what the policy asks")
	require.EqualValues(t, wantEvents, prog.Events, "the event rows the projection passed since")
	require.NotZero(t, prog.Events)
	require.Equal(t, len(hot), f.count(t, "events", "true"), "only each stream's last event stays hot")
}
