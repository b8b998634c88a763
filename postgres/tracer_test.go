package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgtrace"
)

// The tracer records a client span per statement and batch, named by its
// summary, with the database conventions' attributes, never the statement
// or its arguments, as children of the caller's span; the batched append
// path keeps the caller's trace.
func TestTracerSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(ctx) }()
	pool, schema := pgtest.PoolWith(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = pgtrace.New(tp) })
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })

	pctx, parent := tp.Tracer("test").Start(ctx, "caller")
	secret := "s3cr3t-value"
	_, err = j.Append(pctx, []journal.Event{{ID: journal.NewEventID(), Type: "Opened", Tags: []journal.Tag{journal.Tag("account:" + secret)}, Data: []byte(`{"owner":"` + secret + `"}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = pool.Exec(pctx, "SELECT * FROM "+`"`+schema+`"`+".no_such_table WHERE x = $1", secret)
	require.Error(t, err)
	parent.End()

	var inTrace []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == parent.SpanContext().TraceID() && s.Name() != "caller" {
			inTrace = append(inTrace, s)
		}
	}
	require.NotEmpty(t, inTrace, "the statements of the append and the query are in the caller's trace")
	var sawInsert, sawFailed bool
	for _, s := range inTrace {
		require.Equal(t, trace.SpanKindClient, s.SpanKind(), s.Name())
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
			require.NotContains(t, kv.Value.Emit(), secret, "span %s attribute %s carries an argument", s.Name(), kv.Key)
		}
		require.NotContains(t, s.Name(), secret)
		require.Equal(t, "postgresql", attrs[pgtrace.AttrDBSystem].AsString(), s.Name())
		require.Contains(t, attrs, pgtrace.AttrDBOperation, s.Name())
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				require.NotContains(t, kv.Value.Emit(), secret, "span %s event %s carries an argument", s.Name(), ev.Name)
				if kv.Key == pgtrace.AttrDBQuerySummary && strings.Contains(kv.Value.AsString(), "INSERT "+schema+".events") {
					sawInsert = true
				}
			}
		}
		if s.Name() == "SELECT "+schema+".no_such_table" {
			sawFailed = true
			require.Equal(t, codes.Error, s.Status().Code)
			require.Equal(t, "42P01", attrs[pgtrace.AttrErrorType].AsString(), "error.type is the SQLSTATE")
			require.Equal(t, schema+".no_such_table", attrs[pgtrace.AttrDBCollection].AsString())
			require.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID())
		}
	}
	var got []string
	for _, s := range inTrace {
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				got = append(got, s.Name()+": "+kv.Value.Emit())
			}
		}
	}
	require.True(t, sawInsert, "a batch's statement event names the insert into the events table: %q", got)
	require.True(t, sawFailed, "the failed query has its span")
}
