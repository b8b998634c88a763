package runtime

import (
	"github.com/scribe-es/scribe/actors"
)

// StoreRewind reports a stream found behind what this runtime acknowledged:
// the store lost versions Found+1 … Known (an asynchronous standby promoted,
// a backup restored). It is logged, counted (Rewinds) and passed to
// Config.OnStoreRewound; the stream's actor reloaded from the store, dropping
// its cached state and idempotency keys, and new appends reuse the lost
// version numbers.
type StoreRewind = actors.StoreRewind

// RewindSummary sums up the store rewinds detected since start (Rewinds).
type RewindSummary = actors.RewindSummary

// Rewinds returns, for a readiness or status report and without I/O, how many streams
// and acknowledged versions a store that went back in time lost, and the
// latest detection.
func (rt *Runtime) Rewinds() RewindSummary { return rt.host.Rewinds() }

// StoreEpoch returns a counter, never decreasing and read without I/O, that grows whenever an
// earlier answer may no longer match the store: the journal may talk to
// another server or lost its connections (journal.ServerWatcher), or a
// stream was found rewound. A cache of answers outside the runtime (an HTTP
// replay cache, say) should replay one only under the epoch it was taken in,
// and otherwise Execute again with the same idempotency key: a command the
// store still holds returns as a duplicate, a lost one is decided again.
func (rt *Runtime) StoreEpoch() uint64 { return rt.host.StoreEpoch() }
