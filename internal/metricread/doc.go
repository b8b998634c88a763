// Package metricread reads back the counters a component recorded through
// an OpenTelemetry MeterProvider, for the module's tests and benchmarks:
// give the component Reader.Provider, then read each counter's value by
// name with Reader.Sums. It is how code outside package postgres reads the
// append engine's counters (postgres.MetricBatches and the rest).
package metricread
