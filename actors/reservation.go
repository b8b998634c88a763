package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"
	"github.com/scribe-es/scribe/tagconsistency"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// actorGrant is the Grantor of a reservation granted by one of this host's
// stream actors.
type actorGrant struct {
	stream   journal.StreamID
	host     *Host
	pid      *actor.PID
	done     chan struct{}
	id       uint64
	finished atomic.Bool
}

// Reserve waits until the stream's actor grants a reservation: after the
// commands and reservations queued before it. It fails with a
// *tagconsistency.ReservationTimeoutError (naming the tag) after Config.ReservationTimeout,
// or with ctx's error; a reservation that was not granted leaves no trace.
func (h *Host) Reserve(ctx context.Context, stream journal.StreamID) (*tagconsistency.Reservation, error) {
	stream = stream.Normalize()
	ctx, span := h.tel.tracer.Start(ctx, otelx.SpanStreamReserve, trace.WithAttributes(otelx.AttrStream.String(stream.String())))
	defer span.End()
	res, err := h.reserve(ctx, stream)
	if err != nil {
		failed(span, err)
	} else {
		span.SetAttributes(otelx.AttrVersion.Int64(int64(res.Version)))
	}
	return res, err
}

func (h *Host) reserve(ctx context.Context, stream journal.StreamID) (*tagconsistency.Reservation, error) {
	timer := time.NewTimer(h.cfg.ReservationTimeout)
	defer timer.Stop()
	dctx, cancel := context.WithTimeout(ctx, h.cfg.ReservationTimeout)
	defer cancel()
	req := &reserveReq{ctx: ctx, enqueued: time.Now(), reply: make(chan reserveReply, 1)}
	if _, err := h.deliver(dctx, stream, req); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, &tagconsistency.ReservationTimeoutError{Stream: stream, Waited: h.cfg.ReservationTimeout}
		}
		return nil, err
	}
	select {
	case r := <-req.reply:
		return r.res, r.err
	case <-timer.C:
		if req.abandon() {
			return nil, &tagconsistency.ReservationTimeoutError{Stream: stream, Waited: h.cfg.ReservationTimeout}
		}
	case <-ctx.Done():
		if req.abandon() {
			return nil, fmt.Errorf("actors: reservation of tag %q: %w", stream.Tag, ctx.Err())
		}
	}
	// The actor took the request first: its reply is on the way.
	r := <-req.reply
	return r.res, r.err
}

func (g *actorGrant) Confirm(ctx context.Context, records []journal.Record) error {
	reply := make(chan error, 1)
	return g.finish(ctx, &confirmMsg{id: g.id, records: records, reply: reply}, reply)
}

// PostConfirm implements tagconsistency.PostingGrantor: the confirmation is
// in the actor's mailbox when it returns, so the caller's next request to the
// stream queues behind it; nobody waits for the actor's answer. A reservation
// the actor no longer holds makes it log and reload (onConfirm).
func (g *actorGrant) PostConfirm(records []journal.Record) {
	if !g.finished.CompareAndSwap(false, true) {
		return
	}
	select {
	case <-g.done:
		return // the actor stopped: its next activation reads the stream
	default:
	}
	g.host.send(g.pid, &confirmMsg{id: g.id, records: records})
}

func (g *actorGrant) Cancel(ctx context.Context, cause error) error {
	reply := make(chan error, 1)
	return g.finish(ctx, &cancelMsg{id: g.id, cause: cause, reply: reply}, reply)
}

