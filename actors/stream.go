package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

type busyKind uint8

const (
	notBusy busyKind = iota
	busyActivating
	busyAppend
	busyLookup
	busyRebuild
	busyFinal
)

// maxSpanLinks caps the links an append span carries to the batch's commands.
const maxSpanLinks = 128

// streamActor is the single writer of one stream. All fields are touched only
// from Receive (the actor's turn), except that I/O goroutines receive copies
// or exclusive use of what they need while the actor is busy with them.
type streamActor struct {
	host   *Host
	stream journal.StreamID
	entry  *entry
	model  Model
	self   *actor.PID
	// spawnedBy is the span of the request that spawned the actor: the parent
	// of the activation's recovery span.
	spawnedBy trace.SpanContext

	busy         busyKind
	ready        bool
	lease        journal.Lease
	leased       bool
	state        any
	version      uint64
	lastPos      journal.Position // position of the event at version (zero if unknown)
	snapVersion  uint64
	snapInFlight bool
	keys         *keyCache
	queue        []any // *commandReq and *reserveReq in arrival order
	reserved     *heldReservation
	// stale: catch up from the journal (tail replay) before deciding again;
	// rebuild: recover from scratch (after a panic in user code).
	stale    bool
	rebuild  bool
	lookedUp map[string]bool // keys the journal does not hold, for the head batch

	idleTimer  *time.Timer
	lastActive time.Time

	drainSeen     bool
	failErr       error
	sessionFailed bool
	stopping      bool
}

type heldReservation struct {
	id    uint64
	timer *time.Timer
}

// batch is one group commit: the commands decided together and their events.
type batch struct {
	startVersion uint64
	entries      []batchEntry
	events       []journal.Event
	state        any
}

type batchEntry struct {
	req      *commandReq
	from, to int // the command's events in batch.events
	state    any
	err      error // domain or encoding error: the command appends nothing
	domain   bool
	dupOf    int // ≥ 0: the same idempotency key as an earlier entry of the batch
}

// Receive implements actor.Actor.
func (a *streamActor) Receive(c actor.Context) {
	msg := c.Message()
	if _, idle := msg.(*idleCheckMsg); !idle {
		a.lastActive = time.Now()
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.self = c.Self()
		a.host.tel.active.Add(context.Background(), 1)
		a.activate()
	case *commandReq:
		a.enqueue(m)
	case *reserveReq:
		a.enqueue(m)
	case *activatedMsg:
		a.onActivated(c, m)
	case *appendDoneMsg:
		a.onAppendDone(m)
	case *lookupDoneMsg:
		a.onLookupDone(m)
	case *rebuiltMsg:
		a.onRebuilt(m)
	case *snapshotDoneMsg:
		a.onSnapshotDone(m)
	case *confirmMsg:
		a.onConfirm(m)
	case *cancelMsg:
		a.onCancel(m)
	case *reservationExpiredMsg:
		a.onReservationExpired(m)
	case *drainMsg:
		a.drainSeen = true
		if m.err != nil && a.failErr == nil {
			a.fail(m.err, true)
		}
	case *finalDoneMsg:
		a.busy = notBusy
		a.stop(c)
		return
	case *idleCheckMsg:
		a.onIdle()
		return
	case *actor.Stopped:
		a.onStopped()
		return
	default:
		return
	}
	a.pump(c)
}

func (a *streamActor) enqueue(r any) {
	if a.failErr != nil {
		a.failRequest(r, a.failErr)
		return
	}
	a.queue = append(a.queue, r)
}

