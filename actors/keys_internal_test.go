package actors

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestAppendCost: the estimate needs a few samples; a line is fitted when
// batch sizes vary; with one size only, the mean duration is charged whatever
// the size, so one slow append does not make large batches look hopeless.
func TestAppendCost(t *testing.T) {
	t.Parallel()
	var c appendCost
	_, known := c.estimate(1)
	require.False(t, known)
	for range minCostSamples {
		c.observe(5*time.Second, 1) // a held append
	}
	e1, known := c.estimate(1)
	require.True(t, known)
	e1000, _ := c.estimate(1000)
	require.Equal(t, e1, e1000, "no linear extrapolation from one batch size")

	var line appendCost
	for i := range 50 {
		n := 1 + (i%10)*100
		line.observe(time.Millisecond+time.Duration(n)*10*time.Microsecond, n)
	}
	small, _ := line.estimate(1)
	large, _ := line.estimate(1000)
	require.InDelta(t, float64(shedFactor*float64(time.Millisecond+10*time.Microsecond)), float64(small), float64(200*time.Microsecond))
	require.InDelta(t, float64(shedFactor*float64(time.Millisecond+10000*time.Microsecond)), float64(large), float64(time.Millisecond))
}
