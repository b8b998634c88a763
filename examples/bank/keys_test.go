package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// TestKeyStoreMissingAnswers503: the events restored without their key
// store (the key store schema dropped under a running bank) make reads of
// sealed data answer 503 key_store_unavailable with a message saying what
// to do, never 500 internal, for every customer; an account without a
// customer still reads; personal data never appears in the answers; and
// `scribe subjects` exits non-zero saying the key store is missing, unlike
// an erased subject.
func TestKeyStoreMissingAnswers503(t *testing.T) {
	t.Parallel()
	const name, email = "Carol Keyless-Marker", "carol.keyless@example.com"
	pool, schema := pgSchema(t)
	url := pgtest.URL(t)
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "keyless-node", Logger: testLogger(t), DatabaseURL: url, Schema: schema})
	r := ts.request("POST", "/accounts", `{"id":"k1","customer":{"id":"c-k1","name":"`+name+`","email":"`+email+`"}}`)
	require.Equal(t, 201, r.Status, string(r.Body))
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"k2","customer":{"id":"c-k2","name":"Dave","email":"dave@example.com"}}`).Status)
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"k3"}`).Status)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{keySchema(schema)}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	// A restart reads the events afresh (no actor in memory, no snapshot)
	// and creates an empty key store: the data's keys are not in it.
	ts.stop()
	_, err = pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema, "snapshots"}.Sanitize())
	require.NoError(t, err)
	ts = startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "keyless-node", Logger: testLogger(t), DatabaseURL: url, Schema: schema})
	requireKeyStoreUnavailable(t, ts, name, email, "no key")
	// The key store schema dropped under the running bank: missing.
	_, err = pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{keySchema(schema)}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	requireKeyStoreUnavailable(t, ts, name, email, "missing")
	r = ts.request("GET", "/accounts/k3", "")
	require.Equal(t, 200, r.Status, "an account without personal data reads: %s", r.Body)

	bin := buildScribe(t)
	out, code := runScribe(t, ctx, bin, "subjects", "-db", url, "-schema", schema, "-keys", keySchema(schema))
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "key store")
	require.Contains(t, out, "missing")
	require.Contains(t, out, "restore")
	require.NotContains(t, out, name)
}

// requireKeyStoreUnavailable asserts that reads of sealed data answer 503
// key_store_unavailable with a message containing what, and never the
// personal data.
func requireKeyStoreUnavailable(t *testing.T, ts *testServer, name, email, what string) {
	t.Helper()
	for _, path := range []string{"/accounts/k1", "/accounts/k2", "/accounts/k1/events"} {
		r := ts.request("GET", path, "")
		require.Equal(t, 503, r.Status, "%s: %s", path, r.Body)
		var body errorBody
		require.NoError(t, json.Unmarshal(r.Body, &body), string(r.Body))
		require.Equal(t, codeKeyStoreUnavailable, body.Code, path)
		require.Contains(t, body.Error, "key store")
		require.Contains(t, body.Error, what)
		require.Contains(t, body.Error, "-keys-db")
		require.NotContains(t, string(r.Body), name)
		require.NotContains(t, string(r.Body), email)
	}
}