// pump starts the next piece of work when the actor is free.
func (a *streamActor) pump(c actor.Context) {
	for !a.stopping && a.busy == notBusy {
		if a.failErr != nil {
			a.failQueue(a.failErr)
			if a.drainSeen {
				a.finish(c)
			}
			return
		}
		if !a.ready || a.reserved != nil {
			return
		}
		a.trimAbandoned()
		if len(a.queue) == 0 {
			a.queue = nil
			if a.drainSeen {
				a.finish(c)
			}
			return
		}
		if a.stale || a.rebuild {
			a.startRebuild()
			return
		}
		switch r := a.queue[0].(type) {
		case *reserveReq:
			a.queue = a.queue[1:]
			a.grant(r)
		case *commandReq:
			n := 0
			for n < len(a.queue) && n < a.host.cfg.MaxBatch {
				if _, ok := a.queue[n].(*commandReq); !ok {
					break
				}
				n++
			}
			cmds := make([]*commandReq, n)
			for i := range cmds {
				cmds[i] = a.queue[i].(*commandReq)
			}
			if a.startLookup(cmds) {
				return
			}
			a.queue = a.queue[n:]
			a.decide(cmds)
		}
	}
}

func (a *streamActor) trimAbandoned() {
	i := 0
	for i < len(a.queue) {
		switch r := a.queue[i].(type) {
		case *commandReq:
			if !r.abandoned() {
				a.queue = a.queue[i:]
				return
			}
			a.host.tel.commands.Add(context.Background(), 1, a.host.tel.outcomeOpts[OutcomeCanceled])
		case *reserveReq:
			if !r.abandoned() {
				a.queue = a.queue[i:]
				return
			}
		}
		i++
	}
	a.queue = a.queue[:0]
}

func (a *streamActor) failRequest(r any, err error) {
	switch r := r.(type) {
	case *commandReq:
		if r.take() {
			a.reply(r, Result{}, err, OutcomeError)
		}
	case *reserveReq:
		if r.take() {
			r.reply <- reserveReply{err: err}
		}
	}
}

func (a *streamActor) failQueue(err error) {
	for _, r := range a.queue {
		a.failRequest(r, err)
	}
	a.queue = nil
}

// fail stops the actor after its current I/O: pending and future requests
// get err. sessionFailed means the lease is gone (nothing to release).
func (a *streamActor) fail(err error, sessionFailed bool) {
	a.failErr = err
	a.sessionFailed = a.sessionFailed || sessionFailed
	if a.reserved != nil {
		a.reserved.timer.Stop()
		a.reserved = nil
	}
	a.failQueue(err)
	if !a.drainSeen {
		a.host.drain(a.stream, a.entry, &drainMsg{})
	}
}

func (a *streamActor) reply(r *commandReq, res Result, err error, outcome string) {
	a.host.tel.commands.Add(context.Background(), 1, a.host.tel.outcomeOpts[outcome])
	r.reply <- commandReply{res: res, err: err}
}

// safe runs user code, turning a panic into a *PanicError.
func safe(stream journal.StreamID, phase string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Stream: stream, Phase: phase, Value: v, Stack: debug.Stack()}
		}
	}()
	return fn()
}

// ---- activation and recovery ----

func (a *streamActor) activate() {
	a.busy = busyActivating
	h, stream, model, self, parent := a.host, a.stream, a.model, a.self, a.spawnedBy
	node := h.Node()
	h.goIO(func() {
		start := time.Now()
		m := &activatedMsg{}
		defer func() {
			m.duration = time.Since(start)
			h.send(self, m)
		}()
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.OpenTimeout+h.cfg.RequestTimeout)
		lease, err := h.cfg.Sessions.Acquire(ctx, node, stream, h.cfg.OpenTimeout)
		cancel()
		if err != nil {
			m.err = err
			return
		}
		m.lease, m.leased = lease, true
		select {
		case h.sem <- struct{}{}:
		case <-h.ctx.Done():
			m.err = h.ctx.Err()
			return
		}
		defer func() { <-h.sem }()
		m.rec, m.err = h.recoverState(parent, stream, model, nil)
	})
}

