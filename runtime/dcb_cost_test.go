package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/postgres"
)

// traceRoundTrips is a pgx tracer counting the round trips to Postgres made on
// behalf of one trace: a query is one, a batch (pipelined) is one. The
// journal runs an append batch under its first append's span context, and
// reads under the caller's, so everything a DCB command sends is counted.
type traceRoundTrips struct {
	mu    sync.Mutex
	trace trace.TraceID
	sent  []string // one line per round trip: its statements
}

func (c *traceRoundTrips) watch(id trace.TraceID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trace, c.sent = id, nil
}

func (c *traceRoundTrips) roundTrips() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

func (c *traceRoundTrips) mine(ctx context.Context) bool {
	id := trace.SpanContextFromContext(ctx).TraceID()
	return id.IsValid() && id == c.trace
}

func (c *traceRoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mine(ctx) {
		c.sent = append(c.sent, firstWord(d.SQL))
	}
	return ctx
}

func (c *traceRoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *traceRoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mine(ctx) {
		c.sent = append(c.sent, "batch:")
	}
	return ctx
}

func (c *traceRoundTrips) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mine(ctx) && len(c.sent) > 0 {
		c.sent[len(c.sent)-1] += " " + firstWord(d.SQL)
	}
}

func (c *traceRoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func firstWord(sql string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
	return w
}

// A transfer between two idle wallets whose actors are live costs one round
// trip to Postgres: the append (with its expected versions, leases and
// condition in one pipelined transaction). Reserving the wallets, building
// the state (from the actors' states, or by folding the wallets' events from
// the executor's caches) and releasing the wallets send nothing.
func TestDCBTransferBetweenIdleWalletsCostsOneRoundTrip(t *testing.T) {
	t.Parallel()
	counter := &traceRoundTrips{}
	pool, schema := pgtest.PoolWith(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = counter })
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(context.Background(), pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	a := startDCB(t, &env{j: j, s: j})
	a.openWallets(t, 4, 100)
	tracer := sdktrace.NewTracerProvider().Tracer("test")

	for _, form := range []struct {
		name     string
		from, to string
		execute  func(context.Context, Transfer) error
	}{
		{"states", "0", "1", func(ctx context.Context, c Transfer) error { _, err := a.transfer.Execute(ctx, c); return err }},
		{"events", "2", "3", func(ctx context.Context, c Transfer) error { _, err := a.fold.Execute(ctx, c); return err }},
	} {
		// The first transfer of the form may read what it has not seen.
		require.NoError(t, form.execute(context.Background(), Transfer{From: form.from, To: form.to, Amount: 1}), form.name)
		for _, c := range []Transfer{{From: form.to, To: form.from, Amount: 2}, {From: form.from, To: form.to, Amount: 3}} {
			ctx, span := tracer.Start(context.Background(), "transfer")
			counter.watch(span.SpanContext().TraceID())
			require.NoError(t, form.execute(ctx, c), form.name)
			span.End()
			sent := counter.roundTrips()
			require.Len(t, sent, 1, "%s transfer %s→%s: one round trip, the append; sent %q", form.name, c.From, c.To, sent)
			require.True(t, strings.HasPrefix(sent[0], "batch:"), "%s: the append is one pipelined batch: %q", form.name, sent[0])
		}
	}
}
