// Package erasuretest is the conformance suite of erasure.KeyStore: every
// implementation (the memory store, the Postgres store) runs all of it.
package erasuretest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// Factory returns a new, empty key store for one test. It registers its own
// cleanup with t.
type Factory func(t *testing.T) erasure.KeyStore

// Run runs the whole suite against stores made by factory.
func Run(t *testing.T, factory Factory) {
	t.Run("DataKeyIsStable", func(t *testing.T) { t.Parallel(); testDataKeyStable(t, factory(t)) })
	t.Run("ConcurrentFirstUseAgrees", func(t *testing.T) { t.Parallel(); testConcurrentFirstUse(t, factory(t)) })
	t.Run("EraseDestroysAndIsIdempotent", func(t *testing.T) { t.Parallel(); testErase(t, factory(t)) })
	t.Run("PendingErasureRefusesTheKey", func(t *testing.T) { t.Parallel(); testPending(t, factory(t)) })
	t.Run("StepsNeedABegunErasure", func(t *testing.T) { t.Parallel(); testStepsNeedBegin(t, factory(t)) })
	t.Run("ErasuresInSequence", func(t *testing.T) { t.Parallel(); testErasuresFeed(t, factory(t)) })
	t.Run("ConcurrentErasuresMissNoneFromTheFeed", func(t *testing.T) { t.Parallel(); testFeedUnderConcurrency(t, factory(t)) })
	t.Run("EraseTwiceAndAgain", func(t *testing.T) { t.Parallel(); testEraseTwice(t, factory(t)) })
	t.Run("EraseUnknownSubject", func(t *testing.T) { t.Parallel(); testEraseUnknown(t, factory(t)) })
	t.Run("Lookup", func(t *testing.T) { t.Parallel(); testLookup(t, factory(t)) })
	t.Run("Subjects", func(t *testing.T) { t.Parallel(); testSubjects(t, factory(t)) })
	t.Run("Streams", func(t *testing.T) { t.Parallel(); testStreams(t, factory(t)) })
	t.Run("InvalidArguments", func(t *testing.T) { t.Parallel(); testInvalid(t, factory(t)) })
}

func testDataKeyStable(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	a, err := ks.DataKey(ctx, "s-1")
	require.NoError(t, err)
	require.True(t, a.Valid())
	b, err := ks.DataKey(ctx, "s-1")
	require.NoError(t, err)
	require.Equal(t, a.Bytes(), b.Bytes())
	c, err := ks.DataKey(ctx, "s-2")
	require.NoError(t, err)
	require.NotEqual(t, a.Bytes(), c.Bytes(), "two subjects share a key")
}

func testConcurrentFirstUse(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	const n = 8
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := ks.DataKey(ctx, "racer")
			keys[i], errs[i] = k.Bytes(), err
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, keys[0], keys[i], "concurrent first uses returned different keys")
	}
}

// eraseAll runs every key-store step of an erasure.
func eraseAll(t *testing.T, ks erasure.KeyStore, subject, by string) erasure.Erasure {
	t.Helper()
	ctx := context.Background()
	e, err := ks.BeginErasure(ctx, subject, by)
	require.NoError(t, err)
	_, err = ks.DestroyKey(ctx, subject)
	require.NoError(t, err)
	done, err := ks.CompleteErasure(ctx, subject)
	require.NoError(t, err)
	require.Equal(t, erasure.ErasureComplete, done.State)
	require.Equal(t, e.Sequence, done.Sequence)
	return e
}