func (a *streamActor) onActivated(c actor.Context, m *activatedMsg) {
	a.busy = notBusy
	if m.leased {
		a.lease, a.leased = m.lease, true
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
		a.host.cfg.Logger.Warn("stream actor activation failed", "stream", a.stream.String(), "error", err)
		a.fail(err, isSessionError(m.err))
		return
	}
	a.state, a.version, a.lastPos, a.snapVersion, a.keys = m.rec.state, m.rec.version, m.rec.lastPos, m.rec.snapVersion, m.rec.keys
	a.ready = true
	a.host.tel.activations.Add(context.Background(), 1)
	// Idle detection with our own timer: protoactor-go's receive timeout
	// races between its timer goroutine and the mailbox goroutine.
	h, self := a.host, a.self
	a.idleTimer = time.AfterFunc(h.cfg.IdleTimeout, func() { h.send(self, &idleCheckMsg{}) })
}

// recoverState rebuilds a stream's state: from base (a tail catch-up) or, when
// base is nil, from the newest usable snapshot and the journal.
func (h *Host) recoverState(parent trace.SpanContext, stream journal.StreamID, model Model, base *recovered) (recovered, error) {
	ctx, span := h.tel.tracer.Start(trace.ContextWithSpanContext(h.ctx, parent), SpanRecovery,
		trace.WithAttributes(AttrStream.String(stream.String())))
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	h.tel.recoveries.Add(ctx, 1)
	rec, err := h.doRecover(ctx, stream, model, base)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(AttrVersion.Int64(int64(rec.version)))
	return rec, err
}

func (h *Host) doRecover(ctx context.Context, stream journal.StreamID, model Model, base *recovered) (recovered, error) {
	if model == nil {
		sum, err := h.cfg.Journal.TagSummary(ctx, stream)
		if err != nil {
			return recovered{}, fmt.Errorf("actors: reading the version of stream %s: %w", stream, err)
		}
		return recovered{version: sum.Version, lastPos: sum.LastPosition}, nil
	}
	var rec recovered
	if base != nil {
		rec = *base
	} else {
		rec.keys = &keyCache{}
		if err := safe(stream, "initial", func() error { rec.state = model.Initial(); return nil }); err != nil {
			return recovered{}, err
		}
		if snap, ok := h.loadSnapshot(ctx, stream, model.StateSchemaVersion()); ok {
			var st any
			err := safe(stream, "decode state", func() (err error) { st, err = model.DecodeState(snap.State); return err })
			if err != nil {
				h.cfg.Logger.Warn("ignoring a snapshot that does not decode; replaying the stream", "stream", stream.String(), "version", snap.Version, "error", err)
			} else {
				rec.state, rec.version, rec.snapVersion = st, snap.Version, snap.Version
			}
		}
		rec.keys.complete = rec.version == 0
	}
	if rec.keys == nil {
		rec.keys = &keyCache{}
	}
	col := keyCollector{h: h, stream: stream, k: rec.keys}
	for r, err := range h.cfg.Journal.ReadStream(ctx, stream, rec.version+1, 0) {
		if err != nil {
			return rec, fmt.Errorf("actors: replaying stream %s after version %d: %w", stream, rec.version, err)
		}
		v := r.Version(stream.Tag)
		if v != rec.version+1 {
			return rec, fmt.Errorf("actors: replaying stream %s: the journal returned version %d after %d", stream, v, rec.version)
		}
		var ev any
		if err := safe(stream, "decode", func() (err error) { ev, err = model.DecodeEvent(&r); return err }); err != nil {
			return rec, fmt.Errorf("actors: replaying stream %s: decoding event %s (version %d): %w", stream, r.Type, v, err)
		}
		st := rec.state
		if err := safe(stream, "evolve", func() error { st = model.Evolve(st, ev); return nil }); err != nil {
			return rec, err
		}
		rec.state, rec.version, rec.lastPos = st, v, r.Position
		col.add(r)
	}
	col.flush()
	return rec, nil
}

