// Package snapshotstest is the conformance suite for snapshots.Store. Every
// implementation (the in-memory store, the Postgres store) runs all of it from
// its own tests:
//
//	func TestStore(t *testing.T) {
//		snapshotstest.Run(t, func(t *testing.T) snapshotstest.Harness {
//			return snapshotstest.Harness{Store: newStoreForTest(t)}
//		})
//	}
//
// The suite tests the contract documented on snapshots.Store and
// snapshots.Snapshot, never one implementation's details.
package snapshotstest
