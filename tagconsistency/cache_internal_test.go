package tagconsistency

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// TestCachesDropAMovedPartition: after a partition moves its positions are
// another database's, so both caches forget exactly that partition's entries.
func TestCachesDropAMovedPartition(t *testing.T) {
	q := func(p string) journal.Query {
		return journal.Query{Partition: p, Items: []journal.QueryItem{{Tags: []journal.Tag{"account:1"}}}}
	}
	c := newFoldCache(8)
	for _, p := range []string{"east", "eastern", "default"} {
		c.put(foldEntry{key: foldKey("Transfer", q(p))})
	}
	require.Equal(t, "east", keyPartition(foldKey("Transfer", q("east"))))
	c.dropPartition("east")
	_, ok := c.take(foldKey("Transfer", q("east")))
	require.False(t, ok)
	for _, p := range []string{"eastern", "default"} {
		_, ok := c.take(foldKey("Transfer", q(p)))
		require.True(t, ok, "partition %s kept", p)
	}

	tails := newTailCache(true)
	east := journal.StreamID{Partition: "east", Tag: "account:1"}
	west := journal.StreamID{Partition: "default", Tag: "account:1"}
	rec := func(s journal.StreamID) journal.Record {
		return journal.Record{Event: journal.Event{Tags: []journal.Tag{s.Tag}}, Links: []journal.StreamLink{{Tag: s.Tag, Version: 1}}}
	}
	tails.add(east, []journal.Record{rec(east)})
	tails.add(west, []journal.Record{rec(west)})
	tails.dropPartition("east")
	_, ok = tails.get(east, 0, 1)
	require.False(t, ok)
	_, ok = tails.get(west, 0, 1)
	require.True(t, ok)
}
