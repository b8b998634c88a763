package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	otelx "github.com/scribe-es/scribe/internal/telemetry"
	"github.com/scribe-es/scribe/internal/usercode"
	"github.com/scribe-es/scribe/journal"
	"go.opentelemetry.io/otel/trace"
)

// Deciding and group commit.

func (a *streamActor) decide(cmds []*commandReq) {
	b := a.newBatch()
	if !a.decideInto(b, cmds) {
		return
	}
	a.sendBatch(b)
}

// newBatch starts a batch on top of the confirmed state, or, while an append
// is in flight, on top of the state that append leads to (pipelining: its
// commands are decided now and appended after it; see decideAhead).
func (a *streamActor) newBatch() *batch {
	b := &batch{startVersion: a.version, state: a.state}
	if f := a.inflight; f != nil {
		b.startVersion, b.state = f.startVersion+uint64(len(f.events)), f.state
	}
	b.entries = b.first[:0]
	return b
}

// sendBatch appends b, or settles it at once when it decided no events.
func (a *streamActor) sendBatch(b *batch) {
	a.observeQueueDelay(b)
	if len(b.events) == 0 {
		a.settle(b, journal.AppendResult{}, nil)
		return
	}
	a.startAppend(b)
}

// decideInto decides cmds in order on top of b's state and adds them to b.
// It reports false when user code panicked: onPanic then put b's commands
// and the rest of cmds back at the head of the queue, undecided.
func (a *streamActor) decideInto(b *batch, cmds []*commandReq) bool {
	h := a.host
	now := time.Now()
	working := b.state
	b.entries = slices.Grow(b.entries, len(cmds))
	for i, r := range cmds {
		if r.abandoned() {
			h.tel.commands.Add(context.Background(), 1, h.tel.outcomeOpts[otelx.OutcomeCanceled]...)
			continue
		}
		if err := r.ctx.Err(); err != nil {
			// Not decided: the caller learns it was not executed.
			r.abandon()
			a.reply(r, Result{}, err, otelx.OutcomeCanceled)
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
			if j, ok := b.keys[key]; ok {
				b.entries = append(b.entries, batchEntry{req: r, dupOf: j})
				continue
			}
		}
		if a.model == nil {
			a.reply(r, Result{}, fmt.Errorf("%w: stream %s (tag group %q); register an aggregate named %q to execute commands on it", ErrNoAggregate, a.stream, a.stream.Tag.Group(), a.stream.Tag.Group()), otelx.OutcomeError)
			continue
		}
		evs, err := a.decideOne(r, working)
		if pe := panicOf(err); pe != nil {
			a.onPanic(r, pe, b, cmds[i+1:])
			return false
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
			if err := safe(a.stream, "encode", func() (err error) { je, err = a.model.EncodeEvent(r.ctx, a.stream, ev); return err }); err != nil {
				if pe := panicOf(err); pe != nil {
					a.onPanic(r, pe, b, cmds[i+1:])
					return false
				}
				encErr = fmt.Errorf("actors: encoding event %d (%T) of a command on stream %s: %w", j, ev, a.stream, err)
				break
			}
			if err := safe(a.stream, "evolve", func() error { st = a.model.Evolve(st, ev); return nil }); err != nil {
				a.onPanic(r, panicOf(err), b, cmds[i+1:])
				return false
			}
			if foreign := foreignTags(je.Tags, a.stream.Tag); len(foreign) > 0 {
				encErr = fmt.Errorf("%w: event %d (%s) of stream %s also carries %v; an aggregate's events carry only their stream's tag: append events with several tags through a DCB command (runtime.RegisterDCB)",
					ErrForeignTags, j, je.Type, a.stream, foreign)
				break
			}
			a.stamp(&je, r, key, j, now, sc)
			jevs = append(jevs, je)
		}
		if encErr != nil {
			b.entries = append(b.entries, batchEntry{req: r, err: encErr, dupOf: -1})
			continue
		}
		var prep journal.Prepared
		if len(jevs) > 0 {
			// Validated alone, against the journal's own limits, before it
			// joins the batch: an invalid command fails by itself. The
			// journal does not validate it again (AppendOptions.Prepared).
			var err error
			if prep, err = journal.Prepare(jevs, h.limits); err != nil {
				b.entries = append(b.entries, batchEntry{req: r, dupOf: -1, err: fmt.Errorf(
					"actors: the events decided for a command on stream %s are invalid, so the command was not applied (its metadata or its events break the journal's limits): %w", a.stream, err)})
				continue
			}
		}
		working = st
		if key != "" && len(jevs) > 0 {
			if b.keys == nil {
				b.keys = map[string]int{}
			}
			b.keys[key] = len(b.entries)
		}
		b.entries = append(b.entries, batchEntry{req: r, from: len(b.events), to: len(b.events) + len(jevs), state: st, dupOf: -1, prep: prep})
		if b.events == nil {
			// The batch's first events: take jevs as they are (nothing else
			// holds them; a later append outgrows and copies them).
			b.events = jevs
		} else {
			b.events = append(b.events, jevs...)
		}
	}
	a.lookedUp = nil
	b.state = working
	return true
}