func testErase(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	_, err := ks.DataKey(ctx, "gone")
	require.NoError(t, err)
	first, err := ks.BeginErasure(ctx, "gone", "operator-1")
	require.NoError(t, err)
	require.False(t, first.Repeat)
	require.Equal(t, "gone", first.Subject)
	require.Equal(t, "operator-1", first.By)
	require.Equal(t, erasure.ErasurePending, first.State)
	require.NotZero(t, first.Sequence)
	require.False(t, first.At.IsZero())

	destroyed, err := ks.DestroyKey(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, erasure.ErasureKeyDestroyed, destroyed.State)
	require.Equal(t, "operator-1", destroyed.By)
	require.True(t, first.At.Equal(destroyed.At))
	done, err := ks.CompleteErasure(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, erasure.ErasureComplete, done.State)
	require.Equal(t, first.Sequence, done.Sequence)

	again, err := ks.BeginErasure(ctx, "gone", "operator-2")
	require.NoError(t, err)
	require.True(t, again.Repeat)
	require.Equal(t, "operator-1", again.By, "a repeat must report the original erasure")
	require.True(t, first.At.Equal(again.At))
	require.Equal(t, erasure.ErasureComplete, again.State)
	require.Equal(t, first.Sequence, again.Sequence, "a repeat gets no new sequence number")
	// Later steps again change nothing.
	d2, err := ks.DestroyKey(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, erasure.ErasureComplete, d2.State, "a state never goes back")
	d3, err := ks.CompleteErasure(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, erasure.ErasureComplete, d3.State)

	_, err = ks.DataKey(ctx, "gone")
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	var se *erasure.SubjectErasedError
	require.True(t, errors.As(err, &se))
	require.Equal(t, "gone", se.Erasure.Subject)
	require.Contains(t, err.Error(), "new subject ID")

	l, err := ks.Lookup(ctx, []string{"gone"})
	require.NoError(t, err)
	require.NotContains(t, l.Keys, "gone")
	require.Contains(t, l.Erased, "gone")
	require.Equal(t, "operator-1", l.Erased["gone"].By)
	require.Equal(t, erasure.ErasureComplete, l.Erased["gone"].State)
}

// A begun erasure refuses the key at once, before the key is destroyed:
// no new personal data can be sealed for the subject and no process can
// open its data again, while the erasure shows as pending (never complete).
func testPending(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	_, err := ks.DataKey(ctx, "p-1")
	require.NoError(t, err)
	_, err = ks.BeginErasure(ctx, "p-1", "op")
	require.NoError(t, err)
	_, err = ks.DataKey(ctx, "p-1")
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	l, err := ks.Lookup(ctx, []string{"p-1"})
	require.NoError(t, err)
	require.NotContains(t, l.Keys, "p-1")
	require.Equal(t, erasure.ErasurePending, l.Erased["p-1"].State)
	subs, err := ks.Subjects(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, subs, 1)
	require.Equal(t, erasure.ErasurePending, subs[0].Erasure)
	require.Equal(t, "op", subs[0].ErasedBy)
	pending, err := ks.Erasures(ctx, erasure.ErasureQuery{PendingOnly: true})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "p-1", pending[0].Subject)

	_, err = ks.DestroyKey(ctx, "p-1")
	require.NoError(t, err)
	subs, err = ks.Subjects(ctx, "", 0)
	require.NoError(t, err)
	require.Equal(t, erasure.ErasureKeyDestroyed, subs[0].Erasure, "not complete before CompleteErasure")
	pending, err = ks.Erasures(ctx, erasure.ErasureQuery{PendingOnly: true})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	_, err = ks.CompleteErasure(ctx, "p-1")
	require.NoError(t, err)
	pending, err = ks.Erasures(ctx, erasure.ErasureQuery{PendingOnly: true})
	require.NoError(t, err)
	require.Empty(t, pending)
}

func testStepsNeedBegin(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	key, err := ks.DataKey(ctx, "live")
	require.NoError(t, err)
	_, err = ks.DestroyKey(ctx, "live")
	require.ErrorIs(t, err, erasure.ErrNotErasing)
	_, err = ks.CompleteErasure(ctx, "live")
	require.ErrorIs(t, err, erasure.ErrNotErasing)
	_, err = ks.CompleteErasure(ctx, "nobody")
	require.ErrorIs(t, err, erasure.ErrNotErasing)
	again, err := ks.DataKey(ctx, "live")
	require.NoError(t, err, "a refused step must leave the key")
	require.Equal(t, key.Bytes(), again.Bytes())
	subs, err := ks.Subjects(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, subs, 1, "a refused step on an unknown subject writes nothing")
	require.Equal(t, erasure.NotErased, subs[0].Erasure)
	all, err := ks.Erasures(ctx, erasure.ErasureQuery{})
	require.NoError(t, err)
	require.Empty(t, all)
}