// loadSnapshot returns the newest snapshot of stream stamped with schema.
func (h *Host) loadSnapshot(ctx context.Context, stream journal.StreamID, schema int) (snapshots.Snapshot, bool) {
	store := h.cfg.Snapshots
	if store == nil {
		return snapshots.Snapshot{}, false
	}
	s, err := store.Load(ctx, stream, math.MaxUint64)
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

func (a *streamActor) startRebuild() {
	a.busy = busyRebuild
	h, stream, model, self := a.host, a.stream, a.model, a.self
	full := a.rebuild
	var base *recovered
	if !full {
		base = &recovered{state: a.state, version: a.version, lastPos: a.lastPos, snapVersion: a.snapVersion, keys: a.keys}
	}
	h.goIO(func() {
		if full {
			select {
			case h.sem <- struct{}{}:
				defer func() { <-h.sem }()
			case <-h.ctx.Done():
				h.send(self, &rebuiltMsg{full: full, err: h.ctx.Err()})
				return
			}
		}
		rec, err := h.recoverState(trace.SpanContext{}, stream, model, base)
		h.send(self, &rebuiltMsg{full: full, rec: rec, err: err})
	})
}

func (a *streamActor) onRebuilt(m *rebuiltMsg) {
	a.busy = notBusy
	if m.err != nil {
		// Serving on a state that may be wrong is never an option: fail the
		// waiting requests and try again when the next one arrives.
		err := fmt.Errorf("actors: stream %s could not reload its state from the journal: %w", a.stream, m.err)
		a.host.cfg.Logger.Error("stream actor reload failed", "stream", a.stream.String(), "error", m.err)
		a.failQueue(err)
		return
	}
	a.state, a.version, a.lastPos, a.keys = m.rec.state, m.rec.version, m.rec.lastPos, m.rec.keys
	if m.full {
		a.snapVersion = m.rec.snapVersion
	}
	a.stale, a.rebuild = false, false
}

// ---- idempotency lookups ----

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
	a.busy = busyLookup
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
	a.busy = notBusy
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

// ---- deciding and group commit ----

func (a *streamActor) decide(cmds []*commandReq) {
	h := a.host
	now := time.Now()
	b := &batch{startVersion: a.version}
	working := a.state
	var inBatch map[string]int
	for i, r := range cmds {
		if r.abandoned() {
			h.tel.commands.Add(context.Background(), 1, h.tel.outcomeOpts[OutcomeCanceled])
			continue
		}
		if err := r.ctx.Err(); err != nil {
			// Not decided: the caller learns it was not executed.
			r.abandon()
			a.reply(r, Result{}, err, OutcomeCanceled)
			continue
		}
		if !r.take() {
			continue
		}
		r.mailboxWait = now.Sub(r.enqueued)
		key := r.cmd.Metadata.IdempotencyKey
		if key != "" {
			if recs, ok := a.keys.get(key); ok {
				a.replyDuplicate(r, recs)
				continue
			}
			if j, ok := inBatch[key]; ok {
				b.entries = append(b.entries, batchEntry{req: r, dupOf: j})
				continue
			}
		}
		if a.model == nil {
			a.reply(r, Result{}, fmt.Errorf("%w: stream %s (tag group %q); register an aggregate named %q to execute commands on it", ErrNoAggregate, a.stream, a.stream.Tag.Group(), a.stream.Tag.Group()), OutcomeError)
			continue
		}
		evs, err := a.decideOne(r, working)
		var pe *PanicError
		if errors.As(err, &pe) {
			a.onPanic(r, pe, b, cmds[i+1:])
			return
		}
		if err != nil {
			b.entries = append(b.entries, batchEntry{req: r, err: err, domain: true, dupOf: -1})
			continue
		}
		st := working
		jevs := make([]journal.Event, 0, len(evs))
		var sc trace.SpanContext
		if len(evs) > 0 && r.cmd.Metadata.TraceParent == "" {
			sc = trace.SpanContextFromContext(r.ctx)
		}
		var encErr error
		for j, ev := range evs {
			var je journal.Event
			if err := safe(a.stream, "encode", func() (err error) { je, err = a.model.EncodeEvent(ev); return err }); err != nil {
				if errors.As(err, &pe) {
					a.onPanic(r, pe, b, cmds[i+1:])
					return
				}
				encErr = fmt.Errorf("actors: encoding event %d (%T) of a command on stream %s: %w", j, ev, a.stream, err)
				break
			}
			if err := safe(a.stream, "evolve", func() error { st = a.model.Evolve(st, ev); return nil }); err != nil {
				errors.As(err, &pe)
				a.onPanic(r, pe, b, cmds[i+1:])
				return
			}
			a.stamp(&je, r, key, j, now, sc)
			jevs = append(jevs, je)
		}
		if encErr != nil {
			b.entries = append(b.entries, batchEntry{req: r, err: encErr, dupOf: -1})
			continue
		}
		working = st
		if key != "" && len(jevs) > 0 {
			if inBatch == nil {
				inBatch = map[string]int{}
			}
			inBatch[key] = len(b.entries)
		}
		b.entries = append(b.entries, batchEntry{req: r, from: len(b.events), to: len(b.events) + len(jevs), state: st, dupOf: -1})
		b.events = append(b.events, jevs...)
	}
	a.lookedUp = nil
	b.state = working
	if len(b.events) == 0 {
		a.settle(b, journal.AppendResult{}, nil)
		return
	}
	a.startAppend(b)
}

func (a *streamActor) decideOne(r *commandReq, state any) (evs []any, err error) {
	if !a.host.tel.tracing {
		err = safe(a.stream, "decide", func() (err error) { evs, err = a.model.Decide(state, r.cmd.Payload); return err })
		return evs, err
	}
	_, span := a.host.tel.tracer.Start(r.ctx, SpanDecide, trace.WithAttributes(
		AttrStream.String(a.stream.String()), AttrAggregate.String(a.model.Name()), AttrVersion.Int64(int64(a.version))))
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(AttrEvents.Int(len(evs)))
		span.End()
	}()
	err = safe(a.stream, "decide", func() (err error) { evs, err = a.model.Decide(state, r.cmd.Payload); return err })
	return evs, err
}

