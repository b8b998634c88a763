// Package journaltest is the conformance suite of the journal contract. Every
// backend of [journal.Journal] and [journal.Sessions] runs all of it, unchanged:
//
//	func TestConformance(t *testing.T) {
//		journaltest.Run(t, func(t *testing.T) journaltest.Harness {
//			j := newFreshJournal(t) // registers its own cleanup
//			return journaltest.Harness{Journal: j, Sessions: j}
//		})
//	}
//
// The suite tests the contract, never one implementation's details: DCB reads
// and append conditions (https://dcb.events/specification), tag streams and
// per-tag versions, expected versions, idempotent appends, event validation,
// partitions, subscriptions, summaries, hash chains, session leases and
// fencing, and races between real goroutines (many writers on one stream, a
// capacity invariant under DCB conditions, catch-up readers that must never skip
// or repeat an event, and a lower position that commits late). With
// Harness.Peer, a second handle on the same store as another process would
// open it, the Peer cases check that expected versions, append conditions and
// hash links follow what the peer appended in between, not what the journal
// remembers of its own appends.
//
// Each case is a parallel subtest with its own fresh journal. Session cases use
// short real timeouts (hundreds of milliseconds), so a backend's clock must be
// real time while the suite runs.
package journaltest
