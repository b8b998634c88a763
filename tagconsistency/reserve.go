package tagconsistency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// enterGate waits at the executor's gate, if it has one, until command may
// take streams, and records the wait on span and in scribe.dcb.gate.wait.
// leave frees the streams (a no-op without a gate); call it once the
// reservations ended.
func (x *Executor) enterGate(ctx context.Context, span trace.Span, command string, streams []journal.StreamID) (leave func(), err error) {
	if x.gate == nil {
		return func() {}, nil
	}
	start := time.Now()
	leave, err = x.gate.enter(ctx, streams)
	waited := time.Since(start)
	span.SetAttributes(attribute.Float64("scribe.dcb.gate_wait_ms", float64(waited.Microseconds())/1000))
	x.tel.gateWait.Record(ctx, waited.Seconds(), metric.WithAttributes(attribute.String("scribe.command", command)))
	if err != nil {
		var te *ReservationTimeoutError
		if errors.As(err, &te) {
			te.Command = command
			return nil, te
		}
		return nil, fmt.Errorf("tagconsistency: command %q not executed while waiting at the gate for its tags: %w", command, err)
	}
	return leave, nil
}

func (x *Executor) reserve(ctx context.Context, command string, s journal.StreamID) (*Reservation, error) {
	ctx, span := x.tel.tracer.Start(ctx, otelx.SpanDCBReserve, trace.WithAttributes(
		attribute.String("scribe.stream", s.String()),
	))
	defer span.End()
	// How long a reservation may wait is the owner's rule (TagOwners), enforced
	// there once: the executor adds no timer of its own.
	start := time.Now()
	r, err := x.owners.Reserve(ctx, s)
	waited := time.Since(start)
	span.SetAttributes(attribute.Float64("scribe.reservation.wait_ms", float64(waited.Microseconds())/1000))
	x.tel.reservationWait.Record(ctx, waited.Seconds(), metric.WithAttributes(attribute.String("scribe.tag.group", s.Tag.Group())))
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("tagconsistency: command %q not executed while reserving tag %s: %w", command, s, ctx.Err())
		case errors.Is(err, ErrReservationTimeout):
			err = &ReservationTimeoutError{Command: command, Stream: s, Waited: waited}
		default:
			err = fmt.Errorf("tagconsistency: command %q: reserving tag %s: %w", command, s, err)
		}
		otelx.Failed(span, err)
		return nil, err
	}
	if r.Grantor == nil {
		err := fmt.Errorf("tagconsistency: owner granted stream %s without a Grantor to end the reservation", s)
		otelx.Failed(span, err)
		return nil, err
	}
	if r.Stream.Normalize() != s {
		// An owner that grants another stream than asked is a bug in the
		// owner; release what it granted and refuse to write.
		_ = r.Grantor.Cancel(context.WithoutCancel(ctx), nil)
		err := fmt.Errorf("tagconsistency: owner granted stream %s for a reservation of %s", r.Stream, s)
		otelx.Failed(span, err)
		return nil, err
	}
	span.SetAttributes(attribute.Int64("scribe.stream.version", int64(r.Version)))
	return r, nil
}

// confirmAll hands every owner the appended records that carry its tag. The
// records are durable whatever Confirm returns: a failed confirm is recorded
// on the span (the owner reloads before writing again, and the journal fences
// it meanwhile), not returned to the caller. Owners whose grants are
// PostingGrantors get the records posted: the command does not wait for
// their answers (the span's scribe.dcb.posted counts them).
func (x *Executor) confirmAll(ctx context.Context, held []*Reservation, records []journal.Record) {
	ctx, span := x.tel.tracer.Start(ctx, otelx.SpanDCBConfirm, trace.WithAttributes(attribute.Int("scribe.dcb.tags", len(held))))
	defer span.End()
	mine := func(r *Reservation) []journal.Record {
		var out []journal.Record
		for _, rec := range records {
			if rec.HasTag(r.Stream.Tag) {
				out = append(out, rec)
			}
		}
		return out
	}
	waited := held[:0:0]
	for _, r := range held {
		if p, ok := r.Grantor.(PostingGrantor); ok {
			p.PostConfirm(mine(r))
			continue
		}
		waited = append(waited, r)
	}
	span.SetAttributes(attribute.Int("scribe.dcb.posted", len(held)-len(waited)))
	x.endReservations(ctx, span, waited, "confirming", func(ctx context.Context, r *Reservation) error {
		return r.Grantor.Confirm(ctx, mine(r))
	})
}

// cancelAll cancels every reservation. cause is passed to the owners (nil:
// nothing was written and their view is exact).
func (x *Executor) cancelAll(ctx context.Context, held []*Reservation, cause error) {
	if len(held) == 0 {
		return
	}
	ctx, span := x.tel.tracer.Start(ctx, otelx.SpanDCBCancel, trace.WithAttributes(
		attribute.Int("scribe.dcb.tags", len(held)),
		attribute.Bool("scribe.dcb.reload", cause != nil),
	))
	defer span.End()
	x.endReservations(ctx, span, held, "cancelling", func(ctx context.Context, r *Reservation) error {
		return r.Grantor.Cancel(ctx, cause)
	})
}

// endReservations runs end (a Confirm or Cancel) for every reservation at once, so
// that every tag is freed one owner round trip after the command finished,
// each with its own EndTimeout and regardless of the caller's context.
// Failures are recorded on span.
func (x *Executor) endReservations(ctx context.Context, span trace.Span, held []*Reservation, verb string, end func(context.Context, *Reservation) error) {
	if len(held) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	errs := make([]error, len(held))
	one := func(i int) {
		cctx, cancel := context.WithTimeout(ctx, x.endTimeout)
		defer cancel()
		if err := end(cctx, held[i]); err != nil {
			errs[i] = fmt.Errorf("tagconsistency: %s %s: %w", verb, held[i].Stream, err)
		}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(held); i++ {
		wg.Go(func() { one(i) })
	}
	one(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			otelx.Failed(span, err)
		}
	}
}
