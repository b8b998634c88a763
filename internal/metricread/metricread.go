package metricread

import (
	"context"
	"fmt"
	"math"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader is a MeterProvider whose metrics are read on demand (an SDK
// ManualReader, cumulative temporality). Safe for concurrent use.
type Reader struct {
	// Provider is the MeterProvider to give the component measured.
	Provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

// New returns a Reader with nothing recorded.
func New() *Reader {
	r := sdkmetric.NewManualReader()
	return &Reader{Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), reader: r}
}

// Sums are counters' values by metric name: each the sum of its data points
// over every scope and attribute set, in the instrument's unit (seconds
// stay seconds). A counter never recorded is absent, and reads as 0.
type Sums map[string]float64

// Collect returns every metric recorded so far, asynchronous ones read now.
func (r *Reader) Collect(ctx context.Context) (metricdata.ResourceMetrics, error) {
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(ctx, &rm); err != nil {
		return rm, fmt.Errorf("metricread: collecting metrics: %w", err)
	}
	return rm, nil
}

// Sums collects the counters (and up-down counters) recorded so far,
// asynchronous ones read now.
func (r *Reader) Sums(ctx context.Context) (Sums, error) {
	rm, err := r.Collect(ctx)
	if err != nil {
		return nil, err
	}
	sums := Sums{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					sums[m.Name] += float64(p.Value)
				}
			case metricdata.Sum[float64]:
				for _, p := range data.DataPoints {
					sums[m.Name] += p.Value
				}
			}
		}
	}
	return sums, nil
}

// Int returns the counter name as an integer (a count).
func (s Sums) Int(name string) int64 { return int64(math.Round(s[name])) }

// Duration returns the counter name, in seconds, as a duration.
func (s Sums) Duration(name string) time.Duration {
	return time.Duration(math.Round(s[name] * float64(time.Second)))
}
