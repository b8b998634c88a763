package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// telemetry holds the OpenTelemetry providers the service passes to the
// runtime and the HTTP layer. It never sets the OpenTelemetry globals.
type telemetry struct {
	Tracer   trace.TracerProvider
	Meter    metric.MeterProvider
	shutdown []func(context.Context) error
	flush    []func(context.Context) error
	// Description says where traces and metrics go, for the start log line.
	Description string
}

// Flush exports the metrics now: observable counters (the journal's
// scribe.postgres.*) are read at collection, so the service flushes before
// it closes what reports them.
func (t *telemetry) Flush(ctx context.Context) error {
	var errs []error
	for _, f := range t.flush {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// Shutdown flushes and stops the exporters.
func (t *telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// newTelemetry builds the providers: OTLP over HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (the exporters read the standard
// OTEL_EXPORTER_OTLP_* variables themselves), stdout (to w) when toStdout,
// both when both apply, and no-op providers otherwise.
func newTelemetry(ctx context.Context, nodeID string, toStdout bool, w io.Writer) (*telemetry, error) {
	otlp := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	if !otlp && !toStdout {
		return &telemetry{Tracer: tracenoop.NewTracerProvider(), Meter: metricnoop.NewMeterProvider(), Description: "off (use -otel-stdout or set OTEL_EXPORTER_OTLP_ENDPOINT)"}, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName("scribe-bank"), semconv.ServiceInstanceID(nodeID)))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	var topts []sdktrace.TracerProviderOption
	var mopts []sdkmetric.Option
	var dest []string
	if toStdout {
		te, err := stdouttrace.New(stdouttrace.WithWriter(w))
		if err != nil {
			return nil, fmt.Errorf("stdout trace exporter: %w", err)
		}
		me, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
		if err != nil {
			return nil, fmt.Errorf("stdout metric exporter: %w", err)
		}
		topts = append(topts, sdktrace.WithBatcher(te))
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(10*time.Second))))
		dest = append(dest, "stdout")
	}
	if otlp {
		te, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_ENDPOINT=%s): %w", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), err)
		}
		me, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter (OTEL_EXPORTER_OTLP_ENDPOINT=%s): %w", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), err)
		}
		topts = append(topts, sdktrace.WithBatcher(te))
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)))
		dest = append(dest, "OTLP "+os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	tp := sdktrace.NewTracerProvider(append(topts, sdktrace.WithResource(res))...)
	mp := sdkmetric.NewMeterProvider(append(mopts, sdkmetric.WithResource(res))...)
	return &telemetry{
		Tracer:      tp,
		Meter:       mp,
		shutdown:    []func(context.Context) error{tp.Shutdown, mp.Shutdown},
		flush:       []func(context.Context) error{mp.ForceFlush},
		Description: fmt.Sprint(dest),
	}, nil
}
