package partitioned_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/journaltest"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/journal/partitioned"
)

// TestRouterOneMemberConformance runs the journal conformance suite on a
// router with a single member: with one database the router forwards every
// call, global feed included, and must keep every guarantee.
func TestRouterOneMemberConformance(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		m := memory.New()
		t.Cleanup(func() { _ = m.Close() })
		r, err := partitioned.New(partitioned.Config{Members: []partitioned.Member{{Name: "only", Journal: m}}})
		require.NoError(t, err)
		return journaltest.Harness{Journal: r, Sessions: r, Peer: r}
	})
}

func event(partition, typ string, tags ...journal.Tag) journal.Event {
	return journal.Event{ID: uuid.Must(uuid.NewV7()), Type: typ, Tags: tags, Data: []byte(`{}`),
		Metadata: journal.Metadata{Partition: partition}}
}

// memRouter is a router over two memory journals: "a" serves the default
// partition and "pa", "b" serves "pb".
func memRouter(t *testing.T) (*partitioned.Router, *memory.Journal, *memory.Journal) {
	t.Helper()
	a, b := memory.New(), memory.New()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	r, err := partitioned.New(partitioned.Config{
		Members:    []partitioned.Member{{Name: "a", Journal: a}, {Name: "b", Journal: b}},
		Partitions: map[string]string{"": "a", "pa": "a", "pb": "b"},
	})
	require.NoError(t, err)
	return r, a, b
}

// openNode opens node session "n1" on every member of r; the test's cleanup
// closes it and checks that the close succeeds.
func openNode(t *testing.T, r *partitioned.Router) journal.NodeSession {
	t.Helper()
	node, err := r.OpenNode(context.Background(), "n1", time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.CloseNode(context.Background(), node)) })
	return node
}

// TestRouterRefusesCrossPartitionAppends: an append whose events, leases or
// condition name two partitions fails with ErrCrossPartition and writes
// nothing in either member, even when both partitions live in one member.
func TestRouterRefusesCrossPartitionAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, a, b := memRouter(t)
	node := openNode(t, r)
	lease, err := r.Acquire(ctx, node, journal.StreamID{Partition: "pb", Tag: "account:1"}, time.Second)
	require.NoError(t, err)

	cases := map[string]struct {
		events []journal.Event
		opts   journal.AppendOptions
	}{
		"events in two partitions of two members": {events: []journal.Event{event("pa", "X", "account:1"), event("pb", "X", "account:1")}},
		"events in two partitions of one member":  {events: []journal.Event{event("", "X", "account:1"), event("pa", "X", "account:1")}},
		"a lease of another partition":            {events: []journal.Event{event("pa", "X", "account:1")}, opts: journal.AppendOptions{Leases: []journal.Lease{lease}}},
		"a condition on another partition": {events: []journal.Event{event("pa", "X", "account:1")}, opts: journal.AppendOptions{
			Condition: &journal.AppendCondition{FailIfEventsMatch: journal.Query{Partition: "pb", Items: []journal.QueryItem{{Tags: []journal.Tag{"account:1"}}}}}}},
		"a condition over every partition": {events: []journal.Event{event("pa", "X", "account:1")}, opts: journal.AppendOptions{
			Condition: &journal.AppendCondition{FailIfEventsMatch: journal.Query{All: true, AllPartitions: true}}}},
	}
	for name, c := range cases {
		_, err := r.Append(ctx, c.events, c.opts)
		require.ErrorIs(t, err, partitioned.ErrCrossPartition, name)
		require.Contains(t, err.Error(), "one partition", name)
	}
	for _, m := range []*memory.Journal{a, b} {
		h, err := m.Head(ctx)
		require.NoError(t, err)
		require.True(t, h.IsZero(), "a refused append wrote nothing")
	}
}

