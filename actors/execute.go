package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// Execute sends cmd to the actor of stream (spawning and activating it when
// needed) and waits for its result. The actor decides commands in arrival
// order and replies only after their events are durable; a domain error from
// Decide is returned as is.
//
// Context: if ctx ends before the command is decided, the command is never
// executed and Execute returns ctx.Err(). If ctx ends after it was decided,
// its append may or may not be stored: Execute returns an error matching both
// ctx.Err() and journal.ErrOutcomeUnknown; executing again with the same
// idempotency key tells which (the first result comes back, Duplicate set).
//
// Safe for concurrent use.
func (h *Host) Execute(ctx context.Context, stream journal.StreamID, cmd Command) (Result, error) {
	stream = stream.Normalize()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if !h.tel.tracing {
		res, _, _, err := h.execute(ctx, stream, cmd)
		return res, err
	}
	ctx, span := h.tel.tracer.Start(ctx, otelx.SpanStreamExecute, trace.WithAttributes(
		otelx.AttrStream.String(stream.String()), otelx.AttrAggregate.String(stream.Tag.Group())))
	defer span.End()
	res, wait, outcome, err := h.execute(ctx, stream, cmd)
	span.SetAttributes(otelx.AttrMailboxWait.Float64(float64(wait) / float64(time.Millisecond)))
	if err != nil {
		if outcome == otelx.OutcomeDomainError {
			rejected(span, err)
		} else {
			failed(span, err)
		}
		return res, err
	}
	span.SetAttributes(otelx.AttrVersion.Int64(int64(res.Version)), otelx.AttrEvents.Int(len(res.Records)), otelx.AttrDuplicate.Bool(res.Duplicate))
	return res, nil
}

// execute also returns the command's outcome (an Outcome constant; "" when
// it never reached the actor's decision).
func (h *Host) execute(ctx context.Context, stream journal.StreamID, cmd Command) (Result, time.Duration, string, error) {
	req := &commandReq{ctx: ctx, cmd: cmd, enqueued: time.Now(), reply: make(chan commandReply, 1)}
	e, err := h.deliver(ctx, stream, req)
	if err != nil {
		return Result{}, 0, "", err
	}
	select {
	case r := <-req.reply:
		return r.res, req.mailboxWait, r.outcome, r.err
	case <-ctx.Done():
		e.gaveUp.Add(1) // queue-delay shedding's evidence that waits are too long (overload.go)
		if req.abandon() || req.abandoned() {
			return Result{}, 0, "", ctx.Err()
		}
		select {
		case r := <-req.reply:
			if errors.Is(r.err, ctx.Err()) {
				return Result{}, 0, "", ctx.Err()
			}
			return r.res, req.mailboxWait, r.outcome, r.err
		default:
		}
		return Result{}, 0, "", fmt.Errorf("actors: the context ended after the command on stream %s was decided; whether its events were stored is unknown (execute it again with the same idempotency key to find out): %w (%w)", stream, ctx.Err(), journal.ErrOutcomeUnknown)
	}
}
