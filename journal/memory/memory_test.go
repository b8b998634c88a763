package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/stretchr/testify/require"
)

// fakeClock is a manually advanced clock for Config.Clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type memSetup struct {
	ctx   context.Context
	clock *fakeClock
	mem   *memory.Journal
}

func setup(t *testing.T) memSetup {
	t.Helper()
	clock := newFakeClock()
	mem := memory.NewWithConfig(memory.Config{Clock: clock.Now})
	t.Cleanup(func() { _ = mem.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return memSetup{ctx: ctx, clock: clock, mem: mem}
}

func ev(typ string, tags ...journal.Tag) journal.Event {
	return journal.Event{ID: journal.NewEventID(), Type: typ, Tags: tags, Data: json.RawMessage(`{"t":"` + typ + `"}`)}
}

func drain(t *testing.T, seq iter.Seq2[journal.Record, error]) []journal.Record {
	t.Helper()
	var out []journal.Record
	for r, err := range seq {
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

func drainErr(seq iter.Seq2[journal.Record, error]) ([]journal.Record, error) {
	var out []journal.Record
	for r, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func ids(recs []journal.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func types(recs []journal.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Type
	}
	return out
}

func TestMemoryAppendAssignsPositionsVersionsAndTime(t *testing.T) {
	t.Parallel()
	s := setup(t)
	res, err := s.mem.Append(s.ctx, []journal.Event{ev("A", "x:1"), ev("B", "x:1", "y:1")}, journal.AppendOptions{})
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.Equal(t, journal.Position{Commit: 1, Seq: 1}, res.Records[0].Position)
	require.Equal(t, journal.Position{Commit: 1, Seq: 2}, res.Records[1].Position)
	require.Equal(t, res.Records[1].Position, res.Last())
	require.Equal(t, s.clock.Now().Truncate(time.Microsecond), res.Records[0].RecordedAt)
	require.Equal(t, time.UTC, res.Records[0].RecordedAt.Location())
	require.Equal(t, uint64(2), res.Records[1].Version("x:1"))
	require.Equal(t, uint64(1), res.Records[1].Version("y:1"))
	require.Equal(t, res.Records[0].Links[0].Hash, res.Records[1].Links[0].PrevHash)

	s.clock.Advance(time.Second)
	res2, err := s.mem.Append(s.ctx, []journal.Event{ev("C", "x:1")}, journal.AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, journal.Position{Commit: 2, Seq: 3}, res2.Records[0].Position)
	require.Equal(t, uint64(3), res2.Records[0].Version("x:1"))

	recs := drain(t, s.mem.ReadStream(s.ctx, journal.Stream("x:1"), 2, 0))
	require.Equal(t, []string{"B", "C"}, types(recs))
	recs = drain(t, s.mem.ReadStream(s.ctx, journal.StreamID{Tag: "x:1"}, 0, 2))
	require.Equal(t, []string{"A", "B"}, types(recs))
	require.Empty(t, drain(t, s.mem.ReadStream(s.ctx, journal.Stream("x:1"), 4, 0)))
	require.Empty(t, drain(t, s.mem.ReadStream(s.ctx, journal.Stream("nope"), 1, 0)))

	n, err := journal.VerifyStream(s.ctx, s.mem, journal.Stream("x:1"))
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
}

func TestMemoryRecordsAreCopies(t *testing.T) {
	t.Parallel()
	s := setup(t)
	e := ev("A", "x:1")
	e.Metadata.Scopes = []string{"s"}
	res, err := s.mem.Append(s.ctx, []journal.Event{e}, journal.AppendOptions{})
	require.NoError(t, err)
	e.Data[2] = 'Z'
	e.Tags[0] = "changed"
	res.Records[0].Data[2] = 'Z'
	res.Records[0].Tags[0] = "changed"
	res.Records[0].Links[0].Version = 99
	res.Records[0].Metadata.Scopes[0] = "changed"

	got, err := s.mem.ReadEvent(s.ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, `{"t":"A"}`, string(got.Data))
	require.Equal(t, []journal.Tag{"x:1"}, got.Tags)
	require.Equal(t, uint64(1), got.Links[0].Version)
	require.Equal(t, []string{"s"}, got.Metadata.Scopes)
	got.Data[2] = 'Q'
	again, err := s.mem.ReadEvent(s.ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, `{"t":"A"}`, string(again.Data))
}

func TestMemoryIdempotency(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a, b := ev("A", "x:1"), ev("B", "x:1")
	first, err := s.mem.Append(s.ctx, []journal.Event{a, b}, journal.AppendOptions{})
	require.NoError(t, err)

	// All stored: originals, Duplicate, no checks (this Expect would fail).
	s.clock.Advance(time.Hour)
	dup, err := s.mem.Append(s.ctx, []journal.Event{a, b}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"x:1": 0}})
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, first.Records, dup.Records)

	_, err = s.mem.Append(s.ctx, []journal.Event{a, ev("C", "x:1")}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrDuplicateMismatch)
	require.Contains(t, err.Error(), a.ID.String())

	changed := b
	changed.Data = json.RawMessage(`{"t":"other"}`)
	_, err = s.mem.Append(s.ctx, []journal.Event{changed}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrDuplicateMismatch)
	require.Contains(t, err.Error(), b.ID.String())

	head, err := s.mem.Head(s.ctx)
	require.NoError(t, err)
	require.Equal(t, first.Last(), head)
}

func TestMemoryExpectAndCondition(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r1, err := s.mem.Append(s.ctx, []journal.Event{ev("Opened", "acc:1")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"acc:1": 0, "acc:2": 0}})
	require.NoError(t, err)

	_, err = s.mem.Append(s.ctx, []journal.Event{ev("Deposited", "acc:1")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"acc:1": 0}})
	var vm *journal.VersionMismatchError
	require.ErrorAs(t, err, &vm)
	require.Equal(t, journal.VersionMismatchError{Stream: journal.Stream("acc:1"), Expected: 0, Actual: 1}, *vm)
	require.ErrorIs(t, err, journal.ErrVersionMismatch)

	cond := &journal.AppendCondition{FailIfEventsMatch: journal.Query{Items: []journal.QueryItem{{Types: []string{"Opened"}, Tags: []journal.Tag{"acc:1"}}}}}
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("Opened", "acc:1")}, journal.AppendOptions{Condition: cond})
	require.ErrorIs(t, err, journal.ErrAppendConditionFailed)
	require.Contains(t, err.Error(), r1.Records[0].ID.String())

	cond.After = r1.Last()
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("Deposited", "acc:1")}, journal.AppendOptions{Condition: cond})
	require.NoError(t, err)

	// A type-only condition and an All condition use different scan paths.
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("X", "misc:1")}, journal.AppendOptions{Condition: &journal.AppendCondition{
		FailIfEventsMatch: journal.Query{Items: []journal.QueryItem{{Types: []string{"Deposited"}}}}, After: r1.Last(),
	}})
	require.ErrorIs(t, err, journal.ErrAppendConditionFailed)
	_, err = s.mem.Append(s.ctx, []journal.Event{ev("X", "misc:1")}, journal.AppendOptions{Condition: &journal.AppendCondition{
		FailIfEventsMatch: journal.Query{All: true, Partition: "other"},
	}})
	require.NoError(t, err)

	n, err := s.mem.CountAfter(s.ctx, journal.Position{})
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
}

