package postgres_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/scribe-es/scribe/internal/metricread"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// TestStatsMetricsCountAKnownWorkload: with Config.MeterProvider, the
// engine's counters are reported as metrics: every one from the start (at
// 0), each equal to the journal's own count; n appends of k events one
// after another are n batches carrying n appends and n·k events, none
// fenced, their time positive and at least their write round trips'. Each
// data point names its schema; after Close the journal reports nothing.
func TestStatsMetricsCountAKnownWorkload(t *testing.T) {
	t.Parallel()
	r := metricread.New()
	f := setup(t, func(c *postgres.Config) { c.MeterProvider = r.Provider })
	ctx := t.Context()
	counters := f.journal.EngineCounters()
	require.Len(t, counters, 12, "one metric per counter")
	sums, err := r.Sums(ctx)
	require.NoError(t, err)
	for name := range counters {
		v, ok := sums[name]
		require.True(t, ok, "metric %s is reported before any append", name)
		require.Zero(t, v, name)
	}

	const n, k = 5, 3
	for i := range n {
		evs := make([]journal.Event, k)
		for e := range evs {
			evs[e] = event("Noted", journal.NewTag("note", fmt.Sprint(i, "-", e)))
		}
		_, err := f.journal.Append(ctx, evs, journal.AppendOptions{})
		require.NoError(t, err)
	}
	sums, err = r.Sums(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n), sums.Int(postgres.MetricBatchAppends))
	require.Equal(t, int64(n*k), sums.Int(postgres.MetricBatchEvents))
	require.Equal(t, int64(n), sums.Int(postgres.MetricBatches), "appends one after another: one batch each")
	require.Zero(t, sums.Int(postgres.MetricBatchesFenced))
	require.GreaterOrEqual(t, sums.Int(postgres.MetricBatchesDirect)+sums.Int(postgres.MetricBatchesReadFirst), int64(n))
	require.Positive(t, sums.Duration(postgres.MetricBatchWriteTime))
	require.GreaterOrEqual(t, sums.Duration(postgres.MetricBatchTime), sums.Duration(postgres.MetricBatchWriteTime))
	for name, v := range f.journal.EngineCounters() {
		require.Equal(t, v, sums[name], "metric %s reports the journal's count", name)
	}
	st := f.journal.EngineStats()
	require.Equal(t, st.BatchTime, sums.Duration(postgres.MetricBatchTime))

	rm, err := r.Collect(ctx)
	require.NoError(t, err)
	require.Equal(t, "github.com/scribe-es/scribe/postgres", rm.ScopeMetrics[0].Scope.Name)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		var attrs []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			require.True(t, d.IsMonotonic, m.Name)
			for _, p := range d.DataPoints {
				attrs = append(attrs, p.Attributes)
			}
		case metricdata.Sum[float64]:
			require.True(t, d.IsMonotonic, m.Name)
			require.Equal(t, "s", m.Unit, m.Name)
			for _, p := range d.DataPoints {
				attrs = append(attrs, p.Attributes)
			}
		default:
			t.Fatalf("metric %s is a %T, not a counter", m.Name, m.Data)
		}
		require.Len(t, attrs, 1, m.Name)
		schema, _ := attrs[0].Value("scribe.schema")
		require.Equal(t, f.cfg.Schema, schema.AsString(), m.Name)
	}

	require.NoError(t, f.journal.Close())
	sums, err = r.Sums(ctx)
	require.NoError(t, err)
	for name := range counters {
		require.Zero(t, sums[name], "a closed journal reports no %s", name)
	}
}
