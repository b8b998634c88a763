package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
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

// TestKeysOnSecondDatabase: the bank with its key store on a second
// Postgres server (-keys-db) seals customers' data there only (no key
// store schema on the events' database), erases a customer and keeps
// serving the others, and `scribe subjects -keys-db` lists the erasure.
func TestKeysOnSecondDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second Postgres server and builds cmd/scribe")
	}
	t.Parallel()
	const name = "Erin Apart-Marker"
	pool, schema := pgSchema(t)
	url := pgtest.URL(t)
	keysURL := throwawaypg.Start(t).URL()
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "keys-apart-node", Logger: testLogger(t), DatabaseURL: url, Schema: schema, KeysDatabaseURL: keysURL})
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"a1","customer":{"id":"c-a1","name":"`+name+`","email":"erin@example.com"}}`).Status)
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"a2","customer":{"id":"c-a2","name":"Frank","email":"frank@example.com"}}`).Status)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var onEvents, onKeys bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{keySchema(schema), "subjects"}.Sanitize()).Scan(&onEvents))
	require.False(t, onEvents, "no key store on the events' database")
	kconn, err := pgx.Connect(ctx, keysURL)
	require.NoError(t, err)
	defer kconn.Close(ctx)
	var n int
	require.NoError(t, kconn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{keySchema(schema), "subjects"}.Sanitize()).Scan(&onKeys))
	require.True(t, onKeys)
	require.NoError(t, kconn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{keySchema(schema), "subjects"}.Sanitize()).Scan(&n))
	require.Equal(t, 2, n)

	require.Equal(t, 204, ts.request("DELETE", "/customers/c-a1", "").Status)
	r := ts.request("GET", "/accounts/a1", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"customer":{"id":"c-a1","erased":true}`)
	require.NotContains(t, string(r.Body), name)
	r = ts.request("GET", "/accounts/a2", "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"name":"Frank"`)
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"a3","customer":{"id":"c-a3","name":"Grace"}}`).Status)
	require.Equal(t, 200, ts.request("POST", "/accounts/a3/deposit", `{"amount":5}`).Status)

	bin := buildScribe(t)
	out, code := runScribe(t, ctx, bin, "subjects", "-db", url, "-schema", schema, "-keys-db", keysURL)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "c-a1")
	require.Contains(t, out, "c-a3")
	require.NotContains(t, out, name)
}
