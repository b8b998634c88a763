package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// TestFailureResponses checks how service errors become responses: domain
// errors keep code and message, transient errors are 503, anything else is
// a 500 whose body says nothing about the cause.
func TestFailureResponses(t *testing.T) {
	t.Parallel()
	a := &api{log: slog.New(slog.DiscardHandler), shed: newRateLimitedLog(slog.New(slog.DiscardHandler), time.Second, time.Now)}
	ctx := context.Background()
	secret := errors.New("pq: relation scribe.events does not exist at 10.0.0.7:5432")
	for _, tc := range []struct {
		err    error
		status int
		code   bank.Code
	}{
		{bank.NotFound("alice"), 404, bank.CodeAccountNotFound},
		{fmt.Errorf("wrapped: %w", &bank.Error{Code: bank.CodeInsufficientFunds, Message: "no"}), 409, bank.CodeInsufficientFunds},
		{keyReused("k"), 422, codeIdempotencyKeyReused},
		{fmt.Errorf("%w: %w", errUnavailable, secret), 503, codeUnavailable},
		{classify(fmt.Errorf("actors: %w", journal.ErrOpenTimeout)), 503, codeUnavailable},
		{classify(fmt.Errorf("append: %w", journal.ErrOutcomeUnknown)), 503, codeOutcomeUnknown},
		{classify(fmt.Errorf("append: %w", journal.ErrUnavailable)), 503, codeDatabaseUnavailable},
		{classify(fmt.Errorf("actors: %w", runtime.ErrOverloaded)), 503, codeOverloaded},
		{classify(fmt.Errorf("actors: %w", runtime.ErrLeaseLost)), 503, codeLeaseLost},
		{classify(fmt.Errorf("actors: %w: %w", runtime.ErrLeaseLost, journal.ErrNodeSuperseded)), 503, codeLeaseLost},
		{context.DeadlineExceeded, 503, codeUnavailable},
		{secret, 500, codeInternal},
		{classify(secret), 500, codeInternal},
	} {
		r := a.failure(ctx, "op", tc.err)
		require.Equal(t, tc.status, r.status, tc.err.Error())
		var eb errorBody
		require.NoError(t, json.Unmarshal(r.body, &eb))
		require.Equal(t, tc.code, eb.Code)
		require.NotEmpty(t, eb.Error)
		if tc.status == 503 {
			require.Positive(t, r.retryAfter, "a 503 says when to retry")
		}
		if tc.status >= 500 {
			require.NotContains(t, string(r.body), "10.0.0.7")
			require.NotContains(t, string(r.body), "relation")
		}
	}
}

// TestTelemetryToStdout runs a request with -otel-stdout and checks that its
// server span, the runtime's spans and the HTTP metrics are exported.
func TestTelemetryToStdout(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "otel-node", Logger: testLogger(t), OtelStdout: true, TelemetryOut: &out})
	r := ts.request("POST", "/accounts", `{"id":"alice"}`)
	requireAccount(t, r, 201, "alice", 0, 1)
	require.Len(t, r.Header.Get("Trace-Id"), 32)
	ts.stop() // flushes the exporters
	exported := out.String()
	for _, want := range []string{`"Name":"POST /accounts"`, `"Name":"scribe.stream.execute"`, `"Name":"http.server.request.duration"`, `"Key":"http.route"`, r.Header.Get("Trace-Id")} {
		require.Contains(t, exported, want)
	}
	// The runtime's execute span is a child of the request's span.
	require.GreaterOrEqual(t, strings.Count(exported, r.Header.Get("Trace-Id")), 2)
	require.NotContains(t, exported, "bank.http.", "the hand-written HTTP metrics are gone")
}

// TestPanicInHandlerIs500 uses an API without a service: the handler's nil
// dereference is recovered into a 500 whose body says nothing about it.
func TestPanicInHandlerIs500(t *testing.T) {
	t.Parallel()
	h, err := newAPI(apiConfig{})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/accounts", strings.NewReader(`{"id":"alice"}`))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	var eb errorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
	require.Equal(t, codeInternal, eb.Code)
	require.NotContains(t, rec.Body.String(), "nil pointer")

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "not ready without a Ready flag")
}

// TestTelemetryToStdoutOnPostgres: on Postgres the journal's engine
// counters are exported too (scribe.postgres.*, through the bank's
// MeterProvider).
func TestTelemetryToStdoutOnPostgres(t *testing.T) {
	t.Parallel()
	_, schema := pgSchema(t)
	var out lockedBuffer
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "otel-pg-node", Logger: testLogger(t), OtelStdout: true, TelemetryOut: &out,
		DatabaseURL: pgtest.URL(t), Schema: schema})
	r := ts.request("POST", "/accounts", `{"id":"alice"}`)
	requireAccount(t, r, 201, "alice", 0, 1)
	ts.stop() // flushes the exporters
	exported := out.String()
	for _, want := range []string{`"Name":"scribe.postgres.batches"`, `"Name":"scribe.postgres.batch.events"`, `"Name":"scribe.stream.execute"`} {
		require.Contains(t, exported, want)
	}
}
