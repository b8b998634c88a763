package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// TestStressWritersAndTailingReader: 64 concurrent writers append to their own
// streams and to one shared tag while a subscriber and a ReadAll poller tail
// the journal; both see every event exactly once, in ascending order.
func TestStressWritersAndTailingReader(t *testing.T) {
	t.Parallel()
	const (
		writers   = 64
		perWriter = 25
		total     = writers * perWriter
	)
	f := setup(t, func(c *postgres.Config) { c.PollInterval = 100 * time.Millisecond })
	j := f.journal
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	shared := journal.Tag("shared:all")

	type seen struct {
		ids  map[uuid.UUID]int
		last journal.Position
		err  error
	}
	check := func(s *seen, r journal.Record) {
		if s.err != nil {
			return
		}
		if !s.last.Before(r.Position) {
			s.err = fmt.Errorf("position %s after %s: not ascending", r.Position, s.last)
		}
		s.last = r.Position
		s.ids[r.ID]++
	}
	sub := &seen{ids: map[uuid.UUID]int{}}
	poll := &seen{ids: map[uuid.UUID]int{}}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { // subscriber
		defer readers.Done()
		for r, err := range j.Subscribe(ctx, journal.AllEvents(), journal.Position{}) {
			if err != nil {
				sub.err = err
				return
			}
			check(sub, r)
			if len(sub.ids) >= total {
				return
			}
		}
	}()
	go func() { // catch-up poller
		defer readers.Done()
		for len(poll.ids) < total && poll.err == nil && ctx.Err() == nil {
			for r, err := range j.ReadAll(ctx, poll.last, 100) {
				if err != nil {
					poll.err = err
					return
				}
				check(poll, r)
			}
		}
	}()

	var writersWG sync.WaitGroup
	var appended atomic.Int64
	for w := range writers {
		writersWG.Add(1)
		go func() {
			defer writersWG.Done()
			own := journal.NewTag("writer", fmt.Sprint(w))
			for i := range perWriter {
				_, err := j.Append(ctx, []journal.Event{event("Tick", own, shared)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{own: uint64(i)}})
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				appended.Add(1)
			}
		}()
	}
	writersWG.Wait()
	require.EqualValues(t, total, appended.Load())
	readers.Wait()
	for name, s := range map[string]*seen{"subscriber": sub, "ReadAll poller": poll} {
		require.NoError(t, s.err, name)
		require.Len(t, s.ids, total, "%s missed events", name)
		for id, n := range s.ids {
			require.Equal(t, 1, n, "%s saw %s %d times", name, id, n)
		}
	}
	sum, err := j.TagSummary(ctx, journal.Stream(shared))
	require.NoError(t, err)
	require.EqualValues(t, total, sum.Version)
	n, err := journal.VerifyStream(ctx, j, journal.Stream(shared))
	require.NoError(t, err)
	require.EqualValues(t, total, n)
}

// TestConditionCapacityConcurrent: many concurrent deciders each read the
// events matching a query, and append one more with a condition only while
// fewer than capacity exist. Type-only items and Query.All must never let the
// capacity be exceeded.
func TestConditionCapacityConcurrent(t *testing.T) {
	t.Parallel()
	const capacity, contenders = 10, 24
	queries := map[string]journal.Query{
		"type-only item": {Items: []journal.QueryItem{{Types: []string{"SeatBooked"}}}},
		"two type items": {Items: []journal.QueryItem{{Types: []string{"SeatBooked"}}, {Types: []string{"Other"}}}},
		"query all":      journal.AllEvents(),
		"tag item":       {Items: []journal.QueryItem{{Tags: []journal.Tag{"course:1"}, Types: []string{"SeatBooked"}}}},
	}
	for name, q := range queries {
		for _, batched := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/batched=%v", name, batched), func(t *testing.T) {
				t.Parallel()
				f := setup(t, func(c *postgres.Config) { c.Batching.Disabled = !batched })
				j := f.journal
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				var wg sync.WaitGroup
				var booked atomic.Int64
				start := make(chan struct{})
				for c := range contenders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for {
							var n int
							var last journal.Position
							for r, err := range j.Read(ctx, q, journal.ReadOptions{}) {
								if err != nil {
									t.Error(err)
									return
								}
								n++
								last = r.Position
							}
							if n >= capacity {
								return
							}
							// Each booking carries its own student tag only: the
							// condition, not a shared stream, protects capacity.
							e := event("SeatBooked", journal.NewTag("student", fmt.Sprint(c)), "course:1")
							if name != "tag item" {
								e.Tags = []journal.Tag{journal.NewTag("student", fmt.Sprint(c))}
							}
							_, err := j.Append(ctx, []journal.Event{e}, journal.AppendOptions{Condition: &journal.AppendCondition{FailIfEventsMatch: q, After: last}})
							switch {
							case err == nil:
								booked.Add(1)
							case errors.Is(err, journal.ErrAppendConditionFailed):
							default:
								t.Error(err)
								return
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				require.EqualValues(t, capacity, booked.Load(), "exactly capacity bookings succeed")
				cnt, err := j.CountAfter(ctx, journal.Position{})
				require.NoError(t, err)
				require.EqualValues(t, capacity, cnt)
			})
		}
	}
}

