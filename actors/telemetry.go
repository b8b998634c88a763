package actors

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	otelx "github.com/scribe-es/scribe/internal/telemetry"
)

type telemetry struct {
	// tracing is false when no TracerProvider was configured: spans are then
	// not even started (the no-op tracer still costs context lookups).
	tracing         bool
	tracer          trace.Tracer
	commands        metric.Int64Counter
	batchSize       metric.Int64Histogram
	journal         otelx.JournalCalls
	active          metric.Int64UpDownCounter
	activations     metric.Int64Counter
	passivations    metric.Int64Counter
	recoveries      metric.Int64Counter
	fenceRejections metric.Int64Counter
	// snapshotsIgnored counts snapshots of another state shape (see
	// StateFingerprinter).
	snapshotsIgnored metric.Int64Counter
	// outcomeOpts holds each outcome's attribute option as a one-element
	// slice, built once and passed as is (read only), so counting a reply
	// allocates no variadic slice.
	outcomeOpts map[string][]metric.AddOption
	meter       metric.Meter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (*telemetry, error) {
	tracing := tp != nil
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(otelx.InstrumentationName)
	t := &telemetry{tracing: tracing, tracer: tp.Tracer(otelx.InstrumentationName), outcomeOpts: map[string][]metric.AddOption{}, meter: m}
	var err error
	if t.commands, err = m.Int64Counter(otelx.MetricCommands, metric.WithDescription("Commands answered by stream actors, by outcome."), metric.WithUnit("{command}")); err != nil {
		return nil, err
	}
	if t.batchSize, err = m.Int64Histogram(otelx.MetricBatchSize, metric.WithDescription("Commands whose events one journal append carried (group commit)."), metric.WithUnit("{command}"),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)); err != nil {
		return nil, err
	}
	if t.journal, err = otelx.NewJournalCalls(m, "stream actors", "stream recoveries (replaying a stream's tail)"); err != nil {
		return nil, err
	}
	if t.active, err = m.Int64UpDownCounter(otelx.MetricActiveActors, metric.WithDescription("Stream actors alive."), metric.WithUnit("{actor}")); err != nil {
		return nil, err
	}
	if t.activations, err = m.Int64Counter(otelx.MetricActivations, metric.WithDescription("Stream actors that acquired their lease and became ready."), metric.WithUnit("{actor}")); err != nil {
		return nil, err
	}
	if t.passivations, err = m.Int64Counter(otelx.MetricPassivations, metric.WithDescription("Stream actors that passivated (idle or shutdown)."), metric.WithUnit("{actor}")); err != nil {
		return nil, err
	}
	if t.recoveries, err = m.Int64Counter(otelx.MetricRecoveries, metric.WithDescription("State recoveries from snapshots and the journal (activation and rebuilds)."), metric.WithUnit("{recovery}")); err != nil {
		return nil, err
	}
	if t.fenceRejections, err = m.Int64Counter(otelx.MetricFenceRejections, metric.WithDescription("Appends or renewals rejected because the lease or node session was lost."), metric.WithUnit("{rejection}")); err != nil {
		return nil, err
	}
	if t.snapshotsIgnored, err = m.Int64Counter(otelx.MetricSnapshotsIgnored, metric.WithDescription("Snapshots ignored at recovery because their state shape differs from the running build's (the stream was replayed)."), metric.WithUnit("{snapshot}")); err != nil {
		return nil, err
	}
	for _, o := range []string{otelx.OutcomeOK, otelx.OutcomeDuplicate, otelx.OutcomeDomainError, otelx.OutcomeError, otelx.OutcomeCanceled, otelx.OutcomeOverloaded} {
		t.outcomeOpts[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(otelx.AttrOutcome.String(o)))}
	}
	return t, nil
}

// failed and rejected mark spans (see package internal/telemetry).
var failed, rejected = otelx.Failed, otelx.Rejected

// noSpan is the span used when tracing is off.
func noSpan() trace.Span { return trace.SpanFromContext(context.Background()) }
