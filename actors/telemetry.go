package actors

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	otelx "github.com/scribe-es/scribe/internal/telemetry"
)

// InstrumentationName is the OpenTelemetry scope of Scribe's spans and metrics.
const InstrumentationName = "github.com/scribe-es/scribe"

// Span names and attribute keys recorded by the actors. Span names follow
// Scribe's scheme scribe.<component>.<operation>; the stream actors'
// component is "stream".
const (
	SpanExecute  = "scribe.stream.execute"
	SpanDecide   = "scribe.stream.decide"
	SpanAppend   = "scribe.stream.append"
	SpanRecovery = "scribe.stream.recover"
	SpanReserve  = "scribe.stream.reserve"

	AttrStream      = attribute.Key("scribe.stream")
	AttrAggregate   = attribute.Key("scribe.aggregate")
	AttrMailboxWait = attribute.Key("scribe.mailbox_wait_ms")
	AttrBatchSize   = attribute.Key("scribe.batch.size")
	AttrEvents      = attribute.Key("scribe.events")
	AttrVersion     = attribute.Key("scribe.version")
	AttrOutcome     = attribute.Key("scribe.outcome")
	AttrDuplicate   = attribute.Key("scribe.duplicate")
	// AttrRejected is true on the spans of a command its aggregate's Decide
	// rejected (a domain error): such a span keeps status Unset and carries
	// a EventRejection event, because the system worked as intended.
	AttrRejected = otelx.AttrRejected
	// AttrErrorType is OpenTelemetry's error.type: the class of an
	// infrastructure failure (spans with status Error, failed appends).
	AttrErrorType = otelx.AttrErrorType
)

// EventRejection is the span event recording a domain rejection, with the
// error's message as its exception.message attribute.
const EventRejection = otelx.EventRejection

// Metric names recorded by the actors.
const (
	MetricCommands        = "scribe.commands"
	MetricBatchSize       = "scribe.batch.size"
	MetricAppendLatency   = otelx.MetricAppendLatency
	MetricAppendedEvents  = otelx.MetricAppendedEvents
	MetricReadLatency     = otelx.MetricReadLatency
	MetricActiveActors    = "scribe.actors.active"
	MetricActivations     = "scribe.actors.activations"
	MetricPassivations    = "scribe.actors.passivations"
	MetricRecoveries      = "scribe.actors.recoveries"
	MetricFenceRejections = "scribe.fence.rejections"
)

// Command outcomes (the scribe.outcome attribute of scribe.commands).
const (
	OutcomeOK          = "ok"
	OutcomeDuplicate   = "duplicate"
	OutcomeDomainError = "domain_error"
	OutcomeError       = "error"
	OutcomeCanceled    = "canceled"
	OutcomeOverloaded  = "overloaded"
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
	outcomeOpts     map[string]metric.AddOption
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (*telemetry, error) {
	tracing := tp != nil
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(InstrumentationName)
	t := &telemetry{tracing: tracing, tracer: tp.Tracer(InstrumentationName), outcomeOpts: map[string]metric.AddOption{}}
	var err error
	if t.commands, err = m.Int64Counter(MetricCommands, metric.WithDescription("Commands answered by stream actors, by outcome."), metric.WithUnit("{command}")); err != nil {
		return nil, err
	}
	if t.batchSize, err = m.Int64Histogram(MetricBatchSize, metric.WithDescription("Commands whose events one journal append carried (group commit)."), metric.WithUnit("{command}"),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)); err != nil {
		return nil, err
	}
	if t.journal, err = otelx.NewJournalCalls(m, "stream actors", "stream recoveries (replaying a stream's tail)"); err != nil {
		return nil, err
	}
	if t.active, err = m.Int64UpDownCounter(MetricActiveActors, metric.WithDescription("Stream actors alive."), metric.WithUnit("{actor}")); err != nil {
		return nil, err
	}
	if t.activations, err = m.Int64Counter(MetricActivations, metric.WithDescription("Stream actors that acquired their lease and became ready."), metric.WithUnit("{actor}")); err != nil {
		return nil, err
	}
	if t.passivations, err = m.Int64Counter(MetricPassivations, metric.WithDescription("Stream actors that passivated (idle or shutdown)."), metric.WithUnit("{actor}")); err != nil {
		return nil, err
	}
	if t.recoveries, err = m.Int64Counter(MetricRecoveries, metric.WithDescription("State recoveries from snapshots and the journal (activation and rebuilds)."), metric.WithUnit("{recovery}")); err != nil {
		return nil, err
	}
	if t.fenceRejections, err = m.Int64Counter(MetricFenceRejections, metric.WithDescription("Appends or renewals rejected because the lease or node session was lost."), metric.WithUnit("{rejection}")); err != nil {
		return nil, err
	}
	for _, o := range []string{OutcomeOK, OutcomeDuplicate, OutcomeDomainError, OutcomeError, OutcomeCanceled, OutcomeOverloaded} {
		t.outcomeOpts[o] = metric.WithAttributeSet(attribute.NewSet(AttrOutcome.String(o)))
	}
	return t, nil
}

// recordAppend records one journal append of a stream actor.
func (t *telemetry) recordAppend(ctx context.Context, took time.Duration, events int, err error) {
	t.journal.Append(ctx, took, events, err)
}

// recordRead records one journal read of a stream recovery.
func (t *telemetry) recordRead(ctx context.Context, took time.Duration, err error) {
	t.journal.Read(ctx, took, err)
}

// failed and rejected mark spans (see package internal/telemetry).
var failed, rejected = otelx.Failed, otelx.Rejected

// noSpan is the span used when tracing is off.
func noSpan() trace.Span { return trace.SpanFromContext(context.Background()) }
