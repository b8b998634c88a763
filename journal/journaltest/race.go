package journaltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func raceCases() []testCase {
	return []testCase{
		{"WritersRaceOnOneStream", testWritersRaceOnOneStream},
		{"WritersRaceOnOneTagSet", testWritersRaceOnOneTagSet},
		{"CapacityInvariantUnderConditions", testCapacityInvariant},
		{"CatchUpReadersNeverSkipOrRepeat", testCatchUpReadersNeverSkip},
		{"LowerPositionCommitsLate", testLowerPositionCommitsLate},
	}
}

// requireChained fails unless the stream's records have versions 1..n and
// each link's PrevHash is the previous link's Hash.
func requireChained(t *testing.T, recs []journal.Record, tag journal.Tag) {
	t.Helper()
	require.Equal(t, oneTo(len(recs)), versions(recs, tag), "stream %s versions are gap-free", tag)
	var prev journal.Hash
	for i, r := range recs {
		var link *journal.StreamLink
		for k := range r.Links {
			if r.Links[k].Tag == tag {
				link = &r.Links[k]
			}
		}
		require.NotNil(t, link, "record %s has a link for %s", r.ID, tag)
		require.Equal(t, prev, link.PrevHash, "stream %s version %d links to version %d", tag, i+1, i)
		require.NotEqual(t, journal.Hash{}, link.Hash)
		prev = link.Hash
	}
}

func testWritersRaceOnOneStream(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const (
		writers = 32
		rounds  = 8
		tag     = journal.Tag("hot:1")
	)
	for round := range uint64(rounds) {
		start := make(chan struct{})
		errs := make([]error, writers)
		results := make([]journal.AppendResult, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				results[w], errs[w] = j.Append(ctx, []journal.Event{newEvent("Raced", tag)},
					journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: round}})
			})
		}
		close(start)
		wg.Wait()

		winners := 0
		for w, err := range errs {
			if err == nil {
				winners++
				require.Equal(t, round+1, results[w].Records[0].Version(tag), "the winner takes the next version")
				continue
			}
			require.ErrorIs(t, err, journal.ErrVersionMismatch, "round %d writer %d: a loser fails with ErrVersionMismatch", round, w)
			var vm *journal.VersionMismatchError
			if errors.As(err, &vm) {
				require.Equal(t, round, vm.Expected)
			}
		}
		require.Equal(t, 1, winners, "round %d: exactly one of %d writers expecting version %d wins", round, writers, round)
	}
	recs := collect(t, j.ReadStream(ctx, journal.Stream(tag), 1, 0))
	require.Len(t, recs, rounds)
	requireChained(t, recs, tag)
	require.Equal(t, uint64(rounds), count(t, ctx, j), "losers wrote nothing")
}