func (a *streamActor) decideOne(r *commandReq, state any) (evs []any, err error) {
	if !a.host.tel.tracing {
		err = safe(a.stream, "decide", func() (err error) { evs, err = a.model.Decide(state, r.cmd.Payload); return err })
		return evs, err
	}
	_, span := a.host.tel.tracer.Start(r.ctx, otelx.SpanStreamDecide, trace.WithAttributes(
		otelx.AttrStream.String(a.stream.String()), otelx.AttrAggregate.String(a.model.Name()), otelx.AttrVersion.Int64(int64(a.version))))
	defer func() {
		var pe *usercode.PanicError
		switch {
		case errors.As(err, &pe):
			failed(span, err)
		case err != nil:
			rejected(span, err)
		}
		span.SetAttributes(otelx.AttrEvents.Int(len(evs)))
		span.End()
	}()
	err = safe(a.stream, "decide", func() (err error) { evs, err = a.model.Decide(state, r.cmd.Payload); return err })
	return evs, err
}

// panicOf returns the *usercode.PanicError in err's chain, or nil. Only a
// non-nil err is searched, so the common path allocates no target.
func panicOf(err error) *usercode.PanicError {
	if err == nil {
		return nil
	}
	var pe *usercode.PanicError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// foreignTags returns the tags other than own.
func foreignTags(tags []journal.Tag, own journal.Tag) []journal.Tag {
	var out []journal.Tag
	for _, t := range tags {
		if t != own {
			out = append(out, t)
		}
	}
	return out
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
		md.TraceParent = otelx.TraceParent(sc)
		md.TraceState = sc.TraceState().String()
	}
	je.Metadata = md
}

// onPanic fails the command whose user code panicked, puts the rest of the
// batch (undecided, never appended) back at the head of the queue and
// rebuilds the state from the journal before serving again.
func (a *streamActor) onPanic(r *commandReq, pe *usercode.PanicError, b *batch, rest []*commandReq) {
	a.host.cfg.Logger.Error("user code panicked; failing the command and rebuilding the stream's state", "stream", a.stream.String(), "phase", pe.Phase, "panic", fmt.Sprint(pe.Value))
	a.reply(r, Result{}, pe, otelx.OutcomeError)
	requeue := make([]any, 0, len(b.entries)+len(rest)+len(a.queue))
	for _, e := range b.entries {
		requeue = append(requeue, e.req)
	}
	for _, c := range rest {
		requeue = append(requeue, c)
	}
	a.queue = append(requeue, a.queue...)
	a.lookedUp = nil
	a.need(stBroken)
}

func (a *streamActor) replyDuplicate(r *commandReq, recs []journal.Record) {
	res := Result{Records: recs, State: a.state, Duplicate: true}
	if len(recs) > 0 {
		res.Version = recs[len(recs)-1].Version(a.stream.Tag)
	}
	a.reply(r, res, nil, otelx.OutcomeDuplicate)
}

