package runtime

import (
	"github.com/scribe-es/scribe/actors"
)

// StoreRewind reports a stream whose store lost versions Found+1 … Known.
type StoreRewind = actors.StoreRewind

// RewindSummary sums up the store rewinds a runtime detected (Rewinds).
type RewindSummary = actors.RewindSummary

// Rewinds sums up, without I/O, the streams found behind what this runtime
// acknowledged: the store lost versions Found+1 … Known (an asynchronous
// standby promoted, a backup restored). Each is logged, counted and passed
// to Config.OnStoreRewound; its actor reloaded it, dropping its cached state
// and idempotency keys; new appends reuse the lost version numbers.
func (rt *Runtime) Rewinds() RewindSummary { return rt.host.Rewinds() }

// StoreEpoch returns a counter, never decreasing, read without I/O, that
// grows whenever an earlier answer may no longer match the store (the
// journal talks to another server or lost its connections, see
// journal.ServerWatcher; or a stream was found rewound). A cache of answers outside the runtime should replay one
// only under its epoch, else Execute again with the same idempotency key: a
// command still stored returns as a duplicate, a lost one is decided again.
func (rt *Runtime) StoreEpoch() uint64 { return rt.host.StoreEpoch() }
