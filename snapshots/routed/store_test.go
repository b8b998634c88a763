package routed_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/snapshots/routed"
	"github.com/scribe-es/scribe/snapshots/snapshotstest"
)

// setup is a router over two memory journals, "a" and "b", with the given
// partition map and default member, and a routed store over one memory
// snapshot store per member.
type setup struct {
	router *partitioned.Router
	stores map[string]*snapshots.Memory
	routed *routed.Store
}

func newSetup(t *testing.T, partitions map[string]string, def string) setup {
	t.Helper()
	a, b := memory.New(), memory.New()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	r, err := partitioned.New(partitioned.Config{
		Members:    []partitioned.Member{{Name: "a", Journal: a}, {Name: "b", Journal: b}},
		Partitions: partitions, Default: def,
	})
	require.NoError(t, err)
	stores := map[string]*snapshots.Memory{"a": snapshots.NewMemory(), "b": snapshots.NewMemory()}
	s, err := routed.New(r, map[string]snapshots.Store{"a": stores["a"], "b": stores["b"]})
	require.NoError(t, err)
	return setup{router: r, stores: stores, routed: s}
}

func snap(stream journal.StreamID, v uint64) snapshots.Snapshot {
	return snapshots.Snapshot{Stream: stream, Version: v, SchemaVersion: 1, State: []byte(`{}`)}
}

// TestStoreConformance: a routed store keeps the snapshots.Store contract
// with its streams spread over two members ("tenant-a" on b, every other
// partition on a).
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	snapshotstest.Run(t, func(t *testing.T) snapshotstest.Harness {
		return snapshotstest.Harness{Store: newSetup(t, map[string]string{"tenant-a": "b"}, "a").routed}
	})
}

// TestStoreRoutesByPartition: each call reaches the store of the member
// serving the stream's partition and no other; a partition the router
// cannot route fails with partitioned.ErrUnknownPartition and writes
// nothing.
func TestStoreRoutesByPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSetup(t, map[string]string{"": "a", "pa": "a", "pb": "b"}, "")
	pa, pb := journal.StreamID{Partition: "pa", Tag: "account:7"}, journal.StreamID{Partition: "pb", Tag: "account:7"}
	def := journal.Stream("account:7")
	for _, st := range []journal.StreamID{pa, pb, def} {
		require.NoError(t, s.routed.Save(ctx, snap(st, 1)))
		require.NoError(t, s.routed.Save(ctx, snap(st, 2)))
	}
	for _, c := range []struct {
		member    string
		mine, not []journal.StreamID
	}{{"a", []journal.StreamID{pa, def}, []journal.StreamID{pb}}, {"b", []journal.StreamID{pb}, []journal.StreamID{pa, def}}} {
		for _, st := range c.mine {
			got, err := s.stores[c.member].Load(ctx, st, math.MaxUint64)
			require.NoError(t, err, "%s lives in member %s", st, c.member)
			require.EqualValues(t, 2, got.Version)
		}
		for _, st := range c.not {
			_, err := s.stores[c.member].Load(ctx, st, math.MaxUint64)
			require.ErrorIs(t, err, snapshots.ErrNotFound, "%s does not live in member %s", st, c.member)
		}
	}
	infos, err := s.routed.List(ctx, pb)
	require.NoError(t, err)
	require.Len(t, infos, 2)
	n, err := s.routed.Prune(ctx, pb, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	infos, err = s.stores["b"].List(ctx, pb)
	require.NoError(t, err)
	require.Len(t, infos, 1, "the prune reached member b")
	infos, err = s.stores["a"].List(ctx, pa)
	require.NoError(t, err)
	require.Len(t, infos, 2, "and left member a alone")

	nowhere := journal.StreamID{Partition: "nowhere", Tag: "x:1"}
	require.ErrorIs(t, s.routed.Save(ctx, snap(nowhere, 1)), partitioned.ErrUnknownPartition)
	_, err = s.routed.Load(ctx, nowhere, math.MaxUint64)
	require.ErrorIs(t, err, partitioned.ErrUnknownPartition)
	_, err = s.routed.List(ctx, nowhere)
	require.ErrorIs(t, err, partitioned.ErrUnknownPartition)
	_, err = s.routed.Prune(ctx, nowhere, 0)
	require.ErrorIs(t, err, partitioned.ErrUnknownPartition)
	for name, m := range s.stores {
		sums, err := m.Streams(ctx, "nowhere")
		require.NoError(t, err)
		require.Empty(t, sums, "member %s holds nothing of an unrouted partition", name)
	}
}

