package postgres

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The append engine's counters since NewJournal, reported through
// Config.MeterProvider as asynchronous counters read when it collects (the
// write path pays one atomic add), each data point with scribe.schema: the
// journals of one schema in a process (a primary and its Replica) add up; a
// closed Journal's leave the sum. A batch is one append transaction; a rerun
// after a fence is another.
const (
	// MetricBatches counts append transactions, reruns included.
	MetricBatches = "scribe.postgres.batches"
	// MetricBatchAppends and MetricBatchEvents count the appends and events
	// those transactions carried (a rerun's again).
	MetricBatchAppends = "scribe.postgres.batch.appends"
	MetricBatchEvents  = "scribe.postgres.batch.events"
	// MetricBatchesDirect counts batches decided on remembered stream heads
	// and sent in one round trip; MetricBatchesReadFirst those that read
	// the streams first.
	MetricBatchesDirect    = "scribe.postgres.batch.direct"
	MetricBatchesReadFirst = "scribe.postgres.batch.read_first"
	// MetricBatchesFenced counts batches the write statement's fence rolled
	// back (each decided again on what was read).
	MetricBatchesFenced = "scribe.postgres.batch.fenced"
	// MetricBatchTime totals, in seconds, the batches from taking a
	// connection to their outcomes; MetricBatchWriteTime their write round
	// trips. Divided by MetricBatches' increase: the mean of each.
	MetricBatchTime      = "scribe.postgres.batch.time"
	MetricBatchWriteTime = "scribe.postgres.batch.write.time"
	// MetricImpliedConditions counts DCB conditions that needed no query of
	// their own (see "DCB conditions" in the package documentation).
	MetricImpliedConditions = "scribe.postgres.conditions.implied"
	// MetricDiscardedConns counts pooled connections found closed by the
	// server and discarded before an append used them.
	MetricDiscardedConns = "scribe.postgres.connections.discarded"
	// MetricAcquireWaits counts Acquires that found the stream held and
	// waited.
	MetricAcquireWaits = "scribe.postgres.acquire.waits"
	// MetricReplicaFallbacks counts Replica.ReaderAt calls answered with the
	// primary (the standby had not replayed in Config.ReplicaWait).
	MetricReplicaFallbacks = "scribe.postgres.replica.fallbacks"
)

// meterName is the instrumentation scope of the engine's metrics.
const meterName = "github.com/scribe-es/scribe/postgres"

// attrSchema is the attribute naming a data point's schema.
const attrSchema = attribute.Key("scribe.schema")

// stats are the engine's counters, each added to where it happens and
// reported by the instruments of engineMetrics.
type stats struct {
	batches, appends, events, direct, read, fenced atomic.Int64
	discarded, implied                             atomic.Int64
	acquireWaits                                   atomic.Int64
	replicaFallbacks                               atomic.Int64
	writeNanos, batchNanos                         atomic.Int64
}

// engineMetric is one instrument of the engine: its name, unit and
// description, and the counter it reports. A unit of "s" reports the
// counter's nanoseconds as seconds.
type engineMetric struct {
	name, unit, description string
	counter                 func(*stats) *atomic.Int64
}

// engineMetrics lists the instruments, one per counter of stats.
var engineMetrics = []engineMetric{
	{MetricBatches, "{batch}", "Append transactions of the Postgres journal, reruns included.",
		func(s *stats) *atomic.Int64 { return &s.batches }},
	{MetricBatchAppends, "{append}", "Appends carried by the Postgres journal's append transactions (a rerun's again).",
		func(s *stats) *atomic.Int64 { return &s.appends }},
	{MetricBatchEvents, "{event}", "Events carried by the Postgres journal's append transactions (a rerun's again).",
		func(s *stats) *atomic.Int64 { return &s.events }},
	{MetricBatchesDirect, "{batch}", "Append transactions decided on remembered stream heads and sent in one round trip.",
		func(s *stats) *atomic.Int64 { return &s.direct }},
	{MetricBatchesReadFirst, "{batch}", "Append transactions that read the streams before deciding.",
		func(s *stats) *atomic.Int64 { return &s.read }},
	{MetricBatchesFenced, "{batch}", "Append transactions rolled back by the write statement's fence and decided again.",
		func(s *stats) *atomic.Int64 { return &s.fenced }},
	{MetricBatchTime, "s", "Time of the append transactions, from taking a connection to their outcomes.",
		func(s *stats) *atomic.Int64 { return &s.batchNanos }},
	{MetricBatchWriteTime, "s", "Time of the append transactions' write round trips.",
		func(s *stats) *atomic.Int64 { return &s.writeNanos }},
	{MetricImpliedConditions, "{condition}", "DCB append conditions that needed no query of their own.",
		func(s *stats) *atomic.Int64 { return &s.implied }},
	{MetricDiscardedConns, "{connection}", "Pooled connections found closed by the server and discarded before an append.",
		func(s *stats) *atomic.Int64 { return &s.discarded }},
	{MetricAcquireWaits, "{acquire}", "Stream lease acquisitions that found the stream held and waited.",
		func(s *stats) *atomic.Int64 { return &s.acquireWaits }},
	{MetricReplicaFallbacks, "{read}", "Replica reads answered by the primary: the standby had not replayed the position in time.",
		func(s *stats) *atomic.Int64 { return &s.replicaFallbacks }},
}

// registerMetrics creates the engine's instruments on mp and registers the
// callback that reports j's counters; Close unregisters it.
func (j *Journal) registerMetrics(mp metric.MeterProvider) (metric.Registration, error) {
	m := mp.Meter(meterName)
	ints := make([]metric.Int64ObservableCounter, len(engineMetrics))
	secs := make([]metric.Float64ObservableCounter, len(engineMetrics))
	var observed []metric.Observable
	for i, em := range engineMetrics {
		var err error
		if em.unit == "s" {
			secs[i], err = m.Float64ObservableCounter(em.name, metric.WithUnit(em.unit), metric.WithDescription(em.description))
			observed = append(observed, secs[i])
		} else {
			ints[i], err = m.Int64ObservableCounter(em.name, metric.WithUnit(em.unit), metric.WithDescription(em.description))
			observed = append(observed, ints[i])
		}
		if err != nil {
			return nil, fmt.Errorf("postgres: creating metric %s: %w", em.name, err)
		}
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrSchema.String(j.cfg.Schema)))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, em := range engineMetrics {
			n := em.counter(&j.stats).Load()
			if secs[i] != nil {
				o.ObserveFloat64(secs[i], float64(n)/1e9, opt)
			} else {
				o.ObserveInt64(ints[i], n, opt)
			}
		}
		return nil
	}, observed...)
}
