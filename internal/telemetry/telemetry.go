package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// Names shared by every engine span and metric.
const (
	// AttrErrorType carries journal.ErrorType of a failure (OpenTelemetry's
	// error.type).
	AttrErrorType = attribute.Key("error.type")
	// AttrRejected marks a span whose command was rejected by its Decide.
	AttrRejected = attribute.Key("scribe.rejected")
	// EventRejection is the span event that carries a rejection's message.
	EventRejection = "scribe.rejection"

	// MetricAppendLatency, MetricAppendedEvents and MetricReadLatency name
	// the journal-call instruments (JournalCalls).
	MetricAppendLatency  = "scribe.journal.append.duration"
	MetricAppendedEvents = "scribe.journal.append.events"
	MetricReadLatency    = "scribe.journal.read.duration"
)

// JournalCalls records the journal calls of one engine path: append latency
// (with error.type when the append failed), events appended, and read
// latency. who says whose calls they are in the instruments' descriptions
// ("stream actors", "DCB commands").
type JournalCalls struct {
	appendLatency  metric.Float64Histogram
	appendedEvents metric.Int64Counter
	readLatency    metric.Float64Histogram
}

// NewJournalCalls creates the instruments on m; reads describes what the path
// reads (for the read latency's description).
func NewJournalCalls(m metric.Meter, who, reads string) (JournalCalls, error) {
	var c JournalCalls
	var err error
	if c.appendLatency, err = m.Float64Histogram(MetricAppendLatency,
		metric.WithDescription("Latency of the journal appends made by "+who+"; a failed append carries error.type."), metric.WithUnit("s")); err != nil {
		return c, err
	}
	if c.appendedEvents, err = m.Int64Counter(MetricAppendedEvents,
		metric.WithDescription("Events the "+who+"' journal appends stored (write throughput)."), metric.WithUnit("{event}")); err != nil {
		return c, err
	}
	if c.readLatency, err = m.Float64Histogram(MetricReadLatency,
		metric.WithDescription("Latency of the journal reads of "+reads+"; a failed read carries error.type."), metric.WithUnit("s")); err != nil {
		return c, err
	}
	return c, nil
}

// Append records one journal append: its latency (with error.type when it
// failed) and, when it succeeded, the events it stored.
func (c JournalCalls) Append(ctx context.Context, took time.Duration, events int, err error) {
	if err != nil {
		c.appendLatency.Record(ctx, took.Seconds(), metric.WithAttributes(AttrErrorType.String(journal.ErrorType(err))))
		return
	}
	c.appendLatency.Record(ctx, took.Seconds())
	c.appendedEvents.Add(ctx, int64(events))
}

// Read records the latency of one journal read (with error.type when it
// failed).
func (c JournalCalls) Read(ctx context.Context, took time.Duration, err error) {
	if err != nil {
		c.readLatency.Record(ctx, took.Seconds(), metric.WithAttributes(AttrErrorType.String(journal.ErrorType(err))))
		return
	}
	c.readLatency.Record(ctx, took.Seconds())
}

// Failed marks span as an infrastructure failure: status Error, the error
// recorded, and its error.type.
func Failed(span trace.Span, err error) {
	span.RecordError(err)
	span.SetAttributes(AttrErrorType.String(journal.ErrorType(err)))
	span.SetStatus(codes.Error, err.Error())
}

// Rejected marks span as carrying a domain rejection (Decide's error): the
// status stays Unset (the system worked as intended), AttrRejected is set and
// an EventRejection event carries the message.
func Rejected(span trace.Span, err error) {
	span.SetAttributes(AttrRejected.Bool(true))
	span.AddEvent(EventRejection, trace.WithAttributes(attribute.String("exception.message", err.Error())))
}

// TraceParent is the W3C traceparent header of sc ("" when sc is not valid),
// the form journal.Metadata.TraceParent stores.
func TraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}
