package pgadmin_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func TestStreamsListing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	for _, e := range []journal.Event{
		event("E", "account:1"), event("E", "account:2", "branch:1"), event("E", "account:10"), event("E", "account:2"),
	} {
		_, err := f.journal.Append(ctx, []journal.Event{e}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	other := event("E", "account:1")
	other.Metadata.Partition = "tenant-b"
	_, err := f.journal.Append(ctx, []journal.Event{other}, journal.AppendOptions{})
	require.NoError(t, err)
	// A stream with a lease but no events is not listed.
	node, err := f.journal.OpenNode(ctx, "n1", time.Minute)
	require.NoError(t, err)
	_, err = f.journal.Acquire(ctx, node, journal.Stream("account:empty"), time.Second)
	require.NoError(t, err)

	names := func(sums []journal.TagSummary) []string {
		var out []string
		for _, s := range sums {
			out = append(out, s.Stream.String())
		}
		return out
	}
	all, err := f.admin.Streams(ctx, pgadmin.StreamsQuery{})
	require.NoError(t, err)
	require.Equal(t, []string{"default/account:1", "default/account:10", "default/account:2", "default/branch:1", "tenant-b/account:1"}, names(all))
	for _, s := range all {
		sum, err := f.journal.TagSummary(ctx, s.Stream)
		require.NoError(t, err)
		require.Equal(t, sum, s, "a listed stream carries its TagSummary")
	}

	page, err := f.admin.Streams(ctx, pgadmin.StreamsQuery{Partition: journal.DefaultPartition, TagPrefix: "account:1", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []string{"default/account:1"}, names(page))
	page, err = f.admin.Streams(ctx, pgadmin.StreamsQuery{Partition: journal.DefaultPartition, TagPrefix: "account:1", Limit: 1, After: page[0].Stream})
	require.NoError(t, err)
	require.Equal(t, []string{"default/account:10"}, names(page))
	page, err = f.admin.Streams(ctx, pgadmin.StreamsQuery{Partition: journal.DefaultPartition, TagPrefix: "account:1", After: page[0].Stream})
	require.NoError(t, err)
	require.Empty(t, page)

	_, err = f.admin.Streams(ctx, pgadmin.StreamsQuery{Limit: -1})
	require.ErrorIs(t, err, journal.ErrInvalidQuery)

	leases, err := f.admin.Leases(ctx, "")
	require.NoError(t, err)
	require.Len(t, leases, 1)
	require.Equal(t, journal.Stream("account:empty"), leases[0].Stream)
	require.True(t, leases[0].Live)
	require.Equal(t, "n1", leases[0].NodeID)
	require.False(t, leases[0].Since.IsZero(), "migration 0004 records when a lease was granted")
	require.True(t, leases[0].Until.After(leases[0].Since))

	nodes, err := f.admin.Nodes(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	require.Equal(t, pgadmin.NodeInfo{NodeID: "n1", Incarnation: 1, Timeout: time.Minute, OpenedAt: nodes[0].OpenedAt, ExpiresAt: node.ExpiresAt, Live: true, Leases: 1}, nodes[0])
	require.WithinDuration(t, node.ExpiresAt.Add(-time.Minute), nodes[0].OpenedAt, time.Second)

	n, err := f.admin.UnchainedEvents(ctx, "")
	require.NoError(t, err)
	require.Zero(t, n)

	unrecorded, err := f.admin.UnrecordedStreams(ctx, "")
	require.NoError(t, err)
	require.Empty(t, unrecorded)
	_, err = f.pool.Exec(ctx, `DELETE FROM `+quote(f.cfg.Schema)+`.streams WHERE tag = 'account:2'`)
	require.NoError(t, err)
	unrecorded, err = f.admin.UnrecordedStreams(ctx, journal.DefaultPartition)
	require.NoError(t, err)
	require.Equal(t, []journal.StreamID{journal.Stream("account:2")}, unrecorded)
	_, err = journal.VerifyStream(ctx, f.journal, journal.Stream("account:2"))
	var ce *journal.ChainError
	require.ErrorAs(t, err, &ce, "a stream without its record does not verify")
}
