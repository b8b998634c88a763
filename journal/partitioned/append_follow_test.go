package partitioned_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// TestAppendFollowsAMoveWithLeasesTakenWhereThePartitionIs: two nodes' routers
// start with east on "one"; east moves to "two". Node B acquires an east
// stream, following the move (Acquire learns it from "one"). Node A, whose
// router has not looked at east since, appends with B's lease, as a DCB
// command's executor does with the leases its tags' owners took: "one" holds
// no lease of east any more and refuses the append, says where east went,
// and A's router sends the append there. Before, A's appends were refused as
// "never acquired" for as long as nothing else made its router look.
func TestAppendFollowsAMoveWithLeasesTakenWhereThePartitionIs(t *testing.T) {
	ctx := context.Background()
	one, two, a := twoDatabases(t, map[string]string{"east": "one"})
	b, err := staleRouter(one, two)
	require.NoError(t, err)
	stream := journal.StreamID{Partition: "east", Tag: journal.NewTag("account", "1")}
	event := func() journal.Event {
		return journal.Event{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1, Tags: []journal.Tag{stream.Tag}, Data: []byte(`{"amount":1}`), Metadata: journal.Metadata{Partition: "east"}}
	}

	// One event on "one" before the move, so the move has a stream to carry.
	node, err := b.OpenNode(ctx, "node-b", time.Minute)
	require.NoError(t, err)
	lease, err := b.Acquire(ctx, node, stream, time.Second)
	require.NoError(t, err)
	_, err = b.Append(ctx, []journal.Event{event()}, journal.AppendOptions{Leases: []journal.Lease{lease}, Expect: map[journal.Tag]uint64{stream.Tag: 0}})
	require.NoError(t, err)

	_, err = pgadmin.MovePartition(ctx, pgadmin.PartitionMove{Partition: "east", Source: one.pool, SourceSchema: one.cfg.Schema,
		Target: two.pool, TargetSchema: two.cfg.Schema, To: "two", BatchSize: 10})
	require.NoError(t, err)

	lease, err = b.Acquire(ctx, node, stream, time.Second)
	require.NoError(t, err, "B follows the move when it acquires")
	res, err := a.Append(ctx, []journal.Event{event()}, journal.AppendOptions{Leases: []journal.Lease{lease}, Expect: map[journal.Tag]uint64{stream.Tag: 1}})
	require.NoError(t, err, "A's append with a lease taken where east is now")
	require.EqualValues(t, 2, res.Records[0].Version(stream.Tag))
	require.Equal(t, 2, two.count(t, `SELECT count(*) FROM %s.events WHERE partition = $1`, "east"))
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.events WHERE partition = $1`, "east"))

	// A's router now sends east to "two" directly.
	res, err = a.Append(ctx, []journal.Event{event()}, journal.AppendOptions{Leases: []journal.Lease{lease}, Expect: map[journal.Tag]uint64{stream.Tag: 2}})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Records[0].Version(stream.Tag))

	// A third node's router, which has not looked at east since the move,
	// reads the stream through the tag index (what journal.VerifyStream
	// does) and with its archive: both follow the move.
	c, err := staleRouter(one, two)
	require.NoError(t, err)
	for name, read := range map[string]func() iter.Seq2[journal.Record, error]{
		"through the index": func() iter.Seq2[journal.Record, error] { return c.ReadStreamThroughIndex(ctx, stream, 1, 0) },
		"with the archive":  func() iter.Seq2[journal.Record, error] { return c.ReadStreamWithArchive(ctx, stream, 1, 0) },
	} {
		n := 0
		for _, err := range read() {
			require.NoError(t, err, name)
			n++
		}
		require.Equal(t, 3, n, name)
		require.NoError(t, c.SetPartition("east", "one"), name) // stale again for the next read
	}

	// An append with a lease that is not current where east is still fails
	// as a revoked lease, having written nothing.
	_, err = a.Append(ctx, []journal.Event{event()}, journal.AppendOptions{Leases: []journal.Lease{{Stream: stream, NodeID: "node-b", Epoch: lease.Epoch + 7, Incarnation: lease.Incarnation}}})
	require.True(t, journal.LeaseRevoked(err), "%v", err)
	require.Equal(t, 3, two.count(t, `SELECT count(*) FROM %s.events WHERE partition = $1`, "east"))
}

// staleRouter is another node's router over one and two, its map naming
// "one" for east.
func staleRouter(one, two *database) (*partitioned.Router, error) {
	return partitioned.New(partitioned.Config{
		Members:    []partitioned.Member{one.member("one"), two.member("two")},
		Partitions: map[string]string{"east": "one"},
		Default:    "one",
	})
}