func testWritersRaceOnOneTagSet(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const (
		writers   = 12
		perWriter = 4
		a         = journal.Tag("seat:a")
		b         = journal.Tag("seat:b")
	)
	// Even writers append {a, b} expecting both versions; odd ones append {a}
	// expecting a's. Each reads the versions, appends, and retries on a
	// version mismatch until it has appended perWriter events.
	errs := make([]error, writers)
	var mu sync.Mutex
	var won []journal.Record
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			tags := []journal.Tag{a}
			if w%2 == 0 {
				tags = []journal.Tag{a, b}
			}
			for done := 0; done < perWriter; {
				expect := map[journal.Tag]uint64{}
				for _, tag := range tags {
					sum, err := j.TagSummary(ctx, journal.Stream(tag))
					if err != nil {
						errs[w] = err
						return
					}
					expect[tag] = sum.Version
				}
				res, err := j.Append(ctx, []journal.Event{newEvent("Taken", tags...)}, journal.AppendOptions{Expect: expect})
				switch {
				case err == nil:
					for _, tag := range tags {
						if got := res.Records[0].Version(tag); got != expect[tag]+1 {
							errs[w] = fmt.Errorf("stream %s: expected version %d, the append got version %d", tag, expect[tag], got)
							return
						}
					}
					mu.Lock()
					won = append(won, res.Records[0])
					mu.Unlock()
					done++
				case errors.Is(err, journal.ErrVersionMismatch):
				default:
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		require.NoError(t, err, "writer %d", w)
	}
	require.Len(t, won, writers*perWriter)

	streamA := collect(t, j.ReadStream(ctx, journal.Stream(a), 1, 0))
	streamB := collect(t, j.ReadStream(ctx, journal.Stream(b), 1, 0))
	require.Len(t, streamA, writers*perWriter)
	require.Len(t, streamB, writers/2*perWriter)
	requireChained(t, streamA, a)
	requireChained(t, streamB, b)
	requireAscending(t, streamA)
	requireAscending(t, streamB)
	require.Equal(t, uint64(writers*perWriter), count(t, ctx, j))

	// What each writer was told matches what is stored.
	stored := make(map[uuid.UUID]journal.Record, len(streamA))
	for _, r := range streamA {
		stored[r.ID] = r
	}
	for _, r := range won {
		s, ok := stored[r.ID]
		require.True(t, ok)
		require.Equal(t, r.Position, s.Position)
		require.Equal(t, r.Links, s.Links)
	}
}

func testCapacityInvariant(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const (
		students = 16
		seats    = 10
		course   = journal.Tag("course:c1")
	)
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("CourseDefined", course))
	enrolled := journal.Query{Items: []journal.QueryItem{{Types: []string{"StudentEnrolled"}, Tags: []journal.Tag{course}}}}

	type outcome struct {
		enrolled bool
		retries  int
		err      error
	}
	outcomes := make([]outcome, students)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for s := range students {
		wg.Go(func() {
			<-start
			student := journal.NewTag("student", fmt.Sprint(s))
			for attempt := range 10 * students {
				// Read the decision model: the enrolments so far.
				recs, err := collectErr(j.Read(ctx, enrolled, journal.ReadOptions{}))
				if err != nil {
					outcomes[s] = outcome{err: err}
					return
				}
				if len(recs) >= seats {
					outcomes[s] = outcome{retries: attempt}
					return
				}
				var after journal.Position
				if len(recs) > 0 {
					after = recs[len(recs)-1].Position
				}
				_, err = j.Append(ctx, []journal.Event{newEvent("StudentEnrolled", course, student)}, journal.AppendOptions{
					Condition: &journal.AppendCondition{FailIfEventsMatch: enrolled, After: after},
				})
				switch {
				case err == nil:
					outcomes[s] = outcome{enrolled: true, retries: attempt}
					return
				case errors.Is(err, journal.ErrAppendConditionFailed):
					// Another enrolment landed since the read: decide again.
				default:
					outcomes[s] = outcome{err: err}
					return
				}
			}
			outcomes[s] = outcome{err: errors.New("gave up after too many condition failures")}
		})
	}
	close(start)
	wg.Wait()

	got := 0
	for s, o := range outcomes {
		require.NoError(t, o.err, "student %d", s)
		if o.enrolled {
			got++
		}
	}
	require.Equal(t, seats, got, "exactly %d of %d students enrol", seats, students)
	stored := collect(t, j.Read(ctx, enrolled, journal.ReadOptions{}))
	require.Len(t, stored, seats, "the course holds exactly %d enrolments", seats)
	sum, err := j.TagSummary(ctx, journal.Stream(course))
	require.NoError(t, err)
	require.Equal(t, uint64(seats+1), sum.Version)
}

// readerLog is a concurrent catch-up reader's findings.
type readerLog struct {
	name string
	seen []journal.Record
	err  error
}

// check fails unless the reader saw exactly want (as a set), each once, in
// strictly ascending position order.
func (l *readerLog) check(t *testing.T, want map[uuid.UUID]bool) {
	t.Helper()
	require.NoError(t, l.err, "reader %s", l.name)
	seen := make(map[uuid.UUID]bool, len(l.seen))
	for i, r := range l.seen {
		require.False(t, seen[r.ID], "reader %s saw event %s twice", l.name, r.ID)
		seen[r.ID] = true
		require.True(t, want[r.ID], "reader %s saw event %s that it should not", l.name, r.ID)
		if i > 0 {
			require.True(t, l.seen[i-1].Position.Before(r.Position),
				"reader %s: position %s after %s: never lower than one already yielded", l.name, r.Position, l.seen[i-1].Position)
		}
	}
	require.Len(t, seen, len(want), "reader %s saw every event", l.name)
}

