package metricread

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// TestSums: a counter's value is the sum over its attribute sets and
// scopes, observable counters are read at collection, seconds convert to a
// duration, and a counter never recorded reads as 0.
func TestSums(t *testing.T) {
	ctx := context.Background()
	r := New()
	a, err := r.Provider.Meter("a").Int64Counter("calls")
	require.NoError(t, err)
	a.Add(ctx, 2, metric.WithAttributes(attribute.String("k", "x")))
	a.Add(ctx, 3, metric.WithAttributes(attribute.String("k", "y")))
	b, err := r.Provider.Meter("b").Int64Counter("calls")
	require.NoError(t, err)
	b.Add(ctx, 4)
	secs := 1.5
	_, err = r.Provider.Meter("a").Float64ObservableCounter("time", metric.WithUnit("s"),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error { o.Observe(secs); return nil }))
	require.NoError(t, err)

	s, err := r.Sums(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(9), s.Int("calls"))
	require.Equal(t, 1500*time.Millisecond, s.Duration("time"))
	require.Zero(t, s.Int("never"))

	secs = 2.25
	s, err = r.Sums(ctx)
	require.NoError(t, err)
	require.Equal(t, 2250*time.Millisecond, s.Duration("time"), "read again at the next collection")
	require.Equal(t, int64(9), s.Int("calls"), "cumulative")
}