func (g *actorGrant) finish(ctx context.Context, msg any, reply chan error) error {
	if !g.finished.CompareAndSwap(false, true) {
		return fmt.Errorf("actors: the reservation of stream %s was already confirmed or cancelled", g.stream)
	}
	select {
	case <-g.done:
		return fmt.Errorf("%w: the actor of stream %s stopped", tagconsistency.ErrReservationLost, g.stream)
	default:
	}
	g.host.send(g.pid, msg)
	select {
	case err := <-reply:
		return err
	case <-g.done:
		select {
		case err := <-reply:
			return err
		default:
			return fmt.Errorf("%w: the actor of stream %s stopped", tagconsistency.ErrReservationLost, g.stream)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *streamActor) grant(r *reserveReq) {
	if err := r.ctx.Err(); err != nil {
		if r.abandon() {
			r.reply <- reserveReply{err: err}
		}
		return
	}
	if !r.take() {
		return
	}
	h, self := a.host, a.self
	id := h.resSeq.Add(1)
	a.to(stReserved)
	a.reserved = &heldReservation{id: id, timer: time.AfterFunc(h.cfg.ReservationHold, func() {
		h.send(self, &reservationExpiredMsg{id: id})
	})}
	r.reply <- reserveReply{res: &tagconsistency.Reservation{
		Stream: a.stream, Lease: a.lease, Version: a.version, LastPosition: a.lastPos, State: a.state,
		Grantor: &actorGrant{stream: a.stream, host: h, pid: self, done: a.entry.done, id: id},
	}}
}

func (a *streamActor) held(id uint64) bool {
	if a.reserved == nil || a.reserved.id != id {
		return false
	}
	a.reserved.timer.Stop()
	a.reserved = nil
	return true
}

func (a *streamActor) onConfirm(m *confirmMsg) {
	if !a.held(m.id) {
		if len(m.records) > 0 {
			a.need(stStale)
		}
		err := fmt.Errorf("%w: stream %s (it outlived the reservation timeout, or the actor lost its lease)", tagconsistency.ErrReservationLost, a.stream)
		if m.reply == nil {
			// Posted (PostConfirm): nobody waits for the answer.
			a.host.cfg.Logger.Warn("a posted DCB confirmation arrived for a reservation no longer held; the stream is re-read before it serves again", "stream", a.stream.String(), "records", len(m.records))
			return
		}
		m.reply <- err
		return
	}
	outcome := stReady
	tag := a.stream.Tag
	for i := range m.records {
		rec := &m.records[i]
		v := rec.Version(tag)
		if v == 0 || v <= a.version {
			continue
		}
		if v != a.version+1 {
			outcome = stStale
			break
		}
		if a.model != nil {
			var ev any
			err := safe(a.stream, "decode", func() (err error) {
				ctx, cancel := a.host.ioContext()
				defer cancel()
				ev, err = a.model.DecodeEvent(ctx, rec)
				return err
			})
			st := a.state
			if err == nil {
				err = safe(a.stream, "evolve", func() error { st = a.model.Evolve(st, ev); return nil })
			}
			if err != nil {
				a.host.cfg.Logger.Error("applying a confirmed DCB event failed; rebuilding the stream's state", "stream", a.stream.String(), "error", err)
				outcome = stBroken
				break
			}
			a.state = st
		}
		a.revocations = 0
		a.version, a.lastPos, a.head = v, rec.Position, journal.Hash{}
		if l, ok := headOf(rec, tag); ok {
			a.head = l.Hash
		}
	}
	if m.reply != nil {
		m.reply <- nil
	}
	a.resume(outcome)
	a.maybeSnapshot()
}

func (a *streamActor) onCancel(m *cancelMsg) {
	if !a.held(m.id) {
		m.reply <- fmt.Errorf("%w: stream %s (it outlived the reservation timeout, or the actor lost its lease)", tagconsistency.ErrReservationLost, a.stream)
		return
	}
	outcome := stReady
	if m.cause != nil {
		outcome = stStale
	}
	if journal.LeaseRevoked(m.cause) {
		// The holder's append was fenced: this stream's lease, or another
		// reserved stream's, was revoked.
		outcome = a.leaseInvalid(m.cause, fromReservation)
	}
	m.reply <- nil
	a.resume(outcome)
}

func (a *streamActor) onReservationExpired(m *reservationExpiredMsg) {
	if a.reserved == nil || a.reserved.id != m.id {
		return
	}
	a.reserved = nil
	a.host.cfg.Logger.Warn("a DCB reservation was held longer than the reservation hold limit; cancelled it", "stream", a.stream.String(), "hold", a.host.cfg.ReservationHold)
	a.resume(stStale)
}
