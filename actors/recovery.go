package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
	"go.opentelemetry.io/otel/trace"
)

// Activation and recovery of a stream actor: acquire the lease, load the
// newest usable snapshot, replay the tail; and catch-ups after a failed append.

// activate acquires the lease and recovers; with probe, it first reads the
// stream's version without a lease and, when the stream has no events,
// makes the actor a ghost instead (ghost.go).
func (a *streamActor) activate(probe bool) {
	a.to(stActivating)
	h, stream, model, self, parent := a.host, a.stream, a.model, a.self, a.spawnedBy
	node := h.Node()
	epoch := h.StoreEpoch()
	h.goIO(func() {
		start := time.Now()
		m := &activatedMsg{epoch: epoch}
		defer func() {
			m.duration = time.Since(start)
			h.send(self, m)
		}()
		if probe {
			empty, sent, err := h.probe(stream)
			if err != nil {
				m.err = err
				return
			}
			if empty {
				m.ghost, m.probedAt = true, sent
				m.rec, m.err = h.ghostRecovered(stream, model)
				return
			}
		}
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.OpenTimeout+h.cfg.RequestTimeout)
		lease, err := h.cfg.Sessions.Acquire(ctx, node, stream, h.cfg.OpenTimeout)
		cancel()
		if err != nil {
			m.err = err
			return
		}
		m.lease = lease
		select {
		case h.sem <- struct{}{}:
		case <-h.ctx.Done():
			m.err = h.ctx.Err()
			return
		}
		defer func() { <-h.sem }()
		m.rec, m.err = h.recoverState(parent, stream, model, nil, 0)
	})
}

func (a *streamActor) onActivated(c actor.Context, m *activatedMsg) {
	if a.failErr == nil {
		// An actor that failed while activating lost its node session (the
		// only failure that reaches it then): the lease went with it.
		a.lease = m.lease
	}
	if m.err != nil {
		var err error
		switch {
		case errors.Is(m.err, journal.ErrOpenTimeout):
			err = fmt.Errorf("actors: stream %s is held by another live node; its lease was not granted within the open timeout (%s): %w", a.stream, a.host.cfg.OpenTimeout, m.err)
		case isSessionError(m.err):
			err = sessionLost(a.stream, m.err)
		case a.host.ctx.Err() != nil:
			err = fmt.Errorf("%w (activating stream %s): %w", ErrShutdown, a.stream, m.err)
		default:
			err = fmt.Errorf("actors: activating stream %s failed: %w", a.stream, m.err)
		}
		if transient(m.err) {
			a.host.logs.log(a.host.cfg.Logger, slog.LevelWarn, "stream actor activation failed: the store is unavailable", "stream", a.stream.String(), "error", err)
		} else {
			a.host.cfg.Logger.Warn("stream actor activation failed", "stream", a.stream.String(), "error", err)
		}
		if b := a.carried; b != nil {
			a.carried = nil
			a.settle(b, journal.AppendResult{}, err)
		}
		if isSessionError(m.err) {
			a.lease = journal.Lease{}
		}
		a.fail(err)
		a.resume(stFailed)
		return
	}
	a.epoch = m.epoch
	// A stream this host knew at a higher version than the store now holds
	// (its previous actor stopped: passivated, or the node session was
	// lost): the store went back in time. The state was just read from the
	// store, so only the report is left to do.
	if hw, ok := a.host.takeMark(a.stream); ok {
		diverged := hw.version == m.rec.version && hw.head != (journal.Hash{}) && m.rec.head != (journal.Hash{}) && hw.head != m.rec.head
		if hw.version > m.rec.version || diverged {
			a.host.rewound(StoreRewind{Stream: a.stream, Known: hw.version, Found: m.rec.version, KnownHead: hw.head, FoundHead: m.rec.head, Diverged: diverged, DetectedAt: time.Now()})
			a.epoch = a.host.StoreEpoch()
		}
	}
	if m.ghost {
		a.state, a.version, a.lastPos, a.head, a.snapVersion, a.keys = m.rec.state, 0, journal.Position{}, journal.Hash{}, 0, m.rec.keys
		a.probedAt = m.probedAt
		a.resume(stGhost)
		return
	}
	a.answerGhostBatches()
	a.state, a.version, a.lastPos, a.head, a.snapVersion, a.keys = m.rec.state, m.rec.version, m.rec.lastPos, m.rec.head, m.rec.snapVersion, m.rec.keys
	a.host.tel.activations.Add(context.Background(), 1)
	// Idle detection with our own timer: protoactor-go's receive timeout
	// races between its timer goroutine and the mailbox goroutine.
	h, self := a.host, a.self
	a.idleTimer = time.AfterFunc(h.cfg.IdleTimeout, func() { h.send(self, &idleCheckMsg{}) })
	a.resume(stReady)
}

