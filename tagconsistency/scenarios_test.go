package tagconsistency_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// run feeds jobs to workers goroutines and waits for them.
func run(workers, jobs int, f func(worker, job int)) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				j := int(next.Add(1)) - 1
				if j >= jobs {
					return
				}
				f(w, j)
			}
		})
	}
	wg.Wait()
}

func TestCourseEnrolment(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		e := setup(t, b)
		ctx := context.Background()
		const courses, seats, students = 5, 10, 200
		for c := range courses {
			_, err := e.owners.Do(ctx, journal.Stream(courseTag(fmt.Sprint(c))), func(*lockStream) ([]journal.Event, error) {
				return []journal.Event{defineCourseEvent(fmt.Sprint(c), seats)}, nil
			})
			require.NoError(t, err)
		}
		// Every student tries every course, in a shuffled order.
		attempts := rand.Perm(students * courses)
		var ok, full atomic.Int64
		var unexpected sync.Map
		run(32, len(attempts), func(_, i int) {
			a := attempts[i]
			student, course := fmt.Sprint(a/courses), fmt.Sprint(a%courses)
			res, err := tagconsistency.Execute(ctx, e.x, enrol(student, course), tagconsistency.Options{})
			switch {
			case err == nil && len(res.Records) == 1:
				ok.Add(1)
			case errors.Is(err, errCourseFull):
				full.Add(1)
			default:
				unexpected.Store(a, fmt.Sprintf("records %d, error %v", len(res.Records), err))
			}
		})
		unexpected.Range(func(k, v any) bool {
			t.Errorf("attempt %v: %v", k, v)
			return true
		})
		require.EqualValues(t, courses*seats, ok.Load())
		require.EqualValues(t, students*courses-courses*seats, full.Load())
		require.Zero(t, e.counter(t, "scribe.dcb.conflicts", ""))
		// No retries: exactly one execution per attempt.
		require.EqualValues(t, students*courses, e.counter(t, "scribe.dcb.commands", ""))
		for c := range courses {
			recs := readAll(t, e.j, journal.Query{Items: []journal.QueryItem{{Types: []string{"StudentEnrolled"}, Tags: []journal.Tag{courseTag(fmt.Sprint(c))}}}})
			require.Len(t, recs, seats, "course %d", c)
			readStream(t, e.j, courseTag(fmt.Sprint(c)))
		}
	})
}

func TestUniqueUsername(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		e := setup(t, b)
		ctx := context.Background()
		const users, names = 16, 50
		var ok, taken atomic.Int64
		var wg sync.WaitGroup
		for u := range users {
			wg.Go(func() {
				for _, n := range rand.Perm(names) {
					_, err := tagconsistency.Execute(ctx, e.x, claimUsername(fmt.Sprint("u", u), fmt.Sprint("name", n)), tagconsistency.Options{})
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, errNameTaken):
						taken.Add(1)
					default:
						t.Errorf("user %d name %d: %v", u, n, err)
					}
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, names, ok.Load())
		require.EqualValues(t, users*names-names, taken.Load())
		claimed := map[string]string{}
		for _, r := range readAll(t, e.j, journal.Query{Items: []journal.QueryItem{{Types: []string{"UsernameClaimed"}}}}) {
			var c usernameClaimed
			mustUnmarshal(r.Data, &c)
			require.NotContains(t, claimed, c.Name, "name claimed twice")
			claimed[c.Name] = c.User
		}
		require.Len(t, claimed, names)
		require.Zero(t, e.counter(t, "scribe.dcb.conflicts", ""))
	})
}

