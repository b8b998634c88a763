package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// countingStore counts the key store calls that reach it.
type countingStore struct {
	erasure.KeyStore
	dataKeys, binds int
}

func (c *countingStore) DataKey(ctx context.Context, s string) (erasure.DataKey, error) {
	c.dataKeys++
	return c.KeyStore.DataKey(ctx, s)
}

func (c *countingStore) BindStream(ctx context.Context, s string, st journal.StreamID) error {
	c.binds++
	return c.KeyStore.BindStream(ctx, s, st)
}

func TestKeyringIsBoundedAndForgets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &countingStore{KeyStore: erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})}
	k := newKeyring(store, 3)
	for i := range 10 {
		_, err := k.dataKey(ctx, fmt.Sprintf("s-%d", i))
		require.NoError(t, err)
		require.NoError(t, k.bind(ctx, fmt.Sprintf("s-%d", i), journal.Stream("a:1")))
	}
	require.LessOrEqual(t, len(k.keys), 3)
	require.LessOrEqual(t, len(k.bound), 3)
	require.Equal(t, 10, store.dataKeys)

	// Cached: no store call.
	_, err := k.dataKey(ctx, "s-9")
	require.NoError(t, err)
	require.NoError(t, k.bind(ctx, "s-9", journal.Stream("a:1")))
	require.Equal(t, 10, store.dataKeys)
	require.Equal(t, 10, store.binds)

	// An erasure seen on the feed drops the cached key at once.
	k.forget(erasure.Erasure{Subject: "s-9", By: "op"})
	_, err = k.dataKey(ctx, "s-9")
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	require.Equal(t, 10, store.dataKeys, "the erasure is cached too")
	l, err := k.lookup(ctx, []string{"s-9"})
	require.NoError(t, err)
	require.Contains(t, l.Erased, "s-9")
	require.NotContains(t, l.Keys, "s-9")
}

// slowStore holds DataKey until release is closed, after entered.
type slowStore struct {
	erasure.KeyStore
	entered, release chan struct{}
}

func (s *slowStore) DataKey(ctx context.Context, sub string) (erasure.DataKey, error) {
	k, err := s.KeyStore.DataKey(ctx, sub)
	close(s.entered)
	<-s.release
	return k, err
}

// A key read from the store while its subject's erasure reaches the
// runtime (forget) is not cached after it; a failed poll (clearKeys)
// empties the cache.
func TestKeyringForgetWinsOverAConcurrentRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &slowStore{KeyStore: erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{}), entered: make(chan struct{}), release: make(chan struct{})}
	k := newKeyring(store, 10)
	done := make(chan error)
	go func() {
		_, err := k.dataKey(ctx, "s-1")
		done <- err
	}()
	<-store.entered // the key is read, not yet cached
	_, err := store.KeyStore.BeginErasure(ctx, "s-1", "op")
	require.NoError(t, err)
	k.forget(erasure.Erasure{Subject: "s-1", By: "op"})
	close(store.release)
	require.NoError(t, <-done)
	k.mu.RLock()
	_, cached := k.keys["s-1"]
	k.mu.RUnlock()
	require.False(t, cached, "a key read before the erasure must not be cached after its forget")

	other := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	k = newKeyring(other, 10)
	_, err = k.lookup(ctx, []string{"s-2"})
	require.NoError(t, err)
	_, err = k.dataKey(ctx, "s-2")
	require.NoError(t, err)
	require.Len(t, k.keys, 1)
	k.clearKeys()
	require.Empty(t, k.keys)
}
