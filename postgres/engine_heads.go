package postgres

import (
	"sync"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// heads remembers the version, head hash and newest event's position of
// streams this journal appended to, so that the next append to them can go
// out in one round trip. It is a hint only: the write statement checks every
// version and position it relies on.
type heads struct {
	mu sync.Mutex
	m  map[streamKey]head
}

// head is a remembered stream head.
type head struct {
	version uint64
	hash    journal.Hash
	last    journal.Position // zero: unknown
}

// maxHeads bounds the heads cache; past it the cache starts over.
const maxHeads = 1 << 16

// learn records that stream k is at head hd. A version below the one already
// known is ignored (two batches of one stream may report in either order).
func (h *heads) learn(k streamKey, hd head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHeads {
		h.m = make(map[streamKey]head)
	}
	if old, ok := h.m[k]; ok && old.version > hd.version {
		return
	}
	h.m[k] = hd
}

func (h *heads) forget(batch []*appendReq) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range batch {
		for _, c := range r.claims {
			delete(h.m, streamKey{r.partition, c.tag})
		}
	}
}

// known returns a direct attempt's state for batch, or nil when some stream
// is not known.
func (h *heads) known(batch []*appendReq) *batchState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := &batchState{keys: map[streamKey]*fastStream{}, existing: map[uuid.UUID]bool{}, condHit: make([]bool, len(batch))}
	for _, r := range batch {
		for _, c := range r.claims {
			k := streamKey{r.partition, c.tag}
			if st.keys[k] != nil {
				continue
			}
			l, ok := h.m[k]
			if !ok {
				return nil
			}
			st.keys[k] = &fastStream{exists: true, before: l.version, version: l.version, head: l.hash, last: l.last}
		}
	}
	return st
}

// forgetStream drops what the cache remembers of one stream.
func (h *heads) forgetStream(k streamKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, k)
}