func TestMemoryReadOptions(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var recs []journal.Record
	for i := range 10 {
		tags := []journal.Tag{journal.NewTag("n", fmt.Sprint(i))}
		if i%2 == 0 {
			tags = append(tags, "even")
		}
		res, err := s.mem.Append(s.ctx, []journal.Event{ev(fmt.Sprint("T", i%3), tags...)}, journal.AppendOptions{})
		require.NoError(t, err)
		recs = append(recs, res.Records...)
	}
	other := ev("T0", "even")
	other.Metadata.Partition = "p2"
	_, err := s.mem.Append(s.ctx, []journal.Event{other}, journal.AppendOptions{})
	require.NoError(t, err)

	even := journal.TagQuery("even")
	got := drain(t, s.mem.Read(s.ctx, even, journal.ReadOptions{From: recs[4].Position, Limit: 2}))
	require.Equal(t, []uuid.UUID{recs[4].ID, recs[6].ID}, ids(got))
	got = drain(t, s.mem.Read(s.ctx, even, journal.ReadOptions{Backwards: true, Limit: 2}))
	require.Equal(t, []uuid.UUID{recs[8].ID, recs[6].ID}, ids(got))
	got = drain(t, s.mem.Read(s.ctx, even, journal.ReadOptions{Backwards: true, From: recs[6].Position}))
	require.Equal(t, []uuid.UUID{recs[6].ID, recs[4].ID, recs[2].ID, recs[0].ID}, ids(got))
	got = drain(t, s.mem.Read(s.ctx, even, journal.ReadOptions{Backwards: true, From: recs[5].Position, Limit: 1}))
	require.Equal(t, []uuid.UUID{recs[4].ID}, ids(got))

	// Types-only items, OR of items, and All.
	q := journal.Query{Items: []journal.QueryItem{{Types: []string{"T1"}}, {Tags: []journal.Tag{"n:0"}}, {Types: []string{"T2"}, Tags: []journal.Tag{"even"}}}}
	got = drain(t, s.mem.Read(s.ctx, q, journal.ReadOptions{}))
	require.Equal(t, []uuid.UUID{recs[0].ID, recs[1].ID, recs[2].ID, recs[4].ID, recs[7].ID, recs[8].ID}, ids(got))
	require.Len(t, drain(t, s.mem.Read(s.ctx, journal.AllEvents(), journal.ReadOptions{})), 10)
	require.Len(t, drain(t, s.mem.Read(s.ctx, journal.Query{All: true, AllPartitions: true}, journal.ReadOptions{})), 11)
	require.Len(t, drain(t, s.mem.Read(s.ctx, journal.Query{Partition: "p2", Items: []journal.QueryItem{{Tags: []journal.Tag{"even"}}}}, journal.ReadOptions{})), 1)
	require.Empty(t, drain(t, s.mem.Read(s.ctx, journal.TagQuery("even", "missing"), journal.ReadOptions{})))

	_, err = drainErr(s.mem.Read(s.ctx, journal.Query{}, journal.ReadOptions{}))
	require.ErrorIs(t, err, journal.ErrInvalidQuery)
	_, err = drainErr(s.mem.Read(s.ctx, even, journal.ReadOptions{Limit: -1}))
	require.ErrorIs(t, err, journal.ErrInvalidQuery)

	all := drain(t, s.mem.ReadAll(s.ctx, recs[7].Position, 0))
	require.Len(t, all, 3)
	require.Equal(t, recs[8].ID, all[0].ID)
	require.Len(t, drain(t, s.mem.ReadAll(s.ctx, journal.Position{}, 4)), 4)
}

