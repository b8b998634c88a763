package main

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// response is a complete HTTP response as the idempotency cache keeps it.
type response struct {
	status int
	body   []byte
	// replayed marks a response served from the cache (header
	// Idempotent-Replayed: true).
	replayed bool
	// retryAfter, when positive, is sent as the Retry-After header (seconds).
	retryAfter int
	// private marks a response holding personal data (a customer's name or
	// email): the idempotency cache does not keep it, so that nothing
	// replays it after the customer's erasure. A retry with the same key is
	// answered by the runtime instead (its idempotency key), from the
	// journal as it is then.
	private bool
}

// idempotencyCache remembers the responses of requests that carried an
// Idempotency-Key, so that a retry with the same key and the same request
// gets the first response back without executing again.
//
// Keys are global to the service (there are no client identities). An entry
// remembers the request's fingerprint (operation and parameters): a retry with
// the same key but another fingerprint is refused. While the first request
// with a key is still running, a retry waits for it. Responses with status
// 5xx are not kept (the client may retry), nor private ones (personal data),
// every other response is, for ttl,
// and at most max completed entries are kept (the oldest are dropped first).
//
// The cache is the fast path only: the key also travels to the runtime as the
// command's idempotency key, so a retry after a restart or an eviction appends
// nothing either (see Service).
//
// A store that went back in time (an asynchronous standby promoted, a backup
// restored) may no longer hold what a kept 2xx response acknowledged. So each
// entry remembers the store epoch (runtime.StoreEpoch) it was executed under,
// and a 2xx response is replayed only while that epoch is current; otherwise
// the request is executed again, and the runtime answers it from the store:
// a stored command as a duplicate (the same outcome), a lost one decided
// again. Kept 4xx responses (nothing was written) are replayed as before.
type idempotencyCache struct {
	max int
	ttl time.Duration
	now func() time.Time
	// epoch returns the store epoch (nil: always 0).
	epoch func() uint64

	mu      sync.Mutex
	entries map[string]*idemEntry
	order   *list.List // completed entries, oldest first; values are keys
}

type idemEntry struct {
	fingerprint string
	done        chan struct{} // closed when the first execution finished
	completed   bool          // resp is valid and kept
	resp        response
	expires     time.Time
	elem        *list.Element
	epoch       uint64 // the store epoch when the first execution started
}

func newIdempotencyCache(max int, ttl time.Duration, now func() time.Time, epoch func() uint64) *idempotencyCache {
	return &idempotencyCache{max: max, ttl: ttl, now: now, epoch: epoch, entries: map[string]*idemEntry{}, order: list.New()}
}

// storeEpoch returns the current store epoch.
func (c *idempotencyCache) storeEpoch() uint64 {
	if c.epoch == nil {
		return 0
	}
	return c.epoch()
}

// outdated reports whether a completed entry acknowledged a write under a
// store epoch that is no longer current: the store may have lost it.
func (c *idempotencyCache) outdated(e *idemEntry) bool {
	return e.resp.status < 300 && e.epoch != c.storeEpoch()
}

// idemOutcome says how do answered.
type idemOutcome int

const (
	idemExecuted idemOutcome = iota // exec ran for this request
	idemReplayed                    // the kept response of an earlier request
	idemMismatch                    // the key was used with another fingerprint
)

// do runs exec once per key: the first request with key runs it, later ones
// with the same fingerprint get its response (waiting while it runs), and
// ones with another fingerprint get idemMismatch. It returns ctx's error when
// ctx ends while waiting for a running first request.
func (c *idempotencyCache) do(ctx context.Context, key, fingerprint string, exec func() response) (response, idemOutcome, error) {
	for {
		c.mu.Lock()
		e := c.entries[key]
		if e != nil && e.completed && (!c.now().Before(e.expires) || (e.fingerprint == fingerprint && c.outdated(e))) {
			c.removeLocked(key, e)
			e = nil
		}
		if e == nil {
			e = &idemEntry{fingerprint: fingerprint, done: make(chan struct{}), epoch: c.storeEpoch()}
			c.entries[key] = e
			c.mu.Unlock()
			return c.run(key, e, exec), idemExecuted, nil
		}
		if e.fingerprint != fingerprint {
			c.mu.Unlock()
			return response{}, idemMismatch, nil
		}
		if e.completed {
			resp := e.resp
			c.mu.Unlock()
			return resp, idemReplayed, nil
		}
		done := e.done
		c.mu.Unlock()
		select {
		case <-done:
			// Completed (replay it) or dropped after a 5xx (run it again).
		case <-ctx.Done():
			return response{}, idemExecuted, ctx.Err()
		}
	}
}

// run executes exec for the entry that owns key and records the outcome; a
// panic in exec drops the entry (waiters retry) and propagates.
func (c *idempotencyCache) run(key string, e *idemEntry, exec func() response) (resp response) {
	finished := false
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if finished && resp.status < 500 && !resp.private {
			e.completed = true
			e.resp = resp
			e.expires = c.now().Add(c.ttl)
			e.elem = c.order.PushBack(key)
			for c.order.Len() > c.max {
				oldest := c.order.Front().Value.(string)
				c.removeLocked(oldest, c.entries[oldest])
			}
		} else if c.entries[key] == e {
			delete(c.entries, key)
		}
		close(e.done)
	}()
	resp = exec()
	finished = true
	return resp
}

func (c *idempotencyCache) removeLocked(key string, e *idemEntry) {
	if e == nil {
		return
	}
	if e.elem != nil {
		c.order.Remove(e.elem)
		e.elem = nil
	}
	if c.entries[key] == e {
		delete(c.entries, key)
	}
}

// len returns the number of entries (running and completed).
func (c *idempotencyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
