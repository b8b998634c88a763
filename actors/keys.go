package actors

import (
	"github.com/google/uuid"

	"github.com/scribe-es/scribe/internal/idempotency"
	"github.com/scribe-es/scribe/journal"
)

// maxCachedKeys and maxCachedKeyBytes bound the idempotency keys an actor
// remembers in memory (their results' events included); older keys are found
// in the journal through their derived event IDs. The byte bound keeps one
// stream's cache small even when its events are large.
const (
	maxCachedKeys     = 1024
	maxCachedKeyBytes = 1 << 20
)

// keyCache remembers the results of recent idempotency keys of one stream,
// oldest evicted first.
type keyCache struct {
	m     map[string][]journal.Record
	order []string // oldest first
	bytes int
	// complete is true while the cache holds every key the stream ever stored
	// (it was rebuilt from version 1 and nothing was evicted): a miss then
	// needs no journal lookup.
	complete bool
}

func (k *keyCache) get(key string) ([]journal.Record, bool) {
	if k == nil {
		return nil, false
	}
	r, ok := k.m[key]
	return r, ok
}

// known reports whether the cache answers for key without a journal lookup.
func (k *keyCache) known(key string) bool {
	if k == nil {
		return false
	}
	_, ok := k.m[key]
	return ok || k.complete
}

// resultSize approximates the memory a key's result holds.
func resultSize(key string, recs []journal.Record) int {
	n := len(key) + 64
	for i := range recs {
		r := &recs[i]
		md := &r.Metadata
		n += 256 + len(r.Type) + len(r.Data) + len(md.CorrelationID) + len(md.CausationID) + len(md.UserID) +
			len(md.IdempotencyKey) + len(md.TraceParent) + len(md.TraceState) + len(md.CommandHash)
		for _, t := range r.Tags {
			n += len(t) + 16
		}
		for _, sc := range md.Scopes {
			n += len(sc) + 16
		}
	}
	return n
}

func (k *keyCache) put(key string, recs []journal.Record) {
	if k.m == nil {
		k.m = make(map[string][]journal.Record)
	}
	if _, ok := k.m[key]; ok {
		return
	}
	k.m[key] = recs
	k.order = append(k.order, key)
	k.bytes += resultSize(key, recs)
	for len(k.order) > 1 && (len(k.order) > maxCachedKeys || k.bytes > maxCachedKeyBytes) {
		old := k.order[0]
		k.order[0] = ""
		k.order = k.order[1:]
		k.bytes -= resultSize(old, k.m[old])
		delete(k.m, old)
		k.complete = false
	}
	if cap(k.order) > 4*maxCachedKeys && len(k.order) < cap(k.order)/4 {
		k.order = append([]string(nil), k.order...)
	}
}

// eventID derives the ID of the index-th event of the command with the given
// idempotency key on stream: the same key always yields the same IDs, so the
// journal's idempotent append stores its events once, across restarts.
func (h *Host) eventID(stream journal.StreamID, key string, index int) uuid.UUID {
	return idempotency.EventID(idempotency.Aggregate, stream.Partition, string(stream.Tag), key, index)
}

// keyCollector gathers the keyed commands' records of a stream while it is
// replayed in version order: a command's records are consecutive and their IDs
// are derived from its key.
type keyCollector struct {
	h      *Host
	stream journal.StreamID
	k      *keyCache
	key    string
	run    []journal.Record
}

func (c *keyCollector) add(rec journal.Record) {
	key := rec.Metadata.IdempotencyKey
	if c.key != "" && key == c.key && rec.ID == c.h.eventID(c.stream, key, len(c.run)) {
		c.run = append(c.run, rec)
		return
	}
	c.flush()
	if key != "" && rec.ID == c.h.eventID(c.stream, key, 0) {
		c.key = key
		c.run = append(c.run, rec)
	}
}

func (c *keyCollector) flush() {
	if c.key != "" {
		c.k.put(c.key, c.run)
	}
	c.key, c.run = "", nil
}