// TestMemoryReadsPageWithoutHoldingTheLock appends from inside a read loop,
// which would deadlock if the read held the lock while yielding, and reads
// more records than one page holds.
func TestMemoryReadsPageWithoutHoldingTheLock(t *testing.T) {
	t.Parallel()
	s := setup(t)
	batch := make([]journal.Event, 600)
	for i := range batch {
		batch[i] = ev("A", "x:1")
	}
	_, err := s.mem.Append(s.ctx, batch, journal.AppendOptions{})
	require.NoError(t, err)
	n := 0
	for r, err := range s.mem.ReadStream(s.ctx, journal.Stream("x:1"), 1, 0) {
		require.NoError(t, err)
		n++
		require.Equal(t, uint64(n), r.Version("x:1"))
		if n == 1 {
			_, err := s.mem.Append(s.ctx, []journal.Event{ev("B", "y:1")}, journal.AppendOptions{})
			require.NoError(t, err)
		}
	}
	require.Equal(t, 600, n)
	require.Len(t, drain(t, s.mem.ReadAll(s.ctx, journal.Position{}, 0)), 601)
	require.Len(t, drain(t, s.mem.Read(s.ctx, journal.Query{Items: []journal.QueryItem{{Types: []string{"B"}}}}, journal.ReadOptions{})), 1)

	// A full scan that examines more records than one lock hold allows.
	filler := make([]journal.Event, 9000)
	for i := range filler {
		filler[i] = ev("N", "misc:1")
	}
	_, err = s.mem.Append(s.ctx, filler, journal.AppendOptions{})
	require.NoError(t, err)
	late := ev("Late", "misc:1")
	late.Metadata.Partition = "p2"
	_, err = s.mem.Append(s.ctx, []journal.Event{late}, journal.AppendOptions{})
	require.NoError(t, err)
	p2 := journal.Query{All: true, Partition: "p2"}
	got := drain(t, s.mem.Read(s.ctx, p2, journal.ReadOptions{}))
	require.Equal(t, []uuid.UUID{late.ID}, ids(got))
	got = drain(t, s.mem.Read(s.ctx, p2, journal.ReadOptions{Backwards: true}))
	require.Equal(t, []uuid.UUID{late.ID}, ids(got))
	for r, err := range s.mem.Subscribe(s.ctx, p2, journal.Position{}) {
		require.NoError(t, err)
		require.Equal(t, late.ID, r.ID)
		break
	}
}