// recoverState rebuilds a stream's state: from base (a tail catch-up) or, when
// base is nil, from the newest usable snapshot and the journal.
//
// snapCap, when not 0, admits only snapshots below that version (a reload
// after the store was found rewound). A catch-up that reads nothing after
// base checks the stream's summary: when the store is behind base (or holds
// another head), rec.behind reports it and nothing is adopted.
func (h *Host) recoverState(parent trace.SpanContext, stream journal.StreamID, model Model, base *recovered, snapCap uint64) (recovered, error) {
	ctx, span := h.tel.tracer.Start(trace.ContextWithSpanContext(h.ctx, parent), otelx.SpanStreamRecover,
		trace.WithAttributes(otelx.AttrStream.String(stream.String())))
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	h.tel.recoveries.Add(ctx, 1)
	rec, err := h.doRecover(ctx, h.cfg.Journal, stream, model, base, snapCap)
	if err == nil && rec.behind == nil && rec.version > 0 && rec.lastPos.IsZero() {
		// A snapshot at the stream's head left no event to read the
		// position from; a DCB reservation reports it (the append
		// condition of commands deciding from states starts there).
		sum, serr := h.cfg.Journal.TagSummary(ctx, stream)
		switch {
		case serr != nil:
			err = fmt.Errorf("actors: reading the last position of stream %s: %w", stream, serr)
		case sum.Version == rec.version:
			rec.lastPos = sum.LastPosition
		}
	}
	if err != nil {
		failed(span, err)
	}
	span.SetAttributes(otelx.AttrVersion.Int64(int64(rec.version)))
	return rec, err
}

// doRecover reads the stream from src: the host's journal, or a replica for
// a lease-free read (FoldFrom).
func (h *Host) doRecover(ctx context.Context, src journal.Journal, stream journal.StreamID, model Model, base *recovered, snapCap uint64) (recovered, error) {
	if model == nil {
		sum, err := src.TagSummary(ctx, stream)
		if err != nil {
			return recovered{}, fmt.Errorf("actors: reading the version of stream %s: %w", stream, err)
		}
		rec := recovered{version: sum.Version, lastPos: sum.LastPosition, head: sum.HeadHash}
		if base != nil && (sum.Version < base.version || (sum.Version == base.version && base.head != (journal.Hash{}) && sum.HeadHash != base.head)) {
			rec.behind = &StoreRewind{Stream: stream, Known: base.version, Found: sum.Version, KnownHead: base.head, FoundHead: sum.HeadHash,
				Diverged: sum.Version >= base.version, DetectedAt: time.Now()}
		}
		return rec, nil
	}
	var rec recovered
	if base != nil {
		rec = *base
	} else {
		rec.keys = &keyCache{}
		if err := safe(stream, "initial", func() error { rec.state = model.Initial(); return nil }); err != nil {
			return recovered{}, err
		}
		if snap, ok := h.loadSnapshot(ctx, stream, model.StateSchemaVersion(), snapCap); ok {
			var st any
			fp := fingerprintOf(model)
			data, got, shaped := stripFingerprint(fp, snap.State)
			var decodeErr error
			if shaped {
				decodeErr = safe(stream, "decode state", func() (err error) { st, err = model.DecodeState(data); return err })
			}
			switch {
			case !shaped:
				h.tel.snapshotsIgnored.Add(ctx, 1)
				h.cfg.Logger.Warn("ignoring a snapshot of another state shape (the state type changed without a new schema version, or it predates fingerprints); replaying the stream",
					"stream", stream.String(), "version", snap.Version, "fingerprint", got, "want", fp)
			case decodeErr != nil:
				h.cfg.Logger.Warn("ignoring a snapshot that does not decode; replaying the stream", "stream", stream.String(), "version", snap.Version, "error", decodeErr)
			default:
				rec.state, rec.version, rec.snapVersion = st, snap.Version, snap.Version
			}
		}
		rec.keys.complete = rec.version == 0
	}
	if rec.keys == nil {
		rec.keys = &keyCache{}
	}
	col := keyCollector{h: h, stream: stream, k: rec.keys}
	start := time.Now()
	read, viaArchive := src.ReadStream, false
	// Every record is decoded through this one variable: DecodeEvent
	// keeps no record (Model), and a pointer to the loop's own would move
	// each record to the heap, one allocation an event.
	cur := new(journal.Record)
replay:
	for r, err := range read(ctx, stream, rec.version+1, 0) {
		if err != nil {
			// No usable snapshot reaches the stream's cut (the one that did
			// was sealed for a data subject erased since: package erasure):
			// replay through the archive, where the journal has one.
			if ar, ok := src.(journal.ArchiveReader); ok && !viaArchive && errors.Is(err, journal.ErrArchived) && !errors.Is(err, journal.ErrStreamRetired) {
				h.cfg.Logger.Info("replaying a stream through the archive: no usable snapshot at or after its cut", "stream", stream.String(), "from_version", rec.version+1)
				read, viaArchive = ar.ReadStreamWithArchive, true
				goto replay
			}
			h.tel.journal.Read(ctx, time.Since(start), err)
			return rec, fmt.Errorf("actors: replaying stream %s after version %d: %w", stream, rec.version, err)
		}
		link, _ := headOf(&r, stream.Tag)
		v := link.Version
		if v != rec.version+1 {
			return rec, fmt.Errorf("actors: replaying stream %s: the journal returned version %d after %d", stream, v, rec.version)
		}
		if base != nil && v == base.version+1 && base.head != (journal.Hash{}) && link.PrevHash != base.head {
			// The store's tail does not link to the head this actor
			// knew: its history below the tail is not the one acknowledged.
			sum, _ := src.TagSummary(ctx, stream)
			return recovered{behind: &StoreRewind{Stream: stream, Known: base.version, Found: sum.Version, KnownHead: base.head, FoundHead: sum.HeadHash, Diverged: true, DetectedAt: time.Now()}}, nil
		}
		var ev any
		*cur = r
		if err := safe(stream, "decode", func() (err error) { ev, err = model.DecodeEvent(ctx, cur); return err }); err != nil {
			return rec, fmt.Errorf("actors: replaying stream %s: decoding event %s (version %d): %w", stream, r.Type, v, err)
		}
		st := rec.state
		if err := safe(stream, "evolve", func() error { st = model.Evolve(st, ev); return nil }); err != nil {
			return rec, err
		}
		rec.state, rec.version, rec.lastPos, rec.head = st, v, r.Position, link.Hash
		col.add(r)
	}
	h.tel.journal.Read(ctx, time.Since(start), nil)
	col.flush()
	if base != nil && rec.version == base.version && base.version > 0 {
		// Nothing follows the cached version: make sure the store is not
		// behind it (a failover to a standby that had not received it).
		rw, err := h.checkStore(ctx, src, stream, base.version, base.head)
		if err != nil {
			return rec, fmt.Errorf("actors: reading the version of stream %s: %w", stream, err)
		}
		if rw != nil {
			return recovered{behind: rw}, nil
		}
	}
	return rec, nil
}