func testErasuresFeed(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	head, err := ks.ErasureHead(ctx)
	require.NoError(t, err)
	require.Zero(t, head, "no erasure yet")
	var seqs []uint64
	for i := range 5 {
		e, err := ks.BeginErasure(ctx, fmt.Sprintf("f-%d", i), "op")
		require.NoError(t, err)
		if len(seqs) > 0 {
			require.Greater(t, e.Sequence, seqs[len(seqs)-1], "sequence numbers grow")
		}
		seqs = append(seqs, e.Sequence)
	}
	eraseAll(t, ks, "f-1", "op")
	all, err := ks.Erasures(ctx, erasure.ErasureQuery{})
	require.NoError(t, err)
	require.Len(t, all, 5)
	for i, e := range all {
		require.Equal(t, fmt.Sprintf("f-%d", i), e.Subject)
		require.Equal(t, seqs[i], e.Sequence)
		require.Equal(t, i == 1, e.State == erasure.ErasureComplete)
	}
	after, err := ks.Erasures(ctx, erasure.ErasureQuery{After: seqs[2], Limit: 1})
	require.NoError(t, err)
	require.Len(t, after, 1)
	require.Equal(t, "f-3", after[0].Subject)
	pending, err := ks.Erasures(ctx, erasure.ErasureQuery{PendingOnly: true})
	require.NoError(t, err)
	require.Len(t, pending, 4)
	none, err := ks.Erasures(ctx, erasure.ErasureQuery{After: seqs[4]})
	require.NoError(t, err)
	require.Empty(t, none)
	head, err = ks.ErasureHead(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, head, seqs[4])
	none, err = ks.Erasures(ctx, erasure.ErasureQuery{After: head})
	require.NoError(t, err)
	require.Empty(t, none)
	e, err := ks.BeginErasure(ctx, "f-late", "op")
	require.NoError(t, err)
	late, err := ks.Erasures(ctx, erasure.ErasureQuery{After: head})
	require.NoError(t, err)
	require.Equal(t, []erasure.Erasure{e}, late, "a follower starting at the head sees what is begun later")
}

// Erasures begun concurrently while a follower reads the feed from its
// cursor: the follower sees every one of them (a sequence number is never
// visible after a greater one was).
func testFeedUnderConcurrency(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				sub := fmt.Sprintf("w%d-%d", w, i)
				if i%2 == 0 {
					if _, err := ks.DataKey(ctx, sub); err != nil {
						errs <- err
						return
					}
				}
				if _, err := ks.BeginErasure(ctx, sub, "op"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	go func() { wg.Wait(); close(stop) }()
	seen := map[string]bool{}
	var cursor uint64
	poll := func() {
		got, err := ks.Erasures(ctx, erasure.ErasureQuery{After: cursor})
		require.NoError(t, err)
		for _, e := range got {
			require.Greater(t, e.Sequence, cursor)
			require.False(t, seen[e.Subject], "subject %s twice", e.Subject)
			seen[e.Subject] = true
			cursor = e.Sequence
		}
	}
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		poll()
	}
	poll()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, seen, writers*each, "the follower missed erasures")
}

// Erase, erase again, erase a second subject: what the first erasure left
// (its row, its sequence) neither blocks nor fakes the later ones.
func testEraseTwice(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	_, err := ks.DataKey(ctx, "t-1")
	require.NoError(t, err)
	a := eraseAll(t, ks, "t-1", "op-1")
	b, err := ks.BeginErasure(ctx, "t-1", "op-2")
	require.NoError(t, err)
	require.True(t, b.Repeat)
	require.Equal(t, a.Sequence, b.Sequence)
	_, err = ks.DataKey(ctx, "t-2")
	require.NoError(t, err)
	c, err := ks.BeginErasure(ctx, "t-2", "op-3")
	require.NoError(t, err)
	require.False(t, c.Repeat)
	require.Equal(t, erasure.ErasurePending, c.State)
	require.Greater(t, c.Sequence, a.Sequence)
	_, err = ks.DataKey(ctx, "t-2")
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	pending, err := ks.Erasures(ctx, erasure.ErasureQuery{PendingOnly: true})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "t-2", pending[0].Subject)
}

