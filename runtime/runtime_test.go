package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := runtime.New(ctx, runtime.Config{})
	require.ErrorContains(t, err, "Config.Journal is nil")
	_, err = runtime.New(ctx, runtime.Config{Journal: memory.New(), Bounds: runtime.Bounds{OpenTimeout: -1}})
	require.ErrorContains(t, err, "OpenTimeout is negative")

	rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New()})
	require.NoError(t, err)
	defer func() { require.NoError(t, rt.Shutdown(ctx)) }()
	cfg := rt.Config()
	require.NotEmpty(t, cfg.NodeID, "defaults to the host name")
	require.NotNil(t, cfg.Sessions, "defaults to the journal")
	require.Equal(t, runtime.DefaultBounds(), cfg.Bounds, "every zero limit takes its default")
	require.Equal(t, 5*time.Second, cfg.OpenTimeout, "the documented default")
	require.Equal(t, time.Minute, cfg.SessionTimeout)
	require.Equal(t, 2*time.Minute, cfg.IdleTimeout)
	require.Equal(t, 1000, cfg.MaxBatch)
	require.Equal(t, 10*time.Millisecond, cfg.QueueDelayTarget)
	require.Equal(t, uint64(100), cfg.SnapshotPolicy.Every)

	_, err = runtime.New(ctx, runtime.Config{Journal: memory.New(), Bounds: runtime.Bounds{QueueDelayTarget: time.Second}})
	require.ErrorContains(t, err, "QueueDelayTarget (1s) is not shorter than Config.QueueDelayInterval (100ms)", "passed to the stream actors and validated")
}

func TestRegistrationErrors(t *testing.T) {
	t.Parallel()
	rt := memoryEnv().start(t)
	require.ErrorIs(t, runtime.RegisterEvent[Incremented](rt, "Incremented", 1), runtime.ErrRegistration)
	require.ErrorIs(t, runtime.RegisterEvent[*Incremented](rt, "Ptr", 1), runtime.ErrRegistration)
	require.ErrorIs(t, runtime.RegisterEvent[int](rt, "Scalar", 1), runtime.ErrRegistration)
	require.ErrorIs(t, runtime.RegisterEvent[struct{ X int }](rt, "Zero", 0), runtime.ErrRegistration)
	require.ErrorIs(t, runtime.RegisterUpcaster(rt, "Nope", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil }), runtime.ErrRegistration)
	require.ErrorIs(t, runtime.RegisterUpcaster(rt, "Incremented", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil }), runtime.ErrRegistration, "nothing to upcast to")
	require.ErrorIs(t, runtime.RegisterAggregate(rt, counterAggregate(1)), runtime.ErrRegistration)
	bad := counterAggregate(1)
	bad.Name = "a:b"
	require.ErrorIs(t, runtime.RegisterAggregate(rt, bad), runtime.ErrRegistration)

	_, err := rt.Execute(context.Background(), runtime.Target{Aggregate: "ghost", ID: "1"}, Increment{By: 1})
	require.ErrorIs(t, err, runtime.ErrUnknownAggregate)
	_, err = runtime.ExecuteTyped[Account](context.Background(), rt, counter("1"), Increment{By: 1})
	require.ErrorContains(t, err, "another type")
	_, err = rt.Execute(context.Background(), counter(""), Increment{By: 1})
	require.ErrorContains(t, err, "ID is empty")
}

type unregistered struct{ X int }

type Renamed struct {
	Amount int `json:"amount"`
}

// Transferred carries an extra tag.
type Transferred struct {
	ID string `json:"id"`
	By int    `json:"by"`
}

func (t Transferred) Tags() []journal.Tag { return []journal.Tag{journal.NewTag("transfer", t.ID)} }

