// Package partitioned spreads one Scribe journal over several databases: a
// Router holds several member journals (one per Postgres server or database)
// and a map from partition to member, and implements journal.Journal and
// journal.Sessions by sending each call to the member that serves the call's
// partition. A runtime takes it unchanged; package snapshots/routed routes
// the members' snapshot stores the same way:
//
//	r, err := partitioned.New(partitioned.Config{
//		Members: []partitioned.Member{
//			{Name: "eu", Journal: eu.Journal},
//			{Name: "us", Journal: us.Journal},
//		},
//		Partitions: map[string]string{"default": "eu", "acme": "us"},
//	})
//	snaps, err := routed.New(r, map[string]snapshots.Store{"eu": eu.Snapshots, "us": us.Snapshots})
//	rt, err := runtime.New(ctx, runtime.Config{Journal: r, Snapshots: snaps})
//
// What lives where. A stream, its leases and its hash chain (and, through
// snapshots/routed, its snapshots) live in its partition's member; so do
// the partition's DCB queries and their append conditions. A node session is one session per member, opened,
// renewed and closed together; the runtime sees one journal.NodeSession.
//
// One partition per append. Every append names exactly one partition (its
// events', its leases' and its condition's): an append naming two fails
// with ErrCrossPartition and writes nothing, so a DCB command stays within
// one partition. (tagconsistency already refuses, at execution, a DCB
// command that decides events outside its query's partition; the router
// refuses anything else that would span two.)
//
// The global feed is per database; the partitions' feeds are not.
// Positions are ordered within one database only, so ReadAll, Subscribe and
// Read over Query.AllPartitions, ReadTypes, TypeSummaries and CountAfter
// fail with an error matching ErrPerDatabase when the router has more than
// one member. Read across databases partition by partition instead:
// FeedPartitions lists the partitions, and FollowPartition reads one of
// them in its own order, catch-up then live, from a cursor that survives a
// partition move (the member, the position there and the event ID of the
// record: a move keeps event IDs but not positions), following the
// partition from member to member without repeating or skipping a record.
// A projection.Runner over a router of several members does this by itself
// (projection.PartitionedSource): one projection, its checkpoints (one per
// partition) and its read model in one store, applies every event of every
// partition exactly once, in each partition's order, across moves there and
// back. Events of different partitions have no order between them. Head
// answers for the member serving journal.DefaultPartition (the runtime
// follows erasure records there); ReadEvent and ReadByCorrelation ask every
// member, in the order of Config.Members.
//
// The partition map comes from configuration (Config.Partitions), the same
// on every node; there is no map table to keep consistent. A partition move
// (pgadmin.MovePartition, `scribe partition move`) reaches every node
// through the source database: once moved, the source answers Acquire, and
// TagSummary and ReadStream of the partition's streams, with
// journal.ErrPartitionMoved naming the target (PartitionMove.To), and so
// does an Append it refuses for its leases (it holds none of the partition
// any more); a router that has a member of that name maps the partition to
// it from then on (Acquire, Append, TagSummary, ReadStream,
// ReadStreamThroughIndex, ReadStreamWithArchive, Read, TagsOfGroup and
// FollowPartition follow it at once, and Append is sent
// there once more: a DCB command's executor appends with leases its tags'
// owners took on their nodes, where the partition now is; Subscribe does
// not follow: its positions are one database's). While the
// partition moves, its Acquire fails with the retryable
// journal.ErrPartitionMoving, so commands get a retryable error for the
// cut-over; a node whose map already names the target of a move back is
// answered there with journal.ErrPartitionMoved naming the database that
// still serves the partition, and follows it there until the switch. Stream
// actors holding leases the move's fence revoked acquire their streams
// again at their next append or reservation (journal.ErrLeaseRevoked). Update every node's configuration before its next restart (a
// node restarted with the old map is redirected again by the same answer,
// at the cost of one refused call per partition). SetPartition changes the
// map by hand. In a cluster, commands are routed by stream as ever: the
// node owning a stream's actor acquires its lease through its own router.
//
// Optional capabilities: the router implements journal.Limited (the
// strictest member's limits), journal.ServerWatcher (the sum of the
// members' epochs, so any member's failover makes the actors re-validate)
// and journal.ArchiveReader (forwarded to the stream's member; a member
// without an archive reads its hot events). It does not implement
// journal.InlineAppender: its Append may do I/O on any member.
package partitioned
