package tagconsistency_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/tagconsistency"
)

// backend opens a fresh, empty journal for one test. These tests exercise the
// executor with a plain lock-based owner on the memory journal; package
// runtime runs the same scenarios at full size through the stream actors, on
// the memory journal and on Postgres.
type backend struct {
	name string
	open func(t *testing.T) store
}

func backends() []backend {
	return []backend{
		{"memory", func(t *testing.T) store {
			m := memory.New()
			t.Cleanup(func() { _ = m.Close() })
			return m
		}},
	}
}

// forEachBackend runs f as a parallel subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

type env struct {
	j       store
	owners  *lockOwners
	x       *tagconsistency.Executor
	spans   *tracetest.SpanRecorder
	metrics *sdkmetric.ManualReader
}

func setup(t *testing.T, b backend, configure ...func(*tagconsistency.Config, *lockOwners)) env {
	t.Helper()
	j := b.open(t)
	owners, err := newLockOwners(context.Background(), j, "node-"+t.Name())
	require.NoError(t, err)
	spans := tracetest.NewSpanRecorder()
	metrics := sdkmetric.NewManualReader()
	cfg := tagconsistency.Config{
		Journal:        j,
		Owners:         owners,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics)),
	}
	for _, c := range configure {
		c(&cfg, owners)
	}
	x, err := tagconsistency.New(cfg)
	require.NoError(t, err)
	return env{j: j, owners: owners, x: x, spans: spans, metrics: metrics}
}

// counter sums the data points of an Int64 counter, filtered by attribute
// value when outcome is not empty.
func (e env) counter(t *testing.T, name, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.metrics.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is not an int64 sum", name)
			for _, dp := range sum.DataPoints {
				if v, ok := dp.Attributes.Value("scribe.outcome"); outcome == "" || (ok && v.AsString() == outcome) {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// histogramCount returns how many values a float64 histogram recorded.
func (e env) histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.metrics.Collect(context.Background(), &rm))
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			require.True(t, ok, "%s is not a float64 histogram", name)
			for _, dp := range h.DataPoints {
				n += dp.Count
			}
		}
	}
	return n
}

// deposit opens or funds an account as an aggregate command.
func (e env) deposit(ctx context.Context, account journal.Tag, amount int64) error {
	_, err := e.owners.Do(ctx, journal.Stream(account), func(*lockStream) ([]journal.Event, error) {
		return []journal.Event{depositEvent(account, amount)}, nil
	})
	return err
}

// withdraw takes amount out of an account as an aggregate command, refusing
// to overdraw it.
func (e env) withdraw(ctx context.Context, account journal.Tag, amount int64) error {
	_, err := e.owners.Do(ctx, journal.Stream(account), func(s *lockStream) ([]journal.Event, error) {
		s.balance += balanceOf(account, s.records[s.balanceAt:])
		s.balanceAt = len(s.records)
		if s.balance < amount {
			return nil, errInsufficient
		}
		return []journal.Event{withdrawEvent(account, amount)}, nil
	})
	return err
}

// readAll collects a query's records.
func readAll(t *testing.T, j journal.Reader, q journal.Query) []journal.Record {
	t.Helper()
	var out []journal.Record
	for r, err := range j.Read(context.Background(), q, journal.ReadOptions{}) {
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

// readStream collects a stream's records and checks its versions are 1..n.
func readStream(t *testing.T, j journal.Reader, tag journal.Tag) []journal.Record {
	t.Helper()
	var out []journal.Record
	for r, err := range j.ReadStream(context.Background(), journal.Stream(tag), 1, 0) {
		require.NoError(t, err)
		require.Equal(t, uint64(len(out)+1), r.Version(tag), "versions of %s have a gap", tag)
		out = append(out, r)
	}
	return out
}
