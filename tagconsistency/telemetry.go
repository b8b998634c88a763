package tagconsistency

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	otelx "github.com/scribe-es/scribe/internal/telemetry"
)

// instrumentationName names the tracer and meter of this package.
const instrumentationName = "github.com/scribe-es/scribe/tagconsistency"

type telemetry struct {
	tracer          trace.Tracer
	commands        metric.Int64Counter
	reservationWait metric.Float64Histogram
	gateWait        metric.Float64Histogram
	conflicts       metric.Int64Counter
	journal         otelx.JournalCalls
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (telemetry, error) {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	var t telemetry
	var err error
	t.tracer = tp.Tracer(instrumentationName)
	if t.commands, err = m.Int64Counter(otelx.MetricDCBCommands,
		metric.WithDescription("DCB commands executed, by outcome (ok, duplicate, rejected, conflict, error)."),
		metric.WithUnit("{command}")); err != nil {
		return t, fmt.Errorf("tagconsistency: creating metric: %w", err)
	}
	if t.reservationWait, err = m.Float64Histogram(otelx.MetricDCBWait,
		metric.WithDescription("Time a DCB command waited for one tag's reservation."),
		metric.WithUnit("s")); err != nil {
		return t, fmt.Errorf("tagconsistency: creating metric: %w", err)
	}
	if t.gateWait, err = m.Float64Histogram(otelx.MetricDCBGateWait,
		metric.WithDescription("Time a DCB command waited at its process's gate, holding no tag, until none of its tags was held by another command of the process."),
		metric.WithUnit("s")); err != nil {
		return t, fmt.Errorf("tagconsistency: creating metric: %w", err)
	}
	if t.conflicts, err = m.Int64Counter(otelx.MetricDCBConflicts,
		metric.WithDescription("DCB appends rejected because events bypassed the tags' owners."),
		metric.WithUnit("{conflict}")); err != nil {
		return t, fmt.Errorf("tagconsistency: creating metric: %w", err)
	}
	if t.journal, err = otelx.NewJournalCalls(m, "DCB commands", "DCB folds (one stream's tail each)"); err != nil {
		return t, fmt.Errorf("tagconsistency: creating metric: %w", err)
	}
	return t, nil
}

// Outcomes of a command, as the scribe.outcome attribute.
const (
	outcomeOK        = "ok"        // appended, or decided to append nothing
	outcomeDuplicate = "duplicate" // the idempotency key had already run
	outcomeRejected  = "rejected"  // Decide returned a domain error
	outcomeConflict  = "conflict"  // the append found events that bypassed the owners
	outcomeError     = "error"     // anything else (timeouts, context, journal, owners)
)

// finishExecute ends the execute span and counts the command by outcome.
func (t telemetry) finishExecute(ctx context.Context, span trace.Span, command, outcome string, err error) {
	span.SetAttributes(attribute.String("scribe.outcome", outcome))
	switch {
	case outcome == outcomeRejected:
		otelx.Rejected(span, err)
	case err != nil:
		otelx.Failed(span, err)
	}
	span.End()
	t.commands.Add(ctx, 1, metric.WithAttributes(attribute.String("scribe.command", command), attribute.String("scribe.outcome", outcome)))
}
