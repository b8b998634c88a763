package actors

import (
	"strconv"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// maxCachedKeys bounds the idempotency keys an actor remembers in memory;
// older keys are found in the journal through their derived event IDs.
const maxCachedKeys = 1024

// keyCache remembers the results of recent idempotency keys of one stream.
type keyCache struct {
	m     map[string][]journal.Record
	order []string
	next  int
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

func (k *keyCache) put(key string, recs []journal.Record) {
	if k.m == nil {
		k.m = make(map[string][]journal.Record)
	}
	if _, ok := k.m[key]; ok {
		return
	}
	if len(k.order) < maxCachedKeys {
		k.order = append(k.order, key)
	} else {
		delete(k.m, k.order[k.next])
		k.order[k.next] = key
		k.next = (k.next + 1) % maxCachedKeys
		k.complete = false
	}
	k.m[key] = recs
}

// eventID derives the ID of the index-th event of the command with the given
// idempotency key on stream: the same key always yields the same IDs, so the
// journal's idempotent append stores its events once, across restarts.
func (h *Host) eventID(stream journal.StreamID, key string, index int) uuid.UUID {
	b := make([]byte, 0, len(stream.Partition)+len(stream.Tag)+len(key)+8)
	b = append(b, stream.Partition...)
	b = append(b, 0)
	b = append(b, stream.Tag...)
	b = append(b, 0)
	b = append(b, key...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	return uuid.NewSHA1(h.idNS, b)
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
