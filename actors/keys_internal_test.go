package actors

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// TestKeyCacheIsBoundedInBytes: the idempotency cache of one stream holds at
// most maxCachedKeyBytes of results and maxCachedKeys keys, evicting the
// oldest first; a miss after an eviction goes to the journal (not complete).
func TestKeyCacheIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	big := json.RawMessage(`{"x":"` + strings.Repeat("a", 200<<10) + `"}`)
	k := &keyCache{complete: true}
	for i := range 20 {
		k.put(fmt.Sprint("big-", i), []journal.Record{{Event: journal.Event{Type: "Big", Data: big}}})
		require.LessOrEqual(t, k.bytes, maxCachedKeyBytes)
	}
	require.False(t, k.complete)
	_, newest := k.get("big-19")
	require.True(t, newest, "the newest key is kept")
	_, oldest := k.get("big-0")
	require.False(t, oldest, "the oldest key was evicted")
	require.Less(t, len(k.order), 6, "about five 200 KB results fit in 1 MiB")

	small := &keyCache{}
	for i := range 3 * maxCachedKeys {
		small.put(fmt.Sprint("k-", i), []journal.Record{{Event: journal.Event{Type: "Small", Data: json.RawMessage(`{}`)}}})
	}
	require.Len(t, small.order, maxCachedKeys)
	require.Len(t, small.m, maxCachedKeys)
	_, ok := small.get(fmt.Sprint("k-", 3*maxCachedKeys-1))
	require.True(t, ok)
}