// stamp sets the actor-owned fields of a decided event.
func (a *streamActor) stamp(je *journal.Event, r *commandReq, key string, index int, now time.Time, sc trace.SpanContext) {
	if key != "" {
		je.ID = a.host.eventID(a.stream, key, index)
	} else {
		je.ID = journal.NewEventID()
	}
	if !je.HasTag(a.stream.Tag) {
		tags := make([]journal.Tag, 0, len(je.Tags)+1)
		tags = append(tags, a.stream.Tag)
		je.Tags = append(tags, je.Tags...)
	}
	md := r.cmd.Metadata
	md.Partition = a.stream.Partition
	if md.CreatedAt.IsZero() {
		md.CreatedAt = now.UTC()
	}
	if sc.IsValid() && md.TraceParent == "" {
		md.TraceParent = "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
		md.TraceState = sc.TraceState().String()
	}
	je.Metadata = md
}

// onPanic fails the command whose user code panicked, puts the rest of the
// batch (undecided, never appended) back at the head of the queue and
// rebuilds the state from the journal before serving again.
func (a *streamActor) onPanic(r *commandReq, pe *PanicError, b *batch, rest []*commandReq) {
	a.host.cfg.Logger.Error("user code panicked; failing the command and rebuilding the stream's state", "stream", a.stream.String(), "phase", pe.Phase, "panic", fmt.Sprint(pe.Value))
	a.reply(r, Result{}, pe, OutcomeError)
	requeue := make([]any, 0, len(b.entries)+len(rest)+len(a.queue))
	for _, e := range b.entries {
		requeue = append(requeue, e.req)
	}
	for _, c := range rest {
		requeue = append(requeue, c)
	}
	a.queue = append(requeue, a.queue...)
	a.lookedUp = nil
	a.rebuild = true
}

func (a *streamActor) replyDuplicate(r *commandReq, recs []journal.Record) {
	res := Result{Records: recs, State: a.state, Duplicate: true}
	if len(recs) > 0 {
		res.Version = recs[len(recs)-1].Version(a.stream.Tag)
	}
	a.reply(r, res, nil, OutcomeDuplicate)
}

