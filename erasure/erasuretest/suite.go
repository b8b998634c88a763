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

func testErase(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	_, err := ks.DataKey(ctx, "gone")
	require.NoError(t, err)
	first, err := ks.Erase(ctx, "gone", "operator-1")
	require.NoError(t, err)
	require.False(t, first.Repeat)
	require.Equal(t, "gone", first.Subject)
	require.Equal(t, "operator-1", first.By)
	require.False(t, first.At.IsZero())

	again, err := ks.Erase(ctx, "gone", "operator-2")
	require.NoError(t, err)
	require.True(t, again.Repeat)
	require.Equal(t, "operator-1", again.By, "a repeat must report the original erasure")
	require.True(t, first.At.Equal(again.At))

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
}

func testEraseUnknown(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	e, err := ks.Erase(ctx, "never-seen", "op")
	require.NoError(t, err)
	require.False(t, e.Repeat)
	_, err = ks.DataKey(ctx, "never-seen")
	require.ErrorIs(t, err, erasure.ErrSubjectErased, "an erased subject must stay erased even if it had no key")
}

func testLookup(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	a, err := ks.DataKey(ctx, "a")
	require.NoError(t, err)
	_, err = ks.DataKey(ctx, "b")
	require.NoError(t, err)
	_, err = ks.Erase(ctx, "b", "op")
	require.NoError(t, err)
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
	_, err := ks.Erase(ctx, "sub-3", "op")
	require.NoError(t, err)
	all, err := ks.Subjects(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, all, 5)
	for i, s := range all {
		require.Equal(t, fmt.Sprintf("sub-%d", i), s.ID)
		require.False(t, s.CreatedAt.IsZero())
		require.Equal(t, i == 3, s.Erased)
		if s.Erased {
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
	_, err = ks.Erase(ctx, "c-1", "op")
	require.NoError(t, err)
	got, err = ks.Streams(ctx, "c-1")
	require.NoError(t, err)
	require.Len(t, got, 2, "an erasure keeps the bindings: every member must still find the streams to drop")
}

func testInvalid(t *testing.T, ks erasure.KeyStore) {
	ctx := context.Background()
	_, err := ks.DataKey(ctx, "")
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	_, err = ks.Erase(ctx, "x", "")
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	long := make([]byte, erasure.MaxSubjectLength+1)
	for i := range long {
		long[i] = 'a'
	}
	_, err = ks.Erase(ctx, string(long), "op")
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	require.ErrorIs(t, ks.BindStream(ctx, "", journal.StreamID{Tag: "a:1"}), erasure.ErrInvalidArgument)
}