// loadSnapshot returns the newest snapshot of stream stamped with schema.
// With snapCap not 0, only snapshots below version snapCap are used.
func (h *Host) loadSnapshot(ctx context.Context, stream journal.StreamID, schema int, snapCap uint64) (snapshots.Snapshot, bool) {
	store := h.cfg.Snapshots
	if store == nil || snapCap == 1 {
		return snapshots.Snapshot{}, false
	}
	limit := uint64(math.MaxUint64)
	if snapCap > 0 {
		limit = snapCap - 1
	}
	s, err := store.Load(ctx, stream, limit)
	if err != nil {
		if !errors.Is(err, snapshots.ErrNotFound) {
			h.cfg.Logger.Warn("loading a snapshot failed; replaying the stream", "stream", stream.String(), "error", err)
		}
		return snapshots.Snapshot{}, false
	}
	if s.SchemaVersion == schema {
		return s, true
	}
	infos, err := store.List(ctx, stream)
	if err != nil {
		h.cfg.Logger.Warn("listing snapshots failed; replaying the stream", "stream", stream.String(), "error", err)
		return snapshots.Snapshot{}, false
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].SchemaVersion != schema || infos[i].Version >= s.Version {
			continue
		}
		older, err := store.Load(ctx, stream, infos[i].Version)
		if err == nil && older.SchemaVersion == schema {
			return older, true
		}
	}
	return snapshots.Snapshot{}, false
}