func TestMemoryLookupsAndSummaries(t *testing.T) {
	t.Parallel()
	s := setup(t)
	mk := func(typ, corr string, tags ...journal.Tag) journal.Event {
		e := ev(typ, tags...)
		e.Metadata.CorrelationID = corr
		return e
	}
	t0 := s.clock.Now().Truncate(time.Microsecond)
	r1, err := s.mem.Append(s.ctx, []journal.Event{mk("Opened", "c1", "account:1"), mk("Opened", "c2", "account:2")}, journal.AppendOptions{})
	require.NoError(t, err)
	s.clock.Advance(time.Minute)
	r2, err := s.mem.Append(s.ctx, []journal.Event{mk("Deposited", "c1", "account:1", "branch:9")}, journal.AppendOptions{})
	require.NoError(t, err)
	s.clock.Advance(time.Minute)
	_, err = s.mem.Append(s.ctx, []journal.Event{mk("Closed", "", "account:1")}, journal.AppendOptions{})
	require.NoError(t, err)

	got := drain(t, s.mem.ReadByCorrelation(s.ctx, "c1"))
	require.Equal(t, []uuid.UUID{r1.Records[0].ID, r2.Records[0].ID}, ids(got))
	require.Empty(t, drain(t, s.mem.ReadByCorrelation(s.ctx, "nope")))

	got = drain(t, s.mem.ReadTypes(s.ctx, journal.TypeQuery{Types: []string{"Deposited", "Opened", "Closed"}, From: t0, To: t0.Add(2 * time.Minute)}))
	require.Equal(t, []string{"Opened", "Opened", "Deposited"}, types(got))
	got = drain(t, s.mem.ReadTypes(s.ctx, journal.TypeQuery{Types: []string{"Opened", "Deposited"}, From: t0.Add(time.Second), To: t0.Add(time.Hour)}))
	require.Equal(t, []string{"Deposited"}, types(got))
	_, err = drainErr(s.mem.ReadTypes(s.ctx, journal.TypeQuery{From: t0, To: t0.Add(time.Hour)}))
	require.ErrorIs(t, err, journal.ErrInvalidQuery)

	_, err = s.mem.ReadEvent(s.ctx, uuid.New())
	require.ErrorIs(t, err, journal.ErrNotFound)

	sum, err := s.mem.TagSummary(s.ctx, journal.StreamID{Tag: "account:1"})
	require.NoError(t, err)
	require.Equal(t, uint64(3), sum.Version)
	require.Equal(t, r1.Records[0].Position, sum.FirstPosition)
	require.Equal(t, journal.Position{Commit: 3, Seq: 4}, sum.LastPosition)
	require.Equal(t, journal.Stream("account:1"), sum.Stream)
	empty, err := s.mem.TagSummary(s.ctx, journal.Stream("account:404"))
	require.NoError(t, err)
	require.Equal(t, journal.TagSummary{Stream: journal.Stream("account:404")}, empty)

	groups, err := s.mem.TagsOfGroup(s.ctx, "", "account")
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Equal(t, journal.Tag("account:1"), groups[0].Stream.Tag)
	require.Equal(t, journal.Tag("account:2"), groups[1].Stream.Tag)
	require.Equal(t, uint64(1), groups[1].Version)

	ts, err := s.mem.TypeSummaries(s.ctx)
	require.NoError(t, err)
	at := func(d time.Duration) time.Time { return t0.Add(d).UTC() }
	require.Equal(t, []journal.TypeSummary{
		{Type: "Closed", Count: 1, FirstPosition: journal.Position{Commit: 3, Seq: 4}, LastPosition: journal.Position{Commit: 3, Seq: 4}, FirstRecordedAt: at(2 * time.Minute), LastRecordedAt: at(2 * time.Minute)},
		{Type: "Deposited", Count: 1, FirstPosition: journal.Position{Commit: 2, Seq: 3}, LastPosition: journal.Position{Commit: 2, Seq: 3}, FirstRecordedAt: at(time.Minute), LastRecordedAt: at(time.Minute)},
		{Type: "Opened", Count: 2, FirstPosition: journal.Position{Commit: 1, Seq: 1}, LastPosition: journal.Position{Commit: 1, Seq: 2}, FirstRecordedAt: at(0), LastRecordedAt: at(0)},
	}, ts)

	n, err := s.mem.CountAfter(s.ctx, r1.Last())
	require.NoError(t, err)
	require.Equal(t, uint64(2), n)
}

