package tagconsistency

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	otelx "github.com/scribe-es/scribe/internal/telemetry"
	"github.com/scribe-es/scribe/internal/usercode"
	"github.com/scribe-es/scribe/journal"
)

// decide runs cmd.Decide; rejected reports that err is Decide's own (domain) error.
func decide[S any](ctx context.Context, x *Executor, cmd Command[S], state S) (events []journal.Event, rejected bool, err error) {
	_, span := x.tel.tracer.Start(ctx, otelx.SpanDCBDecide)
	defer span.End()
	var derr error
	if err := guard(cmd.Name, "decide", func() { events, derr = cmd.Decide(state) }); err != nil {
		otelx.Failed(span, err)
		return nil, false, err
	}
	if derr != nil {
		otelx.Rejected(span, derr)
		return nil, true, derr
	}
	span.SetAttributes(attribute.Int("scribe.dcb.decided", len(events)))
	return events, false, nil
}

// guard runs f, turning a panic into a *usercode.PanicError naming the
// command and the phase.
func guard(command, phase string, f func()) error {
	return usercode.Run(journal.StreamID{}, command, phase, func() error { f(); return nil })
}

// stamp checks the decided events' tags and partition and fills in IDs and
// metadata defaults. The events slice is Decide's; it is modified in place.
func (x *Executor) stamp(ctx context.Context, command, partition string, streams []journal.StreamID, events []journal.Event, opts Options) error {
	reserved := make(map[journal.Tag]bool, len(streams))
	for _, s := range streams {
		reserved[s.Tag] = true
	}
	sc := trace.SpanContextFromContext(ctx)
	for i := range events {
		e := &events[i]
		for _, t := range e.Tags {
			if !reserved[t] {
				return fmt.Errorf("%w: command %q decided event %d (%s) with tag %q, which its query does not name and Command.Tags does not list; add the tag to Command.Tags so its owner is reserved", ErrInvalidCommand, command, i, e.Type, t)
			}
		}
		m := &e.Metadata
		if m.Partition == "" {
			m.Partition = partition
		}
		if m.Partition != partition {
			return fmt.Errorf("%w: command %q decided event %d (%s) in partition %q, but its query reads partition %q; DCB commands write to their query's partition", ErrInvalidCommand, command, i, e.Type, m.Partition, partition)
		}
		if e.ID == uuid.Nil {
			if opts.IdempotencyKey != "" {
				e.ID = idempotentID(partition, command, opts.IdempotencyKey, i)
			} else {
				e.ID = journal.NewEventID()
			}
		}
		d := opts.Metadata
		m.CorrelationID = cmp.Or(m.CorrelationID, d.CorrelationID)
		m.CausationID = cmp.Or(m.CausationID, d.CausationID)
		m.UserID = cmp.Or(m.UserID, d.UserID)
		m.IdempotencyKey = cmp.Or(m.IdempotencyKey, opts.IdempotencyKey, d.IdempotencyKey)
		m.CommandHash = cmp.Or(m.CommandHash, d.CommandHash)
		if m.Scopes == nil {
			m.Scopes = d.Scopes
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = d.CreatedAt
		}
		if m.TraceParent == "" {
			m.TraceParent, m.TraceState = d.TraceParent, d.TraceState
			if m.TraceParent == "" && sc.IsValid() {
				m.TraceParent = otelx.TraceParent(sc)
				m.TraceState = sc.TraceState().String()
			}
		}
	}
	return nil
}

// append writes the events once, fenced by the owners' leases and versions,
// with the DCB condition as a backstop.
func (x *Executor) append(ctx context.Context, command string, q journal.Query, held []*Reservation, events []journal.Event, after journal.Position) (journal.AppendResult, error) {
	ctx, span := x.tel.tracer.Start(ctx, otelx.SpanDCBAppend, trace.WithAttributes(
		attribute.Int("scribe.dcb.events", len(events)),
	))
	defer span.End()
	opts := journal.AppendOptions{
		Expect:    make(map[journal.Tag]uint64, len(held)),
		Leases:    make([]journal.Lease, len(held)),
		Condition: &journal.AppendCondition{FailIfEventsMatch: q, After: after},
	}
	for i, r := range held {
		opts.Expect[r.Stream.Tag] = r.Version
		opts.Leases[i] = r.Lease
	}
	start := time.Now()
	res, err := x.journal.Append(ctx, events, opts)
	x.tel.journal.Append(ctx, time.Since(start), len(res.Records), err)
	if err != nil {
		if errors.Is(err, journal.ErrAppendConditionFailed) || errors.Is(err, journal.ErrVersionMismatch) {
			streams := make([]journal.StreamID, len(held))
			for i, r := range held {
				streams[i] = r.Stream
			}
			err = &ConflictError{Command: command, Streams: streams, Err: err}
			x.tel.conflicts.Add(ctx, 1, metric.WithAttributes(attribute.String("scribe.command", command)))
		} else {
			err = fmt.Errorf("tagconsistency: command %q: append: %w", command, err)
		}
		otelx.Failed(span, err)
		return res, err
	}
	span.SetAttributes(attribute.String("scribe.position", res.Last().String()), attribute.Bool("scribe.duplicate", res.Duplicate))
	return res, nil
}