// startRebuild pays what an idle actor owes (stStale, stFenced, stBroken):
// it acquires the stream again when no lease is held, then catches up from
// the journal, or recovers in full when the cache was dropped.
func (a *streamActor) startRebuild() {
	h, stream, model, self := a.host, a.stream, a.model, a.self
	full, snapCap, epoch, reacquire := a.st == stBroken, a.snapCap, h.StoreEpoch(), !a.leaseHeld()
	a.to(stCatchingUp)
	var base *recovered
	if !full {
		base = &recovered{state: a.state, version: a.version, lastPos: a.lastPos, head: a.head, snapVersion: a.snapVersion, keys: a.keys}
		if reacquire {
			// A revoked lease may mean the stream moved to another database,
			// where its events have other positions: read the position of
			// the event at the version again (recoverState does when it is
			// zero), so reservations name a position of the journal that
			// now serves the stream.
			base.lastPos = journal.Position{}
		}
	}
	node := h.Node()
	h.goIO(func() {
		var lease *journal.Lease
		if reacquire {
			// The lease was found invalid (a partition move, a takeover): take the
			// stream again, where the journal now serves it, before the
			// catch-up reads it there.
			ctx, cancel := context.WithTimeout(h.ctx, h.cfg.OpenTimeout+h.cfg.RequestTimeout)
			l, err := h.cfg.Sessions.Acquire(ctx, node, stream, h.cfg.OpenTimeout)
			cancel()
			if err != nil {
				h.send(self, &rebuiltMsg{full: full, err: err, epoch: epoch, reacquire: true})
				return
			}
			lease = &l
		}
		if full {
			select {
			case h.sem <- struct{}{}:
				defer func() { <-h.sem }()
			case <-h.ctx.Done():
				h.send(self, &rebuiltMsg{full: full, err: h.ctx.Err(), epoch: epoch})
				return
			}
		}
		rec, err := h.recoverState(trace.SpanContext{}, stream, model, base, snapCap)
		h.send(self, &rebuiltMsg{full: full, rec: rec, err: err, epoch: epoch, reacquire: reacquire, lease: lease})
	})
}

func (a *streamActor) onRebuilt(m *rebuiltMsg) {
	if m.reacquire {
		if m.lease == nil {
			// The stream could not be taken again: another live node holds
			// it, or the store refuses. Stop, as an activation that failed
			// would; the next request activates the stream anew.
			err := fmt.Errorf("actors: stream %s lost its lease and could not acquire it again: %w", a.stream, m.err)
			if errors.Is(m.err, journal.ErrOpenTimeout) {
				err = fmt.Errorf("actors: stream %s lost its lease and is held by another live node (not granted within the open timeout %s): %w", a.stream, a.host.cfg.OpenTimeout, m.err)
			}
			a.host.cfg.Logger.Warn("stream actor could not re-acquire its revoked lease; stopping", "stream", a.stream.String(), "error", m.err)
			a.fail(err)
			a.resume(stFailed)
			return
		}
		if a.failErr == nil {
			// (A failure while catching up is the node session's loss: the
			// new lease went with it.)
			a.lease = *m.lease
		}
		a.host.cfg.Logger.Info("stream actor re-acquired its revoked lease", "stream", a.stream.String(), "epoch", m.lease.Epoch)
	}
	if m.err != nil {
		// Serving on a state that may be wrong is never an option: fail the
		// waiting requests and try again when the next one arrives.
		err := fmt.Errorf("actors: stream %s could not reload its state from the journal: %w", a.stream, m.err)
		if transient(m.err) {
			a.host.logs.log(a.host.cfg.Logger, slog.LevelWarn, "stream actor reload failed: the store is unavailable; retrying at the next request", "stream", a.stream.String(), "error", m.err)
		} else {
			a.host.cfg.Logger.Error("stream actor reload failed", "stream", a.stream.String(), "error", m.err)
		}
		a.failQueue(err)
		if m.full {
			a.resume(stBroken)
		} else {
			a.resume(stStale)
		}
		return
	}
	if m.rec.behind != nil {
		// The store went back in time: report it, drop the cache and reload
		// in full before serving again (the queued commands wait).
		a.onRewound(*m.rec.behind)
		a.resume(stBroken)
		return
	}
	a.state, a.version, a.lastPos, a.head, a.keys = m.rec.state, m.rec.version, m.rec.lastPos, m.rec.head, m.rec.keys
	if m.full {
		a.snapVersion = m.rec.snapVersion
		a.snapCap = 0
	}
	a.epoch = m.epoch
	a.resume(stReady)
}

// Fold returns a stream's state as its actor would recover it — the newest
// usable snapshot, then the journal's events after it, decoded and evolved
// with model — without the stream's actor, lease or session: it reads only,
// creates nothing, and may run on any node. version is 0 (and state model's
// Initial) for a stream without events; last is the position of the newest
// event folded (zero when none was read after the snapshot).
func (h *Host) Fold(ctx context.Context, stream journal.StreamID, model Model) (state any, version uint64, last journal.Position, err error) {
	return h.FoldFrom(ctx, h.cfg.Journal, stream, model)
}

// FoldFrom is Fold reading the stream's events from src instead of the
// host's journal (a read replica: its events, the host's snapshots). The
// state is as current as src.
func (h *Host) FoldFrom(ctx context.Context, src journal.Journal, stream journal.StreamID, model Model) (state any, version uint64, last journal.Position, err error) {
	if model == nil {
		return nil, 0, journal.Position{}, fmt.Errorf("actors: Fold of stream %s: no aggregate owns its tag group", stream)
	}
	rec, err := h.doRecover(ctx, src, stream.Normalize(), model, nil, 0)
	if err != nil {
		return nil, 0, journal.Position{}, err
	}
	return rec.state, rec.version, rec.lastPos, nil
}