func TestMemoryTamperIsDetected(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var last journal.AppendResult
	for range 3 {
		var err error
		last, err = s.mem.Append(s.ctx, []journal.Event{ev("A", "x:1")}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	recs := drain(t, s.mem.ReadStream(s.ctx, journal.Stream("x:1"), 1, 0))
	require.NoError(t, memory.TamperMemory(s.mem, recs[1].ID))
	got, err := s.mem.ReadEvent(s.ctx, recs[1].ID)
	require.NoError(t, err)
	require.True(t, json.Valid(got.Data))
	require.NotEqual(t, recs[1].Data, got.Data)

	n, err := journal.VerifyStream(s.ctx, s.mem, journal.Stream("x:1"))
	require.Equal(t, uint64(1), n)
	var ce *journal.ChainError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(2), ce.Version)
	require.Equal(t, recs[1].Position, ce.Position)
	require.NotEqual(t, last.Last(), ce.Position)
}

func TestMemoryConcurrentWritersOnOneStream(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const writers, rounds = 8, 25
	var wg sync.WaitGroup
	wins := make([]int, writers)
	for w := range writers {
		wg.Go(func() {
			for range rounds {
				for {
					sum, err := s.mem.TagSummary(s.ctx, journal.Stream("hot"))
					if err != nil {
						t.Error(err)
						return
					}
					_, err = s.mem.Append(s.ctx, []journal.Event{ev("Inc", "hot", journal.NewTag("w", fmt.Sprint(w)))},
						journal.AppendOptions{Expect: map[journal.Tag]uint64{"hot": sum.Version}})
					if err == nil {
						wins[w]++
						break
					}
					if !errorsIsVersionMismatch(err) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	// A concurrent reader must see a consistent, gap-free stream at any time.
	wg.Go(func() {
		for range 20 {
			var v uint64
			for r, err := range s.mem.ReadStream(s.ctx, journal.Stream("hot"), 1, 0) {
				if err != nil {
					t.Error(err)
					return
				}
				v++
				if r.Version("hot") != v {
					t.Errorf("gap: want version %d, got %d", v, r.Version("hot"))
					return
				}
			}
		}
	})
	wg.Wait()
	total := 0
	for _, n := range wins {
		require.Equal(t, rounds, n)
		total += n
	}
	n, err := journal.VerifyStream(s.ctx, s.mem, journal.Stream("hot"))
	require.NoError(t, err)
	require.Equal(t, uint64(total), n)
}

func errorsIsVersionMismatch(err error) bool {
	_, ok := err.(*journal.VersionMismatchError)
	return ok
}

func TestMemorySubscribeCatchUpThenLive(t *testing.T) {
	t.Parallel()
	s := setup(t)
	q := journal.TagQuery("sub")
	pre, err := s.mem.Append(s.ctx, []journal.Event{ev("A", "sub"), ev("Other", "nosub"), ev("B", "sub")}, journal.AppendOptions{})
	require.NoError(t, err)

	const live = 300
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	received := make(chan journal.Record, 16)
	subErr := make(chan error, 1)
	go func() {
		defer close(received)
		for r, err := range s.mem.Subscribe(ctx, q, pre.Records[0].Position) {
			if err != nil {
				subErr <- err
				return
			}
			received <- r
		}
	}()

	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := range live / 3 {
				tags := []journal.Tag{"sub"}
				if i%2 == 0 {
					tags = []journal.Tag{"nosub"}
				}
				_, err := s.mem.Append(s.ctx, []journal.Event{ev(fmt.Sprint("W", w), tags...), ev("Z", "sub")}, journal.AppendOptions{})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}

	// Once every writer finished, the subscription must deliver exactly what a read sees.
	wg.Wait()
	want := drain(t, s.mem.Read(s.ctx, q, journal.ReadOptions{From: pre.Records[1].Position}))
	require.Equal(t, 1+live+live/2, len(want))
	var got []journal.Record
	for len(got) < len(want) {
		select {
		case r := <-received:
			got = append(got, r)
		case err := <-subErr:
			t.Fatalf("subscription ended early: %v", err)
		case <-s.ctx.Done():
			t.Fatalf("timed out with %d of %d records", len(got), len(want))
		}
	}
	require.Equal(t, ids(want), ids(got))
	cancel()
	for range received {
	}
	require.ErrorIs(t, <-subErr, context.Canceled)
}

// TestMemorySubscribeHandsOverFromCatchUpToLive appends from inside the
// consumer loop, so each live record's arrival is deterministic.
func TestMemorySubscribeHandsOverFromCatchUpToLive(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, q := range []journal.Query{journal.TagQuery("x"), {All: true}} {
		mem := memory.New()
		defer mem.Close()
		first, err := mem.Append(s.ctx, []journal.Event{ev("A", "x")}, journal.AppendOptions{})
		require.NoError(t, err)
		script := [][]journal.Event{{ev("B", "x")}, {ev("C", "x"), ev("D", "x")}, {ev("E", "x")}}
		want := []string{"A", "B", "C", "D", "E"}
		var got []string
		for r, err := range mem.Subscribe(s.ctx, q, journal.Position{}) {
			require.NoError(t, err)
			got = append(got, r.Type)
			if len(got) == len(want) {
				break
			}
			if r.Type == "A" || r.Type == "B" || r.Type == "D" {
				_, err := mem.Append(s.ctx, script[0], journal.AppendOptions{})
				require.NoError(t, err)
				script = script[1:]
			}
		}
		require.Equal(t, want, got)
		// Resuming after a position skips exactly what came before it.
		var resumed []string
		for r, err := range mem.Subscribe(s.ctx, q, first.Last()) {
			require.NoError(t, err)
			resumed = append(resumed, r.Type)
			if len(resumed) == len(want)-1 {
				break
			}
		}
		require.Equal(t, want[1:], resumed)
	}
}

func TestMemorySubscribeEndsOnBreakAndClose(t *testing.T) {
	t.Parallel()
	s := setup(t)
	_, err := s.mem.Append(s.ctx, []journal.Event{ev("A", "x"), ev("B", "x")}, journal.AppendOptions{})
	require.NoError(t, err)
	n := 0
	for _, err := range s.mem.Subscribe(s.ctx, journal.AllEvents(), journal.Position{}) {
		require.NoError(t, err)
		n++
		if n == 2 {
			break
		}
	}
	require.Equal(t, 2, n)

	ended := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		var last error
		for r, err := range s.mem.Subscribe(s.ctx, journal.AllEvents(), journal.Position{}) {
			if err != nil {
				last = err
				break
			}
			if r.Type == "B" {
				close(started)
			}
		}
		ended <- last
	}()
	<-started
	require.NoError(t, s.mem.Close())
	select {
	case err := <-ended:
		require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	case <-s.ctx.Done():
		t.Fatal("subscription did not end on Close")
	}
}

func TestMemoryClose(t *testing.T) {
	t.Parallel()
	s := setup(t)
	node, err := s.mem.OpenNode(s.ctx, "n1", time.Minute)
	require.NoError(t, err)
	lease, err := s.mem.Acquire(s.ctx, node, journal.Stream("x"), 0)
	require.NoError(t, err)
	res, err := s.mem.Append(s.ctx, []journal.Event{ev("A", "x")}, journal.AppendOptions{})
	require.NoError(t, err)

	require.NoError(t, s.mem.Close())
	require.NoError(t, s.mem.Close())
	ctx := s.ctx
	_, err = s.mem.Append(ctx, []journal.Event{ev("A", "x")}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.Append(ctx, nil, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	for name, seq := range map[string]iter.Seq2[journal.Record, error]{
		"ReadStream":        s.mem.ReadStream(ctx, journal.Stream("x"), 1, 0),
		"Read":              s.mem.Read(ctx, journal.AllEvents(), journal.ReadOptions{}),
		"ReadAll":           s.mem.ReadAll(ctx, journal.Position{}, 0),
		"ReadByCorrelation": s.mem.ReadByCorrelation(ctx, "c"),
		"ReadTypes":         s.mem.ReadTypes(ctx, journal.TypeQuery{Types: []string{"A"}}),
		"Subscribe":         s.mem.Subscribe(ctx, journal.AllEvents(), journal.Position{}),
	} {
		recs, err := drainErr(seq)
		require.Empty(t, recs, name)
		require.ErrorIs(t, err, journal.ErrStoreNotOpen, name)
	}
	_, err = s.mem.ReadEvent(ctx, res.Records[0].ID)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.Head(ctx)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.TagSummary(ctx, journal.Stream("x"))
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.TagsOfGroup(ctx, "", "x")
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.TypeSummaries(ctx)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.CountAfter(ctx, journal.Position{})
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.OpenNode(ctx, "n2", time.Minute)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.RenewNode(ctx, node)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	_, err = s.mem.Acquire(ctx, node, journal.Stream("y"), time.Second)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.ErrorIs(t, s.mem.Release(ctx, lease), journal.ErrStoreNotOpen)
	require.ErrorIs(t, s.mem.CloseNode(ctx, node), journal.ErrStoreNotOpen)
}

func TestMemoryDefaultConfig(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	defer func() { _ = mem.Close() }()
	before := time.Now().UTC().Truncate(time.Microsecond)
	res, err := mem.Append(t.Context(), []journal.Event{ev("A", "misc:1")}, journal.AppendOptions{})
	require.NoError(t, err)
	require.False(t, res.Records[0].RecordedAt.Before(before))
	require.Len(t, res.Records[0].Links, 1, "every event is linked into its tag's chain")

	big := ev("Big", "misc:1")
	big.Data = json.RawMessage(`{"a":"` + strings.Repeat("0", journal.DefaultMaxDataSize) + `"}`)
	_, err = mem.Append(t.Context(), []journal.Event{big}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrInvalidEvent)

	small := memory.NewWithConfig(memory.Config{MaxDataSize: 16})
	defer func() { _ = small.Close() }()
	_, err = small.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "A", Tags: []journal.Tag{"misc:1"}, Data: json.RawMessage(`{"a":"0123456789"}`)}}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrInvalidEvent)
	require.Contains(t, err.Error(), "over the limit of 16 bytes")
}

// The records of one read page share their backing arrays, but each is its
// caller's: writing into one record's data or links, or appending to them,
// changes neither another record of the page nor what a later read gets.
func TestMemoryReadRecordsAreTheCallers(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	tag := journal.Tag("account:1")
	for i := range 3 {
		e := ev("Deposited", tag)
		e.Data = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		_, err := s.mem.Append(ctx, []journal.Event{e}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	recs := drain(t, s.mem.ReadStream(ctx, journal.Stream(tag), 1, 0))
	require.Len(t, recs, 3)
	recs[0].Data[5] = '9'
	recs[0].Data = append(recs[0].Data, " tail"...)
	recs[0].Links[0].Version = 99
	recs[0].Links = append(recs[0].Links, journal.StreamLink{Tag: "x:1"})
	recs[0].Tags = append(recs[0].Tags, "x:1")
	require.JSONEq(t, `{"n":1}`, string(recs[1].Data))
	require.Equal(t, uint64(2), recs[1].Links[0].Version)
	require.Len(t, recs[1].Links, 1)
	require.Equal(t, []journal.Tag{tag}, recs[1].Tags)
	again := drain(t, s.mem.ReadStream(ctx, journal.Stream(tag), 1, 0))
	require.JSONEq(t, `{"n":0}`, string(again[0].Data))
	require.Equal(t, uint64(1), again[0].Links[0].Version)
	require.Equal(t, []journal.Tag{tag}, again[0].Tags)
}