func (a *streamActor) startAppend(b *batch) {
	a.busy = busyAppend
	h, stream, self, lease := a.host, a.stream, a.self, a.lease
	expect := map[journal.Tag]uint64{stream.Tag: a.version}
	var parent trace.SpanContext
	var links []trace.Link
	commands := 0
	for _, e := range b.entries {
		if e.to == e.from {
			continue
		}
		commands++
		if !h.tel.tracing {
			continue
		}
		sc := trace.SpanContextFromContext(e.req.ctx)
		if !parent.IsValid() {
			parent = sc
		} else if sc.IsValid() && len(links) < maxSpanLinks {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	h.tel.batchSize.Record(context.Background(), int64(commands))
	events := b.events
	h.goIO(func() {
		ctx, cancel := h.ioContext()
		defer cancel()
		span := noSpan()
		if h.tel.tracing {
			ctx, span = h.tel.tracer.Start(trace.ContextWithSpanContext(ctx, parent), SpanAppend,
				trace.WithLinks(links...),
				trace.WithAttributes(AttrStream.String(stream.String()), AttrBatchSize.Int(commands), AttrEvents.Int(len(events))))
		}
		start := time.Now()
		res, err := h.cfg.Journal.Append(ctx, events, journal.AppendOptions{Expect: expect, Leases: []journal.Lease{lease}})
		h.tel.appendLatency.Record(ctx, time.Since(start).Seconds())
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		h.send(self, &appendDoneMsg{b: b, res: res, err: err})
	})
}

func (a *streamActor) onAppendDone(m *appendDoneMsg) {
	a.busy = notBusy
	b := m.b
	if m.err != nil {
		if isSessionError(m.err) {
			a.host.tel.fenceRejections.Add(context.Background(), 1)
			err := sessionLost(a.stream, m.err)
			a.host.cfg.Logger.Warn("append fenced: the stream's lease was lost; stopping the actor", "stream", a.stream.String(), "error", m.err)
			a.settle(b, journal.AppendResult{}, err)
			a.fail(err, true)
			return
		}
		// The journal may have moved (another writer, or an unknown outcome):
		// catch up before deciding again.
		a.stale = true
		a.settle(b, journal.AppendResult{}, fmt.Errorf("actors: appending %d events to stream %s failed; the commands of this batch were not acknowledged: %w", len(b.events), a.stream, m.err))
		return
	}
	if len(m.res.Records) != len(b.events) || m.res.Duplicate {
		a.stale = true
	}
	a.settle(b, m.res, nil)
}

// settle replies to every command of a batch: its records (after a successful
// append), its domain error, or the batch's failure.
func (a *streamActor) settle(b *batch, res journal.AppendResult, failure error) {
	tag := a.stream.Tag
	ok := failure == nil && len(res.Records) == len(b.events)
	if ok && len(res.Records) > 0 {
		first, last := res.Records[0].Version(tag), res.Records[len(res.Records)-1].Version(tag)
		if res.Duplicate || first != b.startVersion+1 || last != b.startVersion+uint64(len(b.events)) {
			// Not the append this actor decided on top of its version: adopt
			// nothing and catch up from the journal.
			a.stale = true
		} else {
			a.state, a.version, a.lastPos = b.state, last, res.Records[len(res.Records)-1].Position
		}
	}
	for i := range b.entries {
		e := &b.entries[i]
		switch {
		case failure != nil:
			a.reply(e.req, Result{}, failure, OutcomeError)
		case e.err != nil:
			outcome := OutcomeError
			if e.domain {
				outcome = OutcomeDomainError
			}
			a.reply(e.req, Result{}, e.err, outcome)
		case e.dupOf >= 0:
			o := b.entries[e.dupOf]
			if !ok {
				a.reply(e.req, Result{}, fmt.Errorf("actors: stream %s: the journal returned %d records for %d events", a.stream, len(res.Records), len(b.events)), OutcomeError)
				continue
			}
			a.replyDuplicate(e.req, res.Records[o.from:o.to])
		case e.to == e.from:
			a.reply(e.req, Result{Version: b.startVersion + uint64(e.to), State: e.stateOr(a.state)}, nil, OutcomeOK)
		case !ok:
			a.reply(e.req, Result{}, fmt.Errorf("actors: stream %s: the journal returned %d records for %d events", a.stream, len(res.Records), len(b.events)), OutcomeError)
		default:
			recs := res.Records[e.from:e.to]
			if key := e.req.cmd.Metadata.IdempotencyKey; key != "" {
				if a.keys == nil {
					a.keys = &keyCache{}
				}
				a.keys.put(key, recs)
			}
			res := Result{Records: recs, Version: recs[len(recs)-1].Version(tag), State: e.state, Duplicate: res.Duplicate}
			outcome := OutcomeOK
			if res.Duplicate {
				outcome = OutcomeDuplicate
			}
			a.reply(e.req, res, nil, outcome)
		}
	}
	if ok && len(res.Records) > 0 {
		a.maybeSnapshot()
	}
}

func (e *batchEntry) stateOr(s any) any {
	if e.state != nil {
		return e.state
	}
	return s
}

// ---- snapshots, idleness, passivation ----

func (a *streamActor) maybeSnapshot() {
	h := a.host
	if a.model == nil || h.cfg.Snapshots == nil || a.snapInFlight || a.stale || a.rebuild || !h.cfg.SnapshotPolicy.Due(a.snapVersion, a.version) {
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
		err := h.cfg.Snapshots.Save(ctx, snap)
		h.send(self, &snapshotDoneMsg{snap: snap, err: err})
	})
}

func (a *streamActor) encodeSnapshot() (snapshots.Snapshot, bool) {
	var data []byte
	st := a.state
	if err := safe(a.stream, "encode state", func() (err error) { data, err = a.model.EncodeState(st); return err }); err != nil {
		a.host.cfg.Logger.Warn("encoding a snapshot failed; continuing without it", "stream", a.stream.String(), "error", err)
		return snapshots.Snapshot{}, false
	}
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
}

// onIdle runs when the idle timer fires: it passivates an actor that
// received nothing for IdleTimeout and has nothing in progress, and re-arms
// the timer otherwise.
func (a *streamActor) onIdle() {
	if a.drainSeen || a.failErr != nil || a.stopping {
		return
	}
	timeout := a.host.cfg.IdleTimeout
	if quiet := time.Since(a.lastActive); quiet < timeout {
		a.idleTimer.Reset(timeout - quiet)
		return
	}
	if a.busy == notBusy && len(a.queue) == 0 && a.reserved == nil && !a.snapInFlight {
		a.host.drain(a.stream, a.entry, &drainMsg{})
		return
	}
	a.idleTimer.Reset(timeout)
}

// finish runs the passivation I/O (snapshot if due, release) and stops.
func (a *streamActor) finish(c actor.Context) {
	if a.snapInFlight || a.busy != notBusy {
		return
	}
	h := a.host
	var snap snapshots.Snapshot
	doSnap := false
	if a.failErr == nil && a.ready && !a.stale && !a.rebuild && a.model != nil && h.cfg.Snapshots != nil && h.cfg.SnapshotPolicy.DueOnPassivation(a.snapVersion, a.version) {
		snap, doSnap = a.encodeSnapshot()
	}
	doRelease := a.leased && !a.sessionFailed
	if !doSnap && !doRelease {
		a.stop(c)
		return
	}
	a.busy = busyFinal
	self, lease := a.self, a.lease
	h.goIO(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), h.cfg.RequestTimeout)
		defer cancel()
		if doSnap {
			if err := h.cfg.Snapshots.Save(ctx, snap); err != nil {
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
	if a.stopping {
		return
	}
	a.stopping = true
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
	if a.failErr == nil && a.ready {
		a.host.tel.passivations.Add(context.Background(), 1)
	}
	a.host.removed(a.stream, a.entry)
}
