package actors

import (
	"sync/atomic"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// SetCompletionLinger makes every completion linger of h last d unless its
// callers come back first. Call it before h runs commands.
func (h *Host) SetCompletionLinger(d time.Duration) { h.testHooks().linger = d }

// StrictStates makes h's stream actors panic on a state transition the
// table refuses (state.go). Call it before h runs commands.
func (h *Host) StrictStates() { h.testHooks().strict = true }

// testHooks returns h's hooks, creating them.
func (h *Host) testHooks() *hostHooks {
	if h.hooks == nil {
		h.hooks = &hostHooks{}
	}
	return h.hooks
}

// SkewQueueDelayClock makes h measure queue delays with a clock d ahead of
// the real one, as if every waiting command had waited d longer. Call it
// before h runs commands; skew returns the current skew's setter.
func (h *Host) SkewQueueDelayClock() (skew func(d time.Duration)) {
	var ns atomic.Int64
	h.testHooks().now = func() time.Time { return time.Now().Add(time.Duration(ns.Load())) }
	return func(d time.Duration) { ns.Store(int64(d)) }
}

// Shedding reports whether the stream's actor sheds commands by queueing
// delay, and the queue length at which it refuses them.
func (h *Host) Shedding(stream journal.StreamID) (bool, int) {
	stream = stream.Normalize()
	s := h.shardOf(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[stream]; e != nil {
		at := e.shedAt.Load()
		return at > 0, int(at)
	}
	return false, 0
}

// AppendsInline reports whether h runs the journal's Append on the stream
// actors' goroutines (journal.InlineAppender).
func (h *Host) AppendsInline() bool { return h.inlineAppend }
