package actors

import "github.com/scribe-es/scribe/journal"

// Passivate asks the active actor of stream, if there is one, to passivate
// now, as if it had been idle: it serves the requests it has already
// queued, saves a snapshot if the policy says so, releases its lease and
// stops. Requests that arrive meanwhile wait and then start a fresh actor.
// It reports whether an actor was asked. The cluster mode of package
// runtime calls it for streams that moved to another member, so the new
// host acquires their leases at once. Safe for concurrent use.
func (h *Host) Passivate(stream journal.StreamID) bool {
	stream = stream.Normalize()
	s := h.shardOf(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[stream]
	if e == nil || e.draining {
		return false
	}
	e.draining = true
	h.system.Root.Send(e.pid, &drainMsg{})
	return true
}

// Streams returns the streams whose actors are active and not passivating,
// in no particular order. Safe for concurrent use.
func (h *Host) Streams() []journal.StreamID {
	var out []journal.StreamID
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		for stream, e := range s.entries {
			if !e.draining {
				out = append(out, stream)
			}
		}
		s.mu.Unlock()
	}
	return out
}
