// Package routed keeps each stream's snapshots in the database that holds
// its events when one journal is spread over several databases by a
// journal/partitioned Router:
//
//	r, err := partitioned.New(partitioned.Config{Members: []partitioned.Member{
//		{Name: "eu", Journal: eu.Journal}, {Name: "us", Journal: us.Journal}}, …})
//	snaps, err := routed.New(r, map[string]snapshots.Store{"eu": eu.Snapshots, "us": us.Snapshots})
//	rt, err := runtime.New(ctx, runtime.Config{Journal: r, Snapshots: snaps})
//
// A Store sends each call to the snapshot store of the member serving the
// stream's partition in the router's map at the moment of the call, the
// member the router sends the stream's leases and events to: after
// Router.SetPartition, or once the router has followed a partition move
// (journal.ErrPartitionMoved), the partition's snapshots are read and saved
// in its new member. A move carries the partition's snapshots with its
// events (pgadmin.MovePartition).
//
// The package sits above both journal/partitioned and snapshots, so the
// journal layer never depends on the snapshot contract.
package routed