func (a *streamActor) startAppend(b *batch) {
	a.to(stAppending)
	a.inflight = b
	h, stream, self, lease := a.host, a.stream, a.self, a.lease
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
	job := appendJob{h: h, b: b, stream: stream, self: self, parent: parent, links: links, commands: commands}
	if h.inlineAppend {
		// The in-memory journal's Append is bounded in-process work: call
		// it here, without a timeout timer (nothing in it waits on time),
		// and take the result through the mailbox like any other. Its
		// options are the actor's scratch: the journal has returned when
		// run does and keeps nothing of them (it reads the expectation and
		// copies the lease under its mutex), and the actor's next append
		// starts after this one returned.
		if a.inlineExpect == nil {
			a.inlineExpect = make(map[journal.Tag]uint64, 1)
		}
		clear(a.inlineExpect)
		a.inlineExpect[stream.Tag] = b.startVersion
		a.inlineLeases[0] = lease
		job.expect, job.leases = a.inlineExpect, a.inlineLeases[:]
		job.run(h.ctx)
		return
	}
	job.expect, job.leases = map[journal.Tag]uint64{stream.Tag: b.startVersion}, []journal.Lease{lease}
	io := job // only this copy escapes to the I/O goroutine
	h.goIO(func() {
		ctx, cancel := h.ioContext()
		defer cancel()
		io.run(ctx)
	})
}

// appendJob is one batch's journal append, run on the actor's goroutine
// (inline appends) or on an I/O goroutine; its result goes back to the actor
// as an appendDoneMsg.
type appendJob struct {
	h        *Host
	b        *batch
	stream   journal.StreamID
	self     *actor.PID
	leases   []journal.Lease
	expect   map[journal.Tag]uint64
	parent   trace.SpanContext
	links    []trace.Link
	commands int
}

func (j *appendJob) run(ctx context.Context) {
	h := j.h
	span := noSpan()
	if h.tel.tracing {
		ctx, span = h.tel.tracer.Start(trace.ContextWithSpanContext(ctx, j.parent), otelx.SpanStreamAppend,
			trace.WithLinks(j.links...),
			trace.WithAttributes(otelx.AttrStream.String(j.stream.String()), otelx.AttrBatchSize.Int(j.commands), otelx.AttrEvents.Int(len(j.b.events))))
	}
	start := time.Now()
	res, err := h.append(ctx, j.b, journal.AppendOptions{Expect: j.expect, Leases: j.leases})
	took := time.Since(start)
	h.tel.journal.Append(ctx, took, len(res.Records), err)
	if err != nil {
		failed(span, err)
	}
	span.End()
	h.send(j.self, &appendDoneMsg{b: j.b, res: res, err: err, took: took})
}

// append appends b's events, with the commands' prepared events joined
// (journal.AppendOptions.Prepared) so the journal does not validate them again.
func (h *Host) append(ctx context.Context, b *batch, opts journal.AppendOptions) (journal.AppendResult, error) {
	var one [1]journal.Prepared // a batch of one command joins nothing
	parts := one[:0]
	for _, e := range b.entries {
		if e.prep.Len() > 0 {
			parts = append(parts, e.prep)
		}
	}
	// A join fails only on what the journal's own validation of the whole
	// batch rejects too (an event ID twice across commands); the journal
	// then reports it as it always has.
	if p, err := journal.JoinPrepared(parts...); err == nil {
		opts.Prepared = p
	}
	return h.cfg.Journal.Append(ctx, b.events, opts)
}