func testEraseUnknown(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	e, err := ks.BeginErasure(ctx, "never-seen", "op")
	require.NoError(t, err)
	require.False(t, e.Repeat)
	require.Equal(t, erasure.ErasureKeyDestroyed, e.State, "a subject without a key has none to destroy")
	_, err = ks.DataKey(ctx, "never-seen")
	require.ErrorIs(t, err, erasure.ErrSubjectErased, "an erased subject must stay erased even if it had no key")
}

func testLookup(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	a, err := ks.DataKey(ctx, "a")
	require.NoError(t, err)
	_, err = ks.DataKey(ctx, "b")
	require.NoError(t, err)
	eraseAll(t, ks, "b", "op")
	l, err := ks.Lookup(ctx, []string{"a", "b", "unknown"})
	require.NoError(t, err)
	require.Len(t, l.Keys, 1)
	require.Equal(t, a.Bytes(), l.Keys["a"].Bytes())
	require.Len(t, l.Erased, 1)
	require.Contains(t, l.Erased, "b")
	l, err = ks.Lookup(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, l.Keys)
}

func testSubjects(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	for i := range 5 {
		_, err := ks.DataKey(ctx, fmt.Sprintf("sub-%d", i))
		require.NoError(t, err)
	}
	eraseAll(t, ks, "sub-3", "op")
	_, err := ks.BeginErasure(ctx, "sub-4", "op")
	require.NoError(t, err)
	all, err := ks.Subjects(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, all, 5)
	for i, s := range all {
		require.Equal(t, fmt.Sprintf("sub-%d", i), s.ID)
		require.False(t, s.CreatedAt.IsZero())
		switch i {
		case 3:
			require.Equal(t, erasure.ErasureComplete, s.Erasure)
		case 4:
			require.Equal(t, erasure.ErasurePending, s.Erasure, "a begun erasure is pending, not complete")
		default:
			require.Equal(t, erasure.NotErased, s.Erasure)
		}
		require.Equal(t, s.Erasure.Begun(), s.Erased)
		if s.Erasure.Begun() {
			require.Equal(t, "op", s.ErasedBy)
			require.False(t, s.ErasedAt.IsZero())
		}
	}
	page, err := ks.Subjects(ctx, "sub-1", 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Equal(t, "sub-2", page[0].ID)
	require.Equal(t, "sub-3", page[1].ID)
}

func testStreams(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	a := journal.StreamID{Partition: "p1", Tag: "account:1"}
	b := journal.StreamID{Tag: "customer:c-1"}
	require.NoError(t, ks.BindStream(ctx, "c-1", a))
	require.NoError(t, ks.BindStream(ctx, "c-1", b))
	require.NoError(t, ks.BindStream(ctx, "c-1", a), "binding a pair again must be a no-op")
	require.NoError(t, ks.BindStream(ctx, "c-2", a))
	got, err := ks.Streams(ctx, "c-1")
	require.NoError(t, err)
	require.ElementsMatch(t, []journal.StreamID{a, b.Normalize()}, got)
	subs, err := ks.StreamSubjects(ctx, a)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"c-1", "c-2"}, subs)
	subs, err = ks.StreamSubjects(ctx, journal.StreamID{Partition: "other", Tag: "account:1"})
	require.NoError(t, err)
	require.Empty(t, subs)
	got, err = ks.Streams(ctx, "nobody")
	require.NoError(t, err)
	require.Empty(t, got)
	eraseAll(t, ks, "c-1", "op")
	got, err = ks.Streams(ctx, "c-1")
	require.NoError(t, err)
	require.Len(t, got, 2, "an erasure keeps the bindings: every member must still find the streams to drop")
}

func testInvalid(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	_, err := ks.DataKey(ctx, "")
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	_, err = ks.BeginErasure(ctx, "x", "")
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	long := make([]byte, erasure.MaxSubjectLength+1)
	for i := range long {
		long[i] = 'a'
	}
	_, err = ks.BeginErasure(ctx, string(long), "op")
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	require.ErrorIs(t, ks.BindStream(ctx, "", journal.StreamID{Tag: "a:1"}), erasure.ErrInvalidArgument)
}
