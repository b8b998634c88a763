package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/scribe-es/scribe/journal"
)

// Ghost actors: a stream without events is served without a lease.
//
// An actor first reads its stream's version without a lease (probe). When
// the stream has no events, the actor is a ghost: it holds no lease, writes
// nothing to the sessions table, and decides, against the aggregate's
// initial state, only the commands sent before that read began, so an
// answer "nothing there" is true as of a read made after the command was
// sent, never of an older one. As long as every decision appends nothing
// (an unknown account answering not-found), the ghost answers the commands
// it decided once it has stopped and left the host's registry: when Execute
// returns, the actor is gone. It stops as soon as its queue is empty and no
// request admitted to it is still on its way to its mailbox. A command sent
// after the read is served after a new read; the actor then stops taking new
// requests (they wait for it to stop and start a fresh actor), so a ghost
// lives at most two reads long.
//
// The first decision that appends events, and any reservation (Reserve),
// ends the ghost: the actor acquires the lease and recovers as any actor
// does, then appends the ghost's decided batch expecting version 0, or,
// when the stream got events in between, decides its commands again on the
// recovered state.

// probe reads the version of stream without a lease. It reports whether the
// stream has no events and when the read was sent.
func (h *Host) probe(stream journal.StreamID) (empty bool, sent time.Time, err error) {
	select {
	case h.sem <- struct{}{}:
	case <-h.ctx.Done():
		return false, time.Time{}, h.ctx.Err()
	}
	defer func() { <-h.sem }()
	ctx, cancel := h.ioContext()
	defer cancel()
	sent = time.Now()
	sum, err := h.cfg.Journal.TagSummary(ctx, stream)
	if err != nil {
		return false, sent, fmt.Errorf("actors: reading the version of stream %s: %w", stream, err)
	}
	return sum.Version == 0, sent, nil
}

// drainUnlessSent drains e, a ghost whose queue is empty, unless a request
// was admitted to it that it has not received yet (the request that spawned
// it may reach its mailbox after the read): that request is served first, and
// the ghost drains when its queue is empty again. Admission and sending
// happen under the shard lock, so no request is lost between the two.
func (h *Host) drainUnlessSent(stream journal.StreamID, e *entry) {
	s := h.shardOf(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.draining || e.queued.Load() > 0 {
		return
	}
	e.draining = true
	h.system.Root.Send(e.pid, &drainMsg{})
}

// serveGhost serves the queue of a ghost actor (one not holding a lease).
func (a *streamActor) serveGhost(c actor.Context) {
	for a.st == stGhost {
		a.trimAbandoned()
		if len(a.queue) == 0 {
			a.queue = nil
			if a.drainSeen {
				a.finish(c)
			} else {
				a.host.drainUnlessSent(a.stream, a.entry)
			}
			return
		}
		head, ok := a.queue[0].(*commandReq)
		if !ok {
			// A reservation hands out the stream's lease: take it.
			a.upgrade(nil)
			return
		}
		if !head.enqueued.Before(a.probedAt) {
			// Sent after the last read: read again. Requests sent from now
			// on wait for this actor to stop and start a fresh one.
			a.host.drain(a.stream, a.entry, &drainMsg{})
			a.activate(true)
			return
		}
		cmds := a.nextBatch(a.batchLimit())
		n := 0
		for n < len(cmds) && cmds[n].enqueued.Before(a.probedAt) {
			n++
		}
		cmds = cmds[:n]
		if len(cmds) == 0 {
			continue
		}
		a.queue = a.queue[len(cmds):]
		b := a.newBatch()
		if !a.decideInto(b, cmds) {
			// User code panicked: onPanic failed that command and put the
			// others back. Start again from a fresh read and initial state.
			a.activate(true)
			return
		}
		if len(b.events) > 0 {
			a.upgrade(b)
			return
		}
		a.answers = append(a.answers, b)
	}
}

// upgrade ends the ghost: the actor answers the commands it holds, then
// acquires the lease and recovers; carried (nil when none) is appended once
// the lease is held (pump).
func (a *streamActor) upgrade(carried *batch) {
	a.answerGhostBatches()
	a.carried = carried
	a.activate(false)
}

// answerGhostBatches answers the commands of the ghost's batches, which appended
// nothing.
func (a *streamActor) answerGhostBatches() {
	for _, b := range a.answers {
		a.settle(b, journal.AppendResult{}, nil)
	}
	a.answers = nil
}

// sendCarried appends the batch a ghost decided on version 0, now that the
// lease is held, or puts its commands back at the head of the queue to be
// decided again when the stream got events meanwhile (or the actor owes a
// catch-up).
func (a *streamActor) sendCarried() {
	b := a.carried
	a.carried = nil
	if err := a.leaseCheck(); err != nil {
		a.settle(b, journal.AppendResult{}, err)
		return
	}
	if a.st != stReady || a.version != b.startVersion {
		a.requeue(b, false, nil)
		return
	}
	a.sendBatch(b)
}

// ghostRecovered is the state of a ghost: the initial state at version 0.
func (h *Host) ghostRecovered(stream journal.StreamID, model Model) (recovered, error) {
	rec := recovered{keys: &keyCache{complete: true}}
	if model == nil {
		return rec, nil
	}
	err := safe(stream, "initial", func() error { rec.state = model.Initial(); return nil })
	return rec, err
}