func (a *streamActor) onAppendDone(m *appendDoneMsg) {
	a.inflight = nil
	b := m.b
	if m.err != nil {
		// The commands decided on top of this append wait for it: put them
		// back, undecided, behind its own (requeue puts those first).
		a.dissolveOpen()
		if journal.LeaseRevoked(m.err) || isSessionError(m.err) {
			// The journal refused the lease and wrote nothing.
			a.host.tel.fenceRejections.Add(context.Background(), 1)
			if a.leaseInvalid(m.err, fromAppend) == stFenced {
				// A partition move revoked it, or the stream was taken
				// over: the actor acquires the stream again and decides the
				// batch anew, so no caller sees the revocation.
				a.requeue(b, false, nil)
				a.split = splitState{}
				a.resume(stFenced)
				return
			}
			a.settle(b, journal.AppendResult{}, a.failErr)
			a.resume(stFailed)
			return
		}
		// The journal may have moved (another writer, or an unknown outcome):
		// catch up before deciding again.
		err := m.err
		if (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && !errors.Is(err, journal.ErrOutcomeUnknown) {
			// The call was cut off: it may or may not have committed.
			err = fmt.Errorf("%w: %w", journal.ErrOutcomeUnknown, err)
		}
		failure := fmt.Errorf("actors: appending %d events to stream %s failed; the commands of this batch were not acknowledged: %w", len(b.events), a.stream, err)
		switch {
		case errors.Is(err, journal.ErrVersionMismatch):
			// Nothing was written, and the stream moved under the actor
			// (something bypassed it): re-read the tail and decide again,
			// rather than answer a conflict the caller cannot act on.
			a.requeue(b, true, failure)
			a.split = splitState{}
		case len(b.entries) > 1 && splittable(err):
			a.host.cfg.Logger.Warn("an append failed for a reason one command can cause; appending the batch again in halves to isolate it",
				"stream", a.stream.String(), "commands", len(b.entries), "error", err)
			a.requeue(b, false, nil)
			a.split = splitState{limit: max(1, len(b.entries)/2), suspects: len(b.entries)}
		default:
			a.settle(b, journal.AppendResult{}, failure)
		}
		a.resume(stStale)
		return
	}
	a.revocations = 0
	a.cost.observe(m.took, len(b.events))
	a.qdelay.observeAppend(a.host.queueClock(), m.took)
	if len(m.res.Records) != len(b.events) || m.res.Duplicate {
		a.need(stStale)
	}
	a.settle(b, m.res, nil)
	if a.owed.owes() > 0 {
		// The state the open batch was decided on was not adopted.
		a.dissolveOpen()
	}
	a.resume(stReady)
	a.startLinger(len(b.entries), m.took)
}

// settle replies to every command of a batch: its records (after a successful
// append), its domain error, or the batch's failure.
func (a *streamActor) settle(b *batch, res journal.AppendResult, failure error) {
	a.split.settled(len(b.entries))
	tag := a.stream.Tag
	ok := failure == nil && len(res.Records) == len(b.events)
	if ok && len(res.Records) > 0 {
		first, last := res.Records[0].Version(tag), res.Records[len(res.Records)-1].Version(tag)
		if res.Duplicate || first != b.startVersion+1 || last != b.startVersion+uint64(len(b.events)) {
			// Not the append this actor decided on top of its version: adopt
			// nothing and catch up from the journal.
			a.need(stStale)
		} else {
			newest := &res.Records[len(res.Records)-1]
			a.state, a.version, a.lastPos = b.state, last, newest.Position
			a.head = journal.Hash{}
			if l, ok := headOf(newest, tag); ok {
				a.head = l.Hash
			}
		}
	}
	for i := range b.entries {
		e := &b.entries[i]
		switch {
		case failure != nil:
			a.reply(e.req, Result{}, failure, otelx.OutcomeError)
		case e.err != nil:
			outcome := otelx.OutcomeError
			if e.domain {
				outcome = otelx.OutcomeDomainError
			}
			a.reply(e.req, Result{}, e.err, outcome)
		case e.dupOf >= 0:
			o := b.entries[e.dupOf]
			if !ok {
				a.reply(e.req, Result{}, fmt.Errorf("actors: stream %s: the journal returned %d records for %d events", a.stream, len(res.Records), len(b.events)), otelx.OutcomeError)
				continue
			}
			a.replyDuplicate(e.req, res.Records[o.from:o.to])
		case e.to == e.from:
			a.reply(e.req, Result{Version: b.startVersion + uint64(e.to), State: e.stateOr(a.state)}, nil, otelx.OutcomeOK)
		case !ok:
			a.reply(e.req, Result{}, fmt.Errorf("actors: stream %s: the journal returned %d records for %d events", a.stream, len(res.Records), len(b.events)), otelx.OutcomeError)
		default:
			recs := res.Records[e.from:e.to]
			if key := e.req.cmd.Metadata.IdempotencyKey; key != "" {
				if a.keys == nil {
					a.keys = &keyCache{}
				}
				a.keys.put(key, recs)
			}
			res := Result{Records: recs, Version: recs[len(recs)-1].Version(tag), State: e.state, Duplicate: res.Duplicate}
			outcome := otelx.OutcomeOK
			if res.Duplicate {
				outcome = otelx.OutcomeDuplicate
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