// TestStoreFollowsThePartitionMap: the member is chosen at each call from
// the router's map as it is then, so once a partition is mapped to another
// member its snapshots are loaded and saved there (the old member's are
// not read again), as the router sends its leases and events there.
func TestStoreFollowsThePartitionMap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSetup(t, map[string]string{"p": "a"}, "a")
	st := journal.StreamID{Partition: "p", Tag: "account:1"}
	require.NoError(t, s.routed.Save(ctx, snap(st, 3)))

	require.NoError(t, s.router.SetPartition("p", "b"))
	_, err := s.routed.Load(ctx, st, math.MaxUint64)
	require.ErrorIs(t, err, snapshots.ErrNotFound, "member b has no snapshot of p yet")
	require.NoError(t, s.routed.Save(ctx, snap(st, 5)))
	got, err := s.stores["b"].Load(ctx, st, math.MaxUint64)
	require.NoError(t, err)
	require.EqualValues(t, 5, got.Version)
	got, err = s.stores["a"].Load(ctx, st, math.MaxUint64)
	require.NoError(t, err)
	require.EqualValues(t, 3, got.Version, "member a keeps what it had, untouched")

	require.NoError(t, s.router.SetPartition("p", "a"))
	got, err = s.routed.Load(ctx, st, math.MaxUint64)
	require.NoError(t, err)
	require.EqualValues(t, 3, got.Version, "mapped back, p is read from member a again")
}

// TestNewRefusesAMismatch: New refuses, with journal.ErrConfiguration and a
// message naming the member, a member without a store and a store that
// names no member.
func TestNewRefusesAMismatch(t *testing.T) {
	t.Parallel()
	r := newSetup(t, nil, "a").router
	mem := snapshots.NewMemory()
	cases := map[string]struct {
		stores map[string]snapshots.Store
		names  string
	}{
		"a member without a store":  {map[string]snapshots.Store{"a": mem}, `member "b" has no snapshot store`},
		"a member with a nil store": {map[string]snapshots.Store{"a": mem, "b": nil}, `member "b" has no snapshot store`},
		"no stores at all":          {nil, `member "a" has no snapshot store`},
		"a store naming no member":  {map[string]snapshots.Store{"a": mem, "b": mem, "c": mem}, `given for "c", which is not a member (members: a, b)`},
	}
	for name, c := range cases {
		s, err := routed.New(r, c.stores)
		require.ErrorIs(t, err, journal.ErrConfiguration, name)
		require.Contains(t, err.Error(), c.names, name)
		require.Nil(t, s, name)
	}
	_, err := routed.New(nil, map[string]snapshots.Store{"a": mem})
	require.ErrorIs(t, err, journal.ErrConfiguration)
}

// TestStreamsListsWhatEachMemberServes: Streams merges the members'
// listings in (partition, tag) order, one partition's from the member
// serving it, and leaves out what a member still holds of a partition it
// no longer serves; Retention.PruneAll then prunes through it.
func TestStreamsListsWhatEachMemberServes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSetup(t, map[string]string{"p": "a", "q": "b"}, "a")
	p1 := journal.StreamID{Partition: "p", Tag: "account:1"}
	q1 := journal.StreamID{Partition: "q", Tag: "account:1"}
	q2 := journal.StreamID{Partition: "q", Tag: "account:2"}
	for v := uint64(1); v <= 3; v++ {
		require.NoError(t, s.routed.Save(ctx, snap(p1, v)))
		require.NoError(t, s.routed.Save(ctx, snap(q2, v)))
	}
	require.NoError(t, s.routed.Save(ctx, snap(q1, 7)))

	streams := func(partition string) []journal.StreamID {
		t.Helper()
		sums, err := s.routed.Streams(ctx, partition)
		require.NoError(t, err)
		var ids []journal.StreamID
		for _, sum := range sums {
			ids = append(ids, sum.Stream)
		}
		return ids
	}
	require.Equal(t, []journal.StreamID{p1, q1, q2}, streams(""))
	require.Equal(t, []journal.StreamID{q1, q2}, streams("q"))

	// p now maps to b, which has none of p's snapshots: a's are not listed.
	require.NoError(t, s.router.SetPartition("p", "b"))
	require.Equal(t, []journal.StreamID{q1, q2}, streams(""))
	require.Empty(t, streams("p"))
	require.NoError(t, s.router.SetPartition("p", "a"))

	res, err := snapshots.Retention{Keep: 1}.PruneAll(ctx, s.routed, "")
	require.NoError(t, err)
	require.Equal(t, snapshots.PruneResult{Streams: 2, Deleted: 4}, res)
	infos, err := s.stores["a"].List(ctx, p1)
	require.NoError(t, err)
	require.Len(t, infos, 1, "p's newest snapshot stays, in member a")

	require.Empty(t, streams("nosuch"), "an unmapped partition is the default member's, which has none of it")
}