// subscribeUntil reads a subscription until it has yielded n records.
func subscribeUntil(ctx context.Context, j journal.Journal, q journal.Query, n int, log *readerLog) {
	if n == 0 {
		return
	}
	for r, err := range j.Subscribe(ctx, q, journal.Position{}) {
		if err != nil {
			log.err = err
			return
		}
		log.seen = append(log.seen, r)
		if len(log.seen) == n {
			return
		}
	}
	log.err = errEnded
}

// pollUntil polls with read until it has seen n records; read returns the
// records after a position.
func pollUntil(ctx context.Context, n int, log *readerLog, read func(after journal.Position) ([]journal.Record, error)) {
	var last journal.Position
	for len(log.seen) < n {
		recs, err := read(last)
		if err != nil {
			log.err = err
			return
		}
		for _, r := range recs {
			if !r.Position.After(last) {
				log.err = fmt.Errorf("read after %s yielded %s", last, r.Position)
				return
			}
			last = r.Position
			log.seen = append(log.seen, r)
		}
		if len(recs) == 0 {
			select {
			case <-ctx.Done():
				log.err = fmt.Errorf("saw %d of %d events: %w", len(log.seen), n, ctx.Err())
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
}

func testCatchUpReadersNeverSkip(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const (
		writers   = 16
		perWriter = 12
	)
	evenTag := journal.Tag("parity:even")
	// Writer w's k-th append holds 1 + k%3 events; even writers tag theirs.
	total, evens := 0, 0
	for w := range writers {
		for k := range perWriter {
			total += 1 + k%3
			if w%2 == 0 {
				evens += 1 + k%3
			}
		}
	}

	logs := []*readerLog{{name: "subscribe all (early)"}, {name: "subscribe all (late)"}, {name: "subscribe even"}, {name: "ReadAll poll"}, {name: "Read poll"}}
	var readers sync.WaitGroup
	readers.Go(func() { subscribeUntil(ctx, j, journal.AllEvents(), total, logs[0]) })
	readers.Go(func() { subscribeUntil(ctx, j, journal.TagQuery(evenTag), evens, logs[2]) })
	readers.Go(func() {
		pollUntil(ctx, total, logs[3], func(after journal.Position) ([]journal.Record, error) {
			return collectErr(j.ReadAll(ctx, after, 25))
		})
	})
	readers.Go(func() {
		pollUntil(ctx, total, logs[4], func(after journal.Position) ([]journal.Record, error) {
			from := journal.Position{}
			if !after.IsZero() {
				from = justAfter(after)
			}
			return collectErr(j.Read(ctx, journal.AllEvents(), journal.ReadOptions{From: from, Limit: 25}))
		})
	})

	firstWrite := make(chan struct{})
	var once sync.Once
	written := make([][]journal.Record, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for k := range perWriter {
				events := make([]journal.Event, 1+k%3)
				for i := range events {
					if w%2 == 0 {
						events[i] = newEvent("Written", evenTag, journal.NewTag("writer", fmt.Sprint(w)))
					} else {
						events[i] = newEvent("Written", journal.NewTag("writer", fmt.Sprint(w)))
					}
				}
				res, err := j.Append(ctx, events, journal.AppendOptions{})
				if err != nil {
					errs[w] = err
					return
				}
				written[w] = append(written[w], res.Records...)
				once.Do(func() { close(firstWrite) })
			}
		})
	}
	// A subscription that starts while the writers run: its catch-up ends and
	// its live phase begins under concurrent commits.
	select {
	case <-firstWrite:
	case <-ctx.Done():
	}
	readers.Go(func() { subscribeUntil(ctx, j, journal.AllEvents(), total, logs[1]) })
	wg.Wait()
	for w, err := range errs {
		require.NoError(t, err, "writer %d", w)
	}
	readers.Wait()

	all := make(map[uuid.UUID]bool, total)
	even := make(map[uuid.UUID]bool, evens)
	for w, recs := range written {
		requireAscending(t, recs)
		for _, r := range recs {
			all[r.ID] = true
			if w%2 == 0 {
				even[r.ID] = true
			}
		}
	}
	require.Len(t, all, total)
	logs[0].check(t, all)
	logs[1].check(t, all)
	logs[2].check(t, even)
	logs[3].check(t, all)
	logs[4].check(t, all)

	final := collect(t, j.ReadAll(ctx, journal.Position{}, 0))
	require.Equal(t, ids(logs[0].seen), ids(final), "every reader saw the journal's final order")
	require.Equal(t, ids(logs[3].seen), ids(final))
}

func testLowerPositionCommitsLate(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	base := mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Base", "v:1")).Records
	sub := subscribe(t, ctx, j, journal.AllEvents(), journal.Position{})
	require.Equal(t, base[0].ID, sub.next(t).ID)
	var seen []journal.Record
	seen = append(seen, base...)

	if h.HoldCommit == nil {
		t.Log("Harness.HoldCommit is nil: the forced interleaving is skipped")
	} else {
		held := newEvent("Held", "v:2")
		release, err := h.HoldCommit(ctx, []journal.Event{held}, journal.AppendOptions{})
		require.NoError(t, err)
		released := false
		t.Cleanup(func() {
			if !released {
				_, _ = release()
			}
		})

		// Other appends commit while the held one is pending.
		later := []journal.Event{newEvent("Later", "v:3"), newEvent("Later")}
		type result struct {
			recs []journal.Record
			err  error
		}
		done := make(chan result, 1)
		go func() {
			var out []journal.Record
			for _, e := range later {
				res, err := j.Append(ctx, []journal.Event{e}, journal.AppendOptions{})
				if err != nil {
					done <- result{err: err}
					return
				}
				out = append(out, res.Records...)
			}
			done <- result{recs: out}
		}()
		r := waitFor(t, done, deliveryTimeout, "appends that do not wait for the held commit")
		require.NoError(t, r.err)
		laterRecs := r.recs

		// What readers see while the held append is pending.
		duringAll := collect(t, j.ReadAll(ctx, journal.Position{}, 0))
		duringRead := collect(t, j.Read(ctx, journal.AllEvents(), journal.ReadOptions{}))
		require.NotContains(t, ids(duringAll), held.ID, "an uncommitted event is invisible")
		// The pending append holds back only what could commit below it:
		// an event committed before it began stays visible meanwhile.
		require.Contains(t, ids(duringAll), base[0].ID, "ReadAll while an append is pending shows what committed before it began")
		require.Contains(t, ids(duringRead), base[0].ID, "Read while an append is pending shows what committed before it began")

		res, err := release()
		released = true
		require.NoError(t, err, "the held append commits")
		require.Len(t, res.Records, 1)
		heldRec := res.Records[0]
		require.True(t, heldRec.Position.Before(laterRecs[0].Position),
			"HoldCommit must give the held append a lower position than appends committed after it (%s vs %s)", heldRec.Position, laterRecs[0].Position)

		final := collect(t, j.ReadAll(ctx, journal.Position{}, 0))
		require.Equal(t, []uuid.UUID{base[0].ID, held.ID, laterRecs[0].ID, laterRecs[1].ID}, ids(final), "the held event sorts at its (lower) position")
		for name, during := range map[string][]journal.Record{"ReadAll": duringAll, "Read": duringRead} {
			if len(during) == 0 {
				continue
			}
			tail := during[len(during)-1].Position
			shown := make(map[uuid.UUID]bool)
			for _, r := range during {
				shown[r.ID] = true
			}
			for _, r := range final {
				if !shown[r.ID] {
					require.True(t, r.Position.After(tail),
						"%s showed position %s while %s (position %s) was pending: it was back-filled below the observed tail", name, tail, r.ID, r.Position)
				}
			}
		}

		got := sub.take(t, 3)
		require.Equal(t, ids(final[1:]), ids(got), "the subscription yields the held event, then the later ones")
		seen = append(seen, got...)
	}

	// Concurrent appends while the subscription tails: strictly increasing.
	const writers, perWriter = 8, 5
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for range perWriter {
				if _, err := j.Append(ctx, []journal.Event{newEvent("Tail", "v:4")}, journal.AppendOptions{}); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	tail := sub.take(t, writers*perWriter)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	seen = append(seen, tail...)
	requireAscending(t, seen)
	require.Equal(t, ids(collect(t, j.ReadAll(ctx, journal.Position{}, 0))), ids(seen), "the subscription saw every event once, in order")
}
