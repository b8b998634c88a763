package pgtrace

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span names summarize a statement by operation and table, and never carry
// literals, parameters or comments.
func TestSummarize(t *testing.T) {
	t.Parallel()
	cases := []struct{ sql, want string }{
		{"BEGIN ISOLATION LEVEL READ COMMITTED", "BEGIN"},
		{"COMMIT", "COMMIT"},
		{`INSERT INTO "scribe".events (id, data) VALUES ($1, 'secret')`, "INSERT scribe.events"},
		{`UPDATE "my schema".streams SET v = $1 WHERE tag = 'x'`, "UPDATE my schema.streams"},
		{`DELETE FROM scribe.snapshots WHERE tag = $1`, "DELETE scribe.snapshots"},
		{`SELECT count(*) FROM "scribe".event_tags t JOIN "scribe".events e ON true`, "SELECT scribe.event_tags"},
		{`SELECT x FROM unnest($1::text[]) AS u(x)`, "SELECT"},
		{`SELECT pg_advisory_xact_lock($1)`, "SELECT"},
		{"-- lock 'a'\n/* comment FROM secrets */ SELECT a FROM (SELECT 1 FROM inner_t) s", "SELECT"},
		{`WITH ins AS (INSERT INTO scribe.events SELECT * FROM src RETURNING 1) UPDATE scribe.streams SET version = 2`, "UPDATE scribe.streams"},
		{`WITH c AS (SELECT 1 FROM a) SELECT * FROM "scribe".nodes`, "SELECT scribe.nodes"},
		{`WITH u AS (UPDATE s.streams SET v = 1 RETURNING 1), i AS (INSERT INTO s.events SELECT 1 RETURNING 1), j AS (INSERT INTO s.events VALUES (2) RETURNING 1) SELECT (SELECT count(*) FROM i)`, "UPDATE s.streams INSERT s.events SELECT"},
		{`select * from Scribe.Tags where x = 'it''s FROM y'`, "SELECT Scribe.Tags"},
		{"", "postgresql"},
		{"$1", "postgresql"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, summarize(c.sql).String(), "%q", c.sql)
	}
}

func TestTracerCachesSummariesUpToItsBound(t *testing.T) {
	tr := New(noop.NewTracerProvider())
	sql := func(i int) string { return fmt.Sprintf("SELECT c FROM t%d WHERE x = $1", i) }
	for i := range maxSummaries + 10 {
		require.Equal(t, summarize(sql(i)), tr.summary(sql(i)))
	}
	require.Equal(t, int64(maxSummaries), tr.cached.Load(), "the cache stops growing at its bound")
	for i := range maxSummaries + 10 {
		require.Equal(t, summarize(sql(i)), tr.summary(sql(i)), "cached and uncached summaries agree")
	}
	require.Equal(t, int64(maxSummaries), tr.cached.Load())
}
