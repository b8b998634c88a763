package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

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

// Evict stops the active actor of stream, if there is one, without saving a
// snapshot of its in-memory state, and waits until it has stopped (or ctx
// ends). The actor serves the requests it has already queued first;
// requests that arrive later start a fresh actor, which recovers from the
// snapshot store and the journal. Package runtime calls it when a data
// subject is erased, so that no actor keeps, or snapshots, personal data
// decoded before the erasure. Safe for concurrent use.
func (h *Host) Evict(ctx context.Context, stream journal.StreamID) error {
	stream = stream.Normalize()
	s := h.shardOf(stream)
	s.mu.Lock()
	e := s.entries[stream]
	if e == nil {
		s.mu.Unlock()
		return nil
	}
	h.system.Root.Send(e.pid, &discardMsg{})
	if !e.draining {
		e.draining = true
		h.system.Root.Send(e.pid, &drainMsg{})
	}
	s.mu.Unlock()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: evicting the actor of stream %s: %w", stream, ctx.Err())
	}
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

// ---- snapshots, idleness, passivation of one actor ----

func (a *streamActor) maybeSnapshot() {
	h := a.host
	if a.model == nil || h.cfg.Snapshots == nil || a.discard || a.snapInFlight || !a.cacheTrusted() || !h.cfg.SnapshotPolicy.Due(a.snapVersion, a.version) {
		return
	}
	snap, ok := a.encodeSnapshot()
	if !ok {
		return
	}
	a.snapInFlight = true
	self := a.self
	h.goIO(func() {
		ctx, cancel := h.ioContext()
		defer cancel()
		err := h.saveSnapshot(ctx, snap)
		h.send(self, &snapshotDoneMsg{snap: snap, err: err})
	})
}

// saveSnapshot saves snap and then, when the snapshot policy keeps a bounded
// number of snapshots (Policy.Keep), prunes the stream's older ones. A failed
// prune is logged, not returned: the new snapshot is stored, and the next
// save prunes again.
func (h *Host) saveSnapshot(ctx context.Context, snap snapshots.Snapshot) error {
	if err := h.cfg.Snapshots.Save(ctx, snap); err != nil {
		return err
	}
	if r, ok := h.cfg.SnapshotPolicy.Retention(); ok {
		if _, err := r.Prune(ctx, h.cfg.Snapshots, snap.Stream); err != nil {
			h.cfg.Logger.Warn("pruning old snapshots failed; the next snapshot prunes again", "stream", snap.Stream.String(), "keep", r.Keep, "error", err)
		}
	}
	return nil
}

func (a *streamActor) encodeSnapshot() (snapshots.Snapshot, bool) {
	var data []byte
	st := a.state
	if err := safe(a.stream, "encode state", func() (err error) { data, err = a.model.EncodeState(st); return err }); err != nil {
		a.host.cfg.Logger.Warn("encoding a snapshot failed; continuing without it", "stream", a.stream.String(), "error", err)
		return snapshots.Snapshot{}, false
	}
	data = WithFingerprint(fingerprintOf(a.model), data)
	return snapshots.Snapshot{Stream: a.stream, Version: a.version, SchemaVersion: a.model.StateSchemaVersion(), State: data, CreatedAt: time.Now().UTC()}, true
}

func (a *streamActor) onSnapshotDone(m *snapshotDoneMsg) {
	a.snapInFlight = false
	if m.err != nil {
		a.host.cfg.Logger.Warn("saving a snapshot failed", "stream", a.stream.String(), "version", m.snap.Version, "error", m.err)
		return
	}
	if m.snap.Version > a.snapVersion {
		a.snapVersion = m.snap.Version
	}
	// Appends that settled while this save was in flight found it busy and
	// saved nothing: the newest state is saved now if the policy says so.
	a.maybeSnapshot()
}

// onIdle runs when the idle timer fires: it passivates an actor that
// received nothing for IdleTimeout and has nothing in progress, and re-arms
// the timer otherwise.
func (a *streamActor) onIdle() {
	if a.drainSeen || a.failErr != nil || a.st == stStopped {
		return
	}
	timeout := a.host.cfg.IdleTimeout
	if quiet := time.Since(a.lastActive); quiet < timeout {
		a.idleTimer.Reset(timeout - quiet)
		return
	}
	if !a.st.io() && a.st != stReserved && len(a.queue) == 0 && a.open == nil && !a.snapInFlight {
		a.host.drain(a.stream, a.entry, &drainMsg{})
		return
	}
	a.idleTimer.Reset(timeout)
}

// finish runs the passivation I/O (snapshot if due, release) and stops.
func (a *streamActor) finish(c actor.Context) {
	if a.snapInFlight || a.st.io() {
		return
	}
	h := a.host
	var snap snapshots.Snapshot
	doSnap := false
	if a.st == stReady && !a.discard && a.model != nil && h.cfg.Snapshots != nil && h.cfg.SnapshotPolicy.DueOnPassivation(a.snapVersion, a.version) {
		snap, doSnap = a.encodeSnapshot()
	}
	if a.st != stFailed && a.st != stGhost {
		h.tel.passivations.Add(context.Background(), 1)
	}
	doRelease := a.leaseHeld()
	if !doSnap && !doRelease {
		a.stop(c)
		return
	}
	a.to(stPassivating)
	self, lease := a.self, a.lease
	h.goIO(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), h.cfg.RequestTimeout)
		defer cancel()
		if doSnap {
			if err := h.saveSnapshot(ctx, snap); err != nil {
				h.cfg.Logger.Warn("saving the passivation snapshot failed", "stream", snap.Stream.String(), "error", err)
			}
		}
		if doRelease {
			if err := h.cfg.Sessions.Release(ctx, lease); err != nil {
				h.cfg.Logger.Warn("releasing a stream lease failed; it lapses with the node session", "stream", lease.Stream.String(), "error", err)
			}
		}
		h.send(self, &finalDoneMsg{})
	})
}

func (a *streamActor) stop(c actor.Context) {
	if a.st == stStopped {
		return
	}
	a.to(stStopped)
	c.Stop(a.self)
}

func (a *streamActor) onStopped() {
	if a.idleTimer != nil {
		a.idleTimer.Stop()
	}
	if a.reserved != nil {
		a.reserved.timer.Stop()
		a.reserved = nil
	}
	a.host.tel.active.Add(context.Background(), -1)
	// The next actor of the stream compares the store with this (a ghost,
	// an actor that never recovered and a dropped cache hold version 0,
	// which is not kept).
	a.host.remember(a.stream, highWater{version: a.version, head: a.head})
	a.host.removed(a.stream, a.entry)
	// A ghost's answers leave after the actor: when its callers return, the
	// host holds no actor for the stream.
	a.answerGhostBatches()
}
