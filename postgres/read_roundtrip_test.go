package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// statementCounter is a pgx tracer that counts the statements and batches a
// pool sends (each is one round trip on a connection), except the
// journal's notifications, which it sends in the background after appends.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "pg_notify") {
		c.n.Add(1)
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if strings.Contains(q.SQL, "pg_notify") {
			return ctx
		}
	}
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A ReadStream of a stream that fits in its page (8 × PageSize records) is
// one statement; a longer one takes a statement per page. This is the read of every actor recovery: an aggregate
// of 1,000 events loads in one round trip with the default PageSize.
func TestReadStreamStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var counter statementCounter
	pool, schema := pgtest.PoolWith(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = &counter })
	load := func(cfg postgres.Config, stream journal.StreamID, want int) int64 {
		t.Helper()
		j, err := postgres.NewJournal(pool, cfg)
		require.NoError(t, err)
		defer func() { _ = j.Close() }()
		before := counter.n.Load()
		n := 0
		for r, err := range j.ReadStream(ctx, stream, 1, 0) {
			require.NoError(t, err)
			n++
			require.Equal(t, uint64(n), r.Version(stream.Tag))
		}
		require.Equal(t, want, n)
		return counter.n.Load() - before
	}
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	fill := func(tag journal.Tag, n int) {
		t.Helper()
		for done := 0; done < n; {
			batch := min(250, n-done)
			evs := make([]journal.Event, batch)
			for i := range evs {
				evs[i] = journal.Event{ID: journal.NewEventID(), Type: "Deposited", Tags: []journal.Tag{tag},
					Data: []byte(fmt.Sprintf(`{"n":%d}`, done+i+1)), Metadata: journal.Metadata{CorrelationID: "c"}}
			}
			_, err := j.Append(ctx, evs, journal.AppendOptions{})
			require.NoError(t, err)
			done += batch
		}
	}
	fill("account:1000", 1000)
	require.EqualValues(t, 1, load(cfg, journal.Stream("account:1000"), 1000), "a 1,000-event stream is one statement at the default PageSize")

	small := cfg
	small.PageSize = 16 // stream pages of 128
	fill("account:127", 127)
	fill("account:128", 128)
	fill("account:300", 300)
	require.EqualValues(t, 1, load(small, journal.Stream("account:127"), 127))
	// An empty page after a full one might be a cut that moved between the
	// two (the versions archived meanwhile): the stream's cut is read too.
	require.EqualValues(t, 3, load(small, journal.Stream("account:128"), 128), "a full page, an empty one and the cut")
	require.EqualValues(t, 3, load(small, journal.Stream("account:300"), 300))
}