// TestRouterRoutesByPartition: streams, leases and reads of a partition go
// to its member and nowhere else (snapshots/routed tests its snapshots);
// global-feed calls fail with ErrPerDatabase naming the members; an
// unmapped partition fails clearly.
func TestRouterRoutesByPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, a, b := memRouter(t)
	node := openNode(t, r)

	for _, p := range []string{"pa", "pb"} {
		s := journal.StreamID{Partition: p, Tag: "account:7"}
		l, err := r.Acquire(ctx, node, s, time.Second)
		require.NoError(t, err)
		_, err = r.Append(ctx, []journal.Event{event(p, "Opened", "account:7")}, journal.AppendOptions{Leases: []journal.Lease{l}, Expect: map[journal.Tag]uint64{"account:7": 0}})
		require.NoError(t, err)
	}
	countIn := func(m *memory.Journal, p string) int {
		n := 0
		for _, err := range m.ReadStream(ctx, journal.StreamID{Partition: p, Tag: "account:7"}, 1, 0) {
			require.NoError(t, err)
			n++
		}
		return n
	}
	require.Equal(t, 1, countIn(a, "pa"))
	require.Equal(t, 0, countIn(a, "pb"))
	require.Equal(t, 1, countIn(b, "pb"))
	require.Equal(t, 0, countIn(b, "pa"))

	for _, err := range r.ReadAll(ctx, journal.Position{}, 0) {
		require.ErrorIs(t, err, partitioned.ErrPerDatabase)
		var pe *partitioned.PerDatabaseError
		require.True(t, errors.As(err, &pe))
		require.Equal(t, []string{"a", "b"}, pe.Members)
	}
	for _, err := range r.Subscribe(ctx, journal.Query{All: true, AllPartitions: true}, journal.Position{}) {
		require.ErrorIs(t, err, partitioned.ErrPerDatabase)
	}
	_, err := r.CountAfter(ctx, journal.Position{})
	require.ErrorIs(t, err, partitioned.ErrPerDatabase)
	_, err = r.TypeSummaries(ctx)
	require.ErrorIs(t, err, partitioned.ErrPerDatabase)

	// A partition's own feed works: Read and Subscribe on pb read member b.
	n := 0
	for rec, err := range r.Read(ctx, journal.Query{Partition: "pb", All: true}, journal.ReadOptions{}) {
		require.NoError(t, err)
		require.Equal(t, "pb", rec.Partition())
		n++
	}
	require.Equal(t, 1, n)

	_, err = r.Acquire(ctx, node, journal.StreamID{Partition: "nowhere", Tag: "x:1"}, time.Second)
	require.ErrorIs(t, err, partitioned.ErrUnknownPartition)
	require.Contains(t, err.Error(), `"nowhere"`)
}

// TestRouterNodeSessionSpansMembers: one node session stands for one
// session per member; a session error in one member surfaces on RenewNode
// so the runtime reopens the node everywhere.
func TestRouterNodeSessionSpansMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, _, b := memRouter(t)
	node, err := r.OpenNode(ctx, "n1", time.Minute)
	require.NoError(t, err)
	node, err = r.RenewNode(ctx, node)
	require.NoError(t, err)
	// Another process opens n1 on member b only: b supersedes this one.
	other, err := b.OpenNode(ctx, "n1", time.Minute)
	require.NoError(t, err)
	_, err = r.RenewNode(ctx, node)
	require.ErrorIs(t, err, journal.ErrInvalidSession)
	require.Contains(t, err.Error(), `member "b"`)
	require.NoError(t, b.CloseNode(ctx, other))
	fresh, err := r.OpenNode(ctx, "n1", time.Minute)
	require.NoError(t, err)
	require.Greater(t, fresh.Incarnation, node.Incarnation)
	_, err = r.RenewNode(ctx, node)
	require.ErrorIs(t, err, journal.ErrInvalidSession, "the superseded session is forgotten")
	_, err = r.Acquire(ctx, fresh, journal.StreamID{Partition: "pb", Tag: "account:1"}, time.Second)
	require.NoError(t, err)
	require.NoError(t, r.CloseNode(ctx, fresh))
}