func TestEventsUpcastersAndTags(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := memoryEnv()
	e.snaps = nil // replay the stored v1 event instead of loading a snapshot
	target := runtime.Target{Aggregate: "ledger", ID: "L1"}
	ledger := runtime.Aggregate[int]{
		Name:    "ledger",
		Initial: func() int { return 0 },
		Decide: func(s int, cmd any) ([]any, error) {
			switch c := cmd.(type) {
			case Increment:
				return []any{Renamed{Amount: c.By}}, nil
			case Transferred:
				return []any{c}, nil
			}
			return []any{unregistered{1}}, nil
		},
		Evolve: func(s int, ev any) int {
			switch e := ev.(type) {
			case Renamed:
				return s + e.Amount
			case Transferred:
				return s + e.By
			}
			return s
		},
	}
	// Version 1 of the event stored "value".
	rt1 := e.start(t)
	require.NoError(t, runtime.RegisterEvent[struct {
		Value int `json:"value"`
	}](rt1, "Renamed", 1))
	require.NoError(t, runtime.RegisterEvent[Transferred](rt1, "Transferred", 1))
	v1 := ledger
	v1.Decide = func(s int, cmd any) ([]any, error) {
		return []any{struct {
			Value int `json:"value"`
		}{Value: cmd.(Increment).By}}, nil
	}
	v1.Evolve = func(s int, _ any) int { return s }
	require.NoError(t, runtime.RegisterAggregate(rt1, v1))
	_, err := rt1.Execute(ctx, target, Increment{By: 5})
	require.NoError(t, err)
	require.NoError(t, rt1.Shutdown(ctx))

	// Version 2 renamed the field; an upcaster rewrites stored v1 events.
	rt2 := e.start(t, func(c *runtime.Config) { c.NodeID = "v2" })
	require.NoError(t, runtime.RegisterEvent[Renamed](rt2, "Renamed", 2))
	require.NoError(t, runtime.RegisterEvent[Transferred](rt2, "Transferred", 1))
	require.NoError(t, runtime.RegisterUpcaster(rt2, "Renamed", 1, func(d json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(strings.Replace(string(d), `"value"`, `"amount"`, 1)), nil
	}))
	require.NoError(t, runtime.RegisterAggregate(rt2, ledger))
	res, err := runtime.ExecuteTyped[int](ctx, rt2, target, Increment{By: 1})
	require.NoError(t, err)
	require.Equal(t, 6, res.State, "the v1 event was upcast and applied")
	require.Equal(t, 2, res.Records[0].SchemaVersion)

	// An aggregate event with a tag of another stream would bypass that
	// stream's owner: the command fails and appends nothing.
	_, err = runtime.ExecuteTyped[int](ctx, rt2, target, Transferred{ID: "t9", By: 10})
	require.ErrorIs(t, err, runtime.ErrForeignTags)
	require.ErrorContains(t, err, "transfer:t9")
	require.ErrorContains(t, err, "DCB")
	sum, err := e.j.TagSummary(ctx, journal.Stream("transfer:t9"))
	require.NoError(t, err)
	require.Zero(t, sum.Version, "nothing reached the other tag's stream")

	res, err = runtime.ExecuteTyped[int](ctx, rt2, target, Increment{By: 10},
		runtime.WithMetadata(journal.Metadata{CorrelationID: "corr-1", UserID: "ada"}))
	require.NoError(t, err)
	require.Equal(t, 16, res.State)
	rec := res.Records[0]
	require.Equal(t, []journal.Tag{"ledger:L1"}, rec.Tags)
	require.Equal(t, "corr-1", rec.Metadata.CorrelationID)
	require.Equal(t, "ada", rec.Metadata.UserID)
	require.False(t, rec.Metadata.CreatedAt.IsZero())

	_, err = rt2.Execute(ctx, target, "something else")
	require.ErrorIs(t, err, runtime.ErrUnknownEvent)
	require.ErrorContains(t, err, "unregistered")
}

func TestTelemetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(ctx) }()
	mp, collect := metricReader(t)
	e := memoryEnv()
	rt := e.start(t, func(c *runtime.Config) { c.TracerProvider = tp; c.MeterProvider = mp })
	target := counter("otel")
	res := mustExec(t, rt, target, Increment{By: 2})
	_, err := rt.Execute(ctx, target, Increment{By: -1})
	require.ErrorIs(t, err, errNegative)

	ended := spans.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	require.Len(t, byName[otelx.SpanStreamExecute], 2)
	require.Len(t, byName[otelx.SpanStreamDecide], 2)
	require.Len(t, byName[otelx.SpanStreamAppend], 1, "the rejected command appends nothing")
	require.Len(t, byName[otelx.SpanStreamRecover], 1)

	exec := byName[otelx.SpanStreamExecute][0]
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range exec.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	require.Equal(t, "default/counter:otel", attrs[otelx.AttrStream].AsString())
	require.Equal(t, "counter", attrs[otelx.AttrAggregate].AsString())
	require.Contains(t, attrs, otelx.AttrMailboxWait)
	require.GreaterOrEqual(t, attrs[otelx.AttrMailboxWait].AsFloat64(), 0.0)
	require.Equal(t, int64(1), attrs[otelx.AttrVersion].AsInt64())

	for _, child := range []sdktrace.ReadOnlySpan{byName[otelx.SpanStreamDecide][0], byName[otelx.SpanStreamAppend][0], byName[otelx.SpanStreamRecover][0]} {
		require.Equal(t, exec.SpanContext().SpanID(), child.Parent().SpanID(), "%s is a child of the first execute", child.Name())
		require.Equal(t, exec.SpanContext().TraceID(), child.SpanContext().TraceID())
	}
	require.Equal(t, byName[otelx.SpanStreamExecute][1].SpanContext().SpanID(), byName[otelx.SpanStreamDecide][1].Parent().SpanID())
	// The rejected command (a domain error) is not a failure of the system:
	// its spans keep status Unset and carry the rejection as an event.
	for _, s := range []sdktrace.ReadOnlySpan{byName[otelx.SpanStreamExecute][1], byName[otelx.SpanStreamDecide][1]} {
		require.Equal(t, codes.Unset, s.Status().Code, s.Name())
		require.Contains(t, s.Attributes(), otelx.AttrRejected.Bool(true), s.Name())
		require.Len(t, s.Events(), 1, s.Name())
		require.Equal(t, otelx.EventRejection, s.Events()[0].Name)
	}
	// The event carries the trace context of its command.
	require.Contains(t, res.Records[0].Metadata.TraceParent, exec.SpanContext().TraceID().String())

	rm := collect()
	require.Equal(t, int64(2), sumOf(t, rm, otelx.MetricCommands))
	require.Equal(t, int64(1), sumOf(t, rm, otelx.MetricActivations))
	require.Equal(t, int64(1), sumOf(t, rm, otelx.MetricRecoveries))
	require.Equal(t, int64(1), sumOf(t, rm, otelx.MetricActiveActors))
	outcomes := map[string]int64{}
	m, _ := findMetric(rm, otelx.MetricCommands)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(otelx.AttrOutcome)
		outcomes[v.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{otelx.OutcomeOK: 1, otelx.OutcomeDomainError: 1}, outcomes)
	lat, ok := findMetric(rm, otelx.MetricAppendLatency)
	require.True(t, ok)
	require.Equal(t, uint64(1), lat.Data.(metricdata.Histogram[float64]).DataPoints[0].Count)
	require.Equal(t, int64(1), sumOf(t, rm, otelx.MetricAppendedEvents), "write throughput counts the stored events")
	read, ok := findMetric(rm, otelx.MetricReadLatency)
	require.True(t, ok)
	require.Equal(t, uint64(1), read.Data.(metricdata.Histogram[float64]).DataPoints[0].Count, "the recovery's replay is one read")

	require.NoError(t, rt.Shutdown(ctx))
	rm = collect()
	require.Equal(t, int64(1), sumOf(t, rm, otelx.MetricPassivations))
	require.Equal(t, int64(0), sumOf(t, rm, otelx.MetricActiveActors))
}

func TestShutdownPassivatesAndRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := memoryEnv()
	rt := e.start(t)
	for _, id := range []string{"a", "b", "c"} {
		mustExec(t, rt, counter(id), Increment{By: 1})
	}
	require.Equal(t, 3, rt.ActiveStreams())
	require.NoError(t, rt.Shutdown(ctx))
	require.Equal(t, 0, rt.ActiveStreams())
	_, err := rt.Execute(ctx, counter("a"), Increment{By: 1})
	require.ErrorIs(t, err, runtime.ErrShutdown)
	// Every lease was released: another node takes the streams at once.
	other, err := e.s.OpenNode(ctx, "other", time.Minute)
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		_, err := e.s.Acquire(ctx, other, counter(id).Stream(), 0)
		require.NoError(t, err)
	}
}

func TestIdleStreamsPassivate(t *testing.T) {
	t.Parallel()
	e := memoryEnv()
	rt := e.start(t, func(c *runtime.Config) { c.IdleTimeout = 20 * time.Millisecond })
	mustExec(t, rt, counter("sleepy"), Increment{By: 1})
	require.Eventually(t, func() bool { return rt.ActiveStreams() == 0 }, 5*time.Second, 5*time.Millisecond)
	// It comes back on the next command, from its passivation snapshot.
	require.Equal(t, 2, mustExec(t, rt, counter("sleepy"), Increment{By: 1}).State.Count)
	infos, err := e.snaps.List(context.Background(), counter("sleepy").Stream())
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, uint64(1), infos[0].Version)
}
