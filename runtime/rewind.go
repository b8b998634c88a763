package runtime

import (
	"github.com/scribe-es/scribe/actors"
)

// StoreRewind reports one stream found behind what this runtime had
// acknowledged: the store lost versions Found+1 … Known (an asynchronous
// standby was promoted, or a backup restored). The stream's actor dropped
// its cached state and idempotency keys and reloaded from the store before
// serving again; new appends reuse the lost version numbers.
type StoreRewind = actors.StoreRewind

// RewindSummary sums up the store rewinds a runtime detected since it
// started (see Runtime.Rewinds).
type RewindSummary = actors.RewindSummary

// Rewinds returns what this runtime detected of a store that went back in
// time: how many streams, how many acknowledged versions they lost, and the
// most recent detection. Use it for a readiness or status report. Safe for
// concurrent use; no I/O.
func (rt *Runtime) Rewinds() RewindSummary { return rt.host.Rewinds() }

// StoreEpoch returns a counter that never decreases and increases whenever an
// answer given earlier may no longer match the store: the journal may be
// talking to another database server, or lost its connections
// (journal.ServerWatcher), or a stream was found rewound. A cache of answers
// kept outside the runtime (an HTTP replay cache keyed by idempotency key)
// should replay an answer only while the epoch it was taken under is current,
// and otherwise Execute again with the same idempotency key: a command the
// store still holds comes back as a duplicate, a lost one is decided again.
// Safe for concurrent use; no I/O.
func (rt *Runtime) StoreEpoch() uint64 { return rt.host.StoreEpoch() }