func TestTransfers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		e := setup(t, b)
		ctx := context.Background()
		const accounts, initial, transfers = 10, 1000, 4000
		for a := range accounts {
			require.NoError(t, e.deposit(ctx, accountTag(a), initial))
		}
		var moved, poor, deposited, withdrawn, refused atomic.Int64
		run(32, transfers, func(_, i int) {
			from := rand.IntN(accounts)
			to := (from + 1 + rand.IntN(accounts-1)) % accounts
			_, err := tagconsistency.Execute(ctx, e.x, transfer(accountTag(from), accountTag(to), 1+rand.Int64N(300)), tagconsistency.Options{})
			switch {
			case err == nil:
				moved.Add(1)
			case errors.Is(err, errInsufficient):
				poor.Add(1)
			default:
				t.Errorf("transfer %d: %v", i, err)
			}
			// Every fourth job also runs an aggregate command on one of the tags.
			if i%4 == 0 {
				acc, amount := accountTag(rand.IntN(accounts)), 1+rand.Int64N(200)
				if i%8 == 0 {
					require.NoError(t, e.deposit(ctx, acc, amount))
					deposited.Add(amount)
				} else if err := e.withdraw(ctx, acc, amount); err == nil {
					withdrawn.Add(amount)
				} else {
					require.ErrorIs(t, err, errInsufficient)
					refused.Add(1)
				}
			}
		})
		require.EqualValues(t, transfers, moved.Load()+poor.Load())
		require.Positive(t, moved.Load())
		require.Zero(t, e.counter(t, "scribe.dcb.conflicts", ""))
		t.Logf("%d transfers moved, %d refused; deposited %d, withdrew %d (%d refused)", moved.Load(), poor.Load(), deposited.Load(), withdrawn.Load(), refused.Load())

		var total int64
		for a := range accounts {
			tag := accountTag(a)
			recs := readStream(t, e.j, tag)
			// No prefix of an account's history is negative.
			bal, opened := map[journal.Tag]int64{}, map[journal.Tag]bool{}
			for _, r := range recs {
				applyMoney(bal, opened, r)
				require.GreaterOrEqual(t, bal[tag], int64(0), "%s negative at version %d", tag, r.Version(tag))
			}
			total += bal[tag]
			// The owner's records are the journal's.
			owned := e.owners.stream(journal.Stream(tag))
			require.Equal(t, len(recs), len(owned.records))
			// The executor's cached fold equals the fold of the journal.
			other := accountTag((a + 1) % accounts)
			var seen transferState
			probe := transfer(tag, other, 0)
			probe.Decide = func(s transferState) ([]journal.Event, error) {
				seen = transferState{bal: map[journal.Tag]int64{tag: s.bal[tag], other: s.bal[other]}}
				return nil, nil
			}
			_, err := tagconsistency.Execute(ctx, e.x, probe, tagconsistency.Options{})
			require.NoError(t, err)
			require.Equal(t, bal[tag], seen.bal[tag], "%s: cached fold differs from the journal", tag)
		}
		require.Equal(t, int64(accounts*initial)+deposited.Load()-withdrawn.Load(), total, "money not conserved")
	})
}

func TestOppositeTransfersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		e := setup(t, b)
		ctx := context.Background()
		const accounts, pairs = 10, 2000
		for a := range accounts {
			require.NoError(t, e.deposit(ctx, accountTag(a), 1_000_000))
		}
		var done atomic.Int64
		run(16, pairs, func(_, i int) {
			a := rand.IntN(accounts)
			b := (a + 1 + rand.IntN(accounts-1)) % accounts
			var wg sync.WaitGroup
			for _, d := range [][2]int{{a, b}, {b, a}} {
				wg.Go(func() {
					_, err := tagconsistency.Execute(ctx, e.x, transfer(accountTag(d[0]), accountTag(d[1]), 1), tagconsistency.Options{})
					if err != nil {
						t.Errorf("pair %d %v: %v", i, d, err)
						return
					}
					done.Add(1)
				})
			}
			wg.Wait()
		})
		require.EqualValues(t, 2*pairs, done.Load())
		var total int64
		for a := range accounts {
			total += balanceOf(accountTag(a), readStream(t, e.j, accountTag(a)))
		}
		require.EqualValues(t, accounts*1_000_000, total)
	})
}

func TestAppendBehindTheOwnersBackIsAConflict(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		e := setup(t, b)
		ctx := context.Background()
		a, c := accountTag(1), accountTag(2)
		require.NoError(t, e.deposit(ctx, a, 100))
		require.NoError(t, e.deposit(ctx, c, 100))
		_, err := tagconsistency.Execute(ctx, e.x, transfer(a, c, 10), tagconsistency.Options{})
		require.NoError(t, err)

		// Someone appends to account 1 without its owner.
		bypass := depositEvent(a, 500)
		bypass.ID = journal.NewEventID()
		_, err = e.j.Append(ctx, []journal.Event{bypass}, journal.AppendOptions{})
		require.NoError(t, err)

		_, err = tagconsistency.Execute(ctx, e.x, transfer(a, c, 20), tagconsistency.Options{})
		require.ErrorIs(t, err, tagconsistency.ErrConflict)
		require.True(t, errors.Is(err, journal.ErrAppendConditionFailed) || errors.Is(err, journal.ErrVersionMismatch), "%v", err)
		var ce *tagconsistency.ConflictError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, []journal.StreamID{journal.Stream(a), journal.Stream(c)}, ce.Streams)
		require.Contains(t, err.Error(), "account:1")
		require.EqualValues(t, 1, e.counter(t, "scribe.dcb.conflicts", ""))
		require.EqualValues(t, 1, e.counter(t, "scribe.dcb.commands", "conflict"))
		require.Len(t, readStream(t, e.j, a), 3, "the conflicting command wrote nothing")

		// The owner reloaded: the whole true balance (100 - 10 + 500) can move.
		_, err = tagconsistency.Execute(ctx, e.x, transfer(a, c, 590), tagconsistency.Options{})
		require.NoError(t, err)
		require.GreaterOrEqual(t, e.owners.reloads.Load(), int64(1))
		require.Zero(t, balanceOf(a, readStream(t, e.j, a)))
		require.EqualValues(t, 700, balanceOf(c, readStream(t, e.j, c)))
		// And the aggregate path on the same tag agrees.
		require.ErrorIs(t, e.withdraw(ctx, a, 1), errInsufficient)
		require.NoError(t, e.withdraw(ctx, c, 700))
	})
}