// TestBatchMembersFailIndividually: concurrent appends share transactions;
// the ones with a wrong expected version fail alone, the rest are stored.
func TestBatchMembersFailIndividually(t *testing.T) {
	t.Parallel()
	f := setup(t)
	j := f.journal
	ctx := t.Context()
	sharedCommit := false
	for round := 0; round < 20 && !sharedCommit; round++ {
		const n = 32
		var wg sync.WaitGroup
		results := make([]journal.AppendResult, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				tag := journal.NewTag("batch", fmt.Sprintf("%d-%d", round, i))
				expect := uint64(0)
				if i%4 == 0 {
					expect = 7 // wrong: the stream is new
				}
				results[i], errs[i] = j.Append(ctx, []journal.Event{event("E", tag)}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: expect}})
			}()
		}
		close(start)
		wg.Wait()
		commits := map[uint64]int{}
		for i := range n {
			if i%4 == 0 {
				require.ErrorIs(t, errs[i], journal.ErrVersionMismatch, "append %d", i)
				continue
			}
			require.NoError(t, errs[i], "append %d", i)
			commits[results[i].Records[0].Position.Commit]++
			got, err := j.ReadEvent(ctx, results[i].Records[0].ID)
			require.NoError(t, err)
			require.Equal(t, results[i].Records[0].Position, got.Position)
		}
		for _, c := range commits {
			if c > 1 {
				sharedCommit = true
			}
		}
		cnt, err := j.CountAfter(ctx, journal.Position{})
		require.NoError(t, err)
		require.EqualValues(t, (round+1)*n*3/4, cnt, "only the good appends are stored")
	}
	require.True(t, sharedCommit, "concurrent appends were batched into shared transactions")
}

// TestSubscriptionSurvivesLostNotifications: events appended by another
// process (a second Journal) reach a subscriber through NOTIFY; with the
// subscriber's LISTEN connection killed, they still arrive by polling.
func TestSubscriptionSurvivesLostNotifications(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *postgres.Config) { c.PollInterval = 100 * time.Millisecond })
	j := f.journal
	other, err := postgres.NewJournal(f.pool, f.cfg)
	require.NoError(t, err)
	defer other.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan journal.Record, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r, err := range j.Subscribe(ctx, journal.AllEvents(), journal.Position{}) {
			if err != nil {
				return
			}
			got <- r
		}
	}()
	first := event("First", "s:1")
	_, err = other.Append(ctx, []journal.Event{first}, journal.AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, first.ID, (<-got).ID)

	// Terminate the listener's backend (the only session LISTENing on this
	// journal's channel).
	require.Eventually(t, func() bool {
		var n int
		err := f.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND query ILIKE 'LISTEN%' AND query LIKE '%'||$1||'%'`, postgres.NotifyChannel(f.cfg.Schema)).Scan(&n)
		return err == nil && n > 0
	}, 5*time.Second, 20*time.Millisecond)
	second := event("Second", "s:1")
	_, err = other.Append(ctx, []journal.Event{second}, journal.AppendOptions{})
	require.NoError(t, err)
	select {
	case r := <-got:
		require.Equal(t, second.ID, r.ID)
	case <-time.After(5 * time.Second):
		t.Fatal("the subscriber did not receive the event appended while its listener was down")
	}
	cancel()
	<-done
}

// TestConcurrentRetriesOfOneAppend: the same append (same event IDs) sent by
// many callers at once is stored once; every other caller gets the stored
// records marked Duplicate, whether its retry shared a batch with the first
// write or came later.
func TestConcurrentRetriesOfOneAppend(t *testing.T) {
	t.Parallel()
	for _, readFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("readFirst=%v", readFirst), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.journal.SetReadFirst(readFirst)
			concurrentRetries(t, f.journal)
		})
	}
}

func concurrentRetries(t *testing.T, j *postgres.Journal) {
	ctx := t.Context()
	for round := range 10 {
		tag := journal.NewTag("retry", fmt.Sprint(round))
		events := []journal.Event{event("A", tag), event("B", tag, "other:1")}
		if round%2 == 1 {
			// Events of one shared stream only.
			events = []journal.Event{event("A", "other:1"), event("B", "other:1")}
		}
		const callers = 12
		results := make([]journal.AppendResult, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = j.Append(ctx, events, journal.AppendOptions{})
			}()
		}
		close(start)
		wg.Wait()
		firsts := 0
		var want []journal.Position
		for i := range callers {
			require.NoError(t, errs[i])
			if !results[i].Duplicate {
				firsts++
			}
			var got []journal.Position
			for _, r := range results[i].Records {
				got = append(got, r.Position)
			}
			if want == nil {
				want = got
			}
			require.Equal(t, want, got, "every caller sees the same stored records")
		}
		require.Equal(t, 1, firsts, "exactly one caller wrote")
		if round%2 == 0 {
			sum, err := j.TagSummary(ctx, journal.Stream(tag))
			require.NoError(t, err)
			require.EqualValues(t, 2, sum.Version)
		}
	}
}

// TestBatchesAcrossPartitions: concurrent appends to the same tag names in
// several partitions share batches; every partition's streams stay separate
// and gap-free.
func TestBatchesAcrossPartitions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	j := f.journal
	ctx := t.Context()
	partitions := []string{"tenant-a", "tenant-b", "tenant-c", journal.DefaultPartition}
	const perPartition = 30
	var wg sync.WaitGroup
	for _, p := range partitions {
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perPartition / 3 {
					e := event("Tick", "account:shared", journal.NewTag("writer", fmt.Sprint(w)))
					e.Metadata.Partition = p
					if _, err := j.Append(ctx, []journal.Event{e}, journal.AppendOptions{}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, p := range partitions {
		stream := journal.StreamID{Partition: p, Tag: "account:shared"}
		n, err := journal.VerifyStream(ctx, j, stream)
		require.NoError(t, err, p)
		require.EqualValues(t, perPartition, n, p)
		cnt := 0
		for r, err := range j.Read(ctx, journal.Query{Partition: p, All: true}, journal.ReadOptions{}) {
			require.NoError(t, err)
			require.Equal(t, p, r.Partition())
			cnt++
		}
		require.Equal(t, perPartition, cnt, p)
	}
}
