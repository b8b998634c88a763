package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

// Idempotency lookups: which keys of the head batch the journal already holds.

func (a *streamActor) startLookup(cmds []*commandReq) bool {
	var keys []string
	for _, r := range cmds {
		key := r.cmd.Metadata.IdempotencyKey
		if key == "" || a.keys.known(key) || a.lookedUp[key] || r.abandoned() {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return false
	}
	a.to(stLookingUp)
	h, stream, self := a.host, a.stream, a.self
	h.goIO(func() {
		ctx, cancel := h.ioContext()
		defer cancel()
		m := &lookupDoneMsg{found: map[string][]journal.Record{}}
		m.err = h.lookupKeys(ctx, stream, keys, m.found)
		if m.err == nil {
			for _, k := range keys {
				if _, ok := m.found[k]; !ok {
					m.found[k] = nil
				}
			}
		}
		h.send(self, m)
	})
	return true
}

// lookupKeys finds, through their derived event IDs, the records stored by
// earlier executions of keys.
func (h *Host) lookupKeys(ctx context.Context, stream journal.StreamID, keys []string, found map[string][]journal.Record) error {
	for _, key := range keys {
		first, err := h.cfg.Journal.ReadEvent(ctx, h.eventID(stream, key, 0))
		if errors.Is(err, journal.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("actors: looking up idempotency key %q on stream %s: %w", key, stream, err)
		}
		var recs []journal.Record
		for r, err := range h.cfg.Journal.ReadStream(ctx, stream, first.Version(stream.Tag), 0) {
			if err != nil {
				return fmt.Errorf("actors: reading the result of idempotency key %q on stream %s: %w", key, stream, err)
			}
			if r.ID != h.eventID(stream, key, len(recs)) {
				break
			}
			recs = append(recs, r)
		}
		found[key] = recs
	}
	return nil
}

func (a *streamActor) onLookupDone(m *lookupDoneMsg) {
	defer a.resume(stReady)
	if m.err != nil {
		// Without knowing whether a key ran, deciding again could run it
		// twice: fail the keyed commands that needed the lookup.
		kept := a.queue[:0]
		for _, r := range a.queue {
			if c, ok := r.(*commandReq); ok && c.cmd.Metadata.IdempotencyKey != "" && !a.keys.known(c.cmd.Metadata.IdempotencyKey) {
				a.failRequest(c, m.err)
				continue
			}
			kept = append(kept, r)
		}
		a.queue = kept
		return
	}
	if a.keys == nil {
		a.keys = &keyCache{}
	}
	for k, recs := range m.found {
		if len(recs) > 0 {
			a.keys.put(k, recs)
			continue
		}
		if a.lookedUp == nil {
			a.lookedUp = map[string]bool{}
		}
		a.lookedUp[k] = true
	}
}
