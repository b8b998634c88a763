package projection_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/projection"
)

// TestRunnerLeavesGlobalsAlone: a runner given no Logger and no
// MeterProvider writes nothing to slog's default logger and records nothing
// in the global OpenTelemetry meter provider (the library never reads the
// globals; its logging default is discard, as the runtime's). Not parallel:
// it sets both globals and restores them before the parallel tests resume.
func TestRunnerLeavesGlobalsAlone(t *testing.T) {
	var logs bytes.Buffer
	prevLog := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prevLog)
	reader := sdkmetric.NewManualReader()
	prevMeter := otel.GetMeterProvider()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	defer otel.SetMeterProvider(prevMeter)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j := memory.New()
	res, err := j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "Noted", SchemaVersion: 1, Tags: []journal.Tag{"note:1"}, Data: []byte(`{}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	var calls atomic.Int32
	r, err := projection.NewRunner(j, projection.NewMemoryStore(), projection.Projection[projection.NoTx]{
		Name: "globals", Version: 1,
		Handle: func(context.Context, projection.NoTx, projection.Batch) error {
			if calls.Add(1) == 1 {
				return errors.New("a transient failure, retried (and logged)")
			}
			return nil
		},
	}, projection.Options{Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	require.NoError(t, r.WaitFor(ctx, res.Last()))
	stop()
	<-done
	require.GreaterOrEqual(t, calls.Load(), int32(2), "the handler failed once and was retried")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	require.Empty(t, rm.ScopeMetrics, "nothing recorded in the global meter provider")
	require.Empty(t, logs.String(), "nothing written to slog's default logger")
}
