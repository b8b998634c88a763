// Package partitioned spreads one Scribe journal over several databases: a
// Router holds several member journals (one per Postgres server or database)
// and a map from partition to member, and implements journal.Journal,
// journal.Sessions and (Router.Snapshots) snapshots.Store by sending each
// call to the member that serves the call's partition. A runtime takes it
// unchanged:
//
//	r, err := partitioned.New(partitioned.Config{
//		Members: []partitioned.Member{
//			{Name: "eu", Journal: eu.Journal, Snapshots: eu.Snapshots},
//			{Name: "us", Journal: us.Journal, Snapshots: us.Snapshots},
//		},
//		Partitions: map[string]string{"default": "eu", "acme": "us"},
//	})
//	rt, err := runtime.New(ctx, runtime.Config{Journal: r, Snapshots: r.Snapshots()})
//
// What lives where. A stream, its leases, its snapshots and its hash chain
// live in its partition's member; so do the partition's DCB queries and
// their append conditions. A node session is one session per member, opened,
// renewed and closed together; the runtime sees one journal.NodeSession.
//
// One partition per append. Every append names exactly one partition (its
// events', its leases' and its condition's): an append naming two fails
// with ErrCrossPartition and writes nothing, so a DCB command stays within
// one partition. (tagconsistency already refuses, at execution, a DCB
// command that decides events outside its query's partition; the router
// refuses anything else that would span two.)
//
// The global feed is per database. Positions are ordered within one
// database only, so ReadAll, Subscribe and Read over Query.AllPartitions,
// ReadTypes, TypeSummaries and CountAfter fail with an error matching
// ErrPerDatabase when the router has more than one member: run feeds and
// projections per database on Router.Member(name).Journal (Router.Members
// lists them). Head answers for the member serving journal.DefaultPartition
// (the runtime follows erasure records there); ReadEvent and
// ReadByCorrelation ask every member, in the order of Config.Members.
//
// The partition map comes from configuration (Config.Partitions), the same
// on every node. A partition move (Mover) switches it on the router that
// runs it (SetPartition) and leaves a mark in the source database, so any
// other node still sending the partition's streams to the source is refused
// at Acquire with an error naming the new member (ErrPartitionMoved), and a
// router that has that member switches its own map when it sees it; operators
// then update every node's configuration before the next restart.
package partitioned
