package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// bank check-events passes on what this build wrote and fails, naming the
// type, the version and the first event, on a stored version no upcaster
// reads.
func TestCheckEvents(t *testing.T) {
	t.Parallel()
	pool, schema := pgSchema(t)
	url := pgtest.URL(t)
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "check-node", Logger: testLogger(t), DatabaseURL: url, Schema: schema})
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"c1","customer":{"id":"cu1","name":"Ada","email":"ada@example.com"}}`).Status)
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"c2"}`).Status)
	for range 3 {
		r := ts.request("POST", "/accounts/c1/deposit", `{"amount":5}`)
		require.Equal(t, 200, r.Status, string(r.Body))
	}
	ts.stop()

	check := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code := runCheckEvents(ctx, append([]string{"-db", url, "-schema", schema}, args...), func(string) string { return "" }, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := check()
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "every one decodes")
	require.Contains(t, out, "MoneyDeposited")

	// A deposit stored at a version this build has no upcaster for.
	ctx := context.Background()
	var id string
	require.NoError(t, pool.QueryRow(ctx, "UPDATE "+pgx.Identifier{schema, "events"}.Sanitize()+
		" SET schema_version = 2 WHERE id = (SELECT id FROM "+pgx.Identifier{schema, "events"}.Sanitize()+
		" WHERE type = 'MoneyDeposited' ORDER BY commit_xid, seq LIMIT 1) RETURNING id::text").Scan(&id))
	code, out, errOut = check()
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, "MoneyDeposited v2: 1 failed, first event "+id)
	code, _, _ = check("-sample", "1")
	require.Equal(t, 1, code, "a sample of one per version still reads the failing version")
}
