package main

import (
	"context"
	otelx "github.com/scribe-es/scribe/internal/telemetry"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// spanTree indexes the ended spans of one trace.
type spanTree struct {
	spans    []sdktrace.ReadOnlySpan
	byID     map[trace.SpanID]sdktrace.ReadOnlySpan
	children map[trace.SpanID][]sdktrace.ReadOnlySpan
}

func treeOf(spans []sdktrace.ReadOnlySpan, id trace.TraceID) *spanTree {
	t := &spanTree{byID: map[trace.SpanID]sdktrace.ReadOnlySpan{}, children: map[trace.SpanID][]sdktrace.ReadOnlySpan{}}
	for _, s := range spans {
		if s.SpanContext().TraceID() != id {
			continue
		}
		t.spans = append(t.spans, s)
		t.byID[s.SpanContext().SpanID()] = s
		t.children[s.Parent().SpanID()] = append(t.children[s.Parent().SpanID()], s)
	}
	return t
}

// named returns the children of parent called name.
func (t *spanTree) named(parent sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, c := range t.children[parent.SpanContext().SpanID()] {
		if c.Name() == name {
			out = append(out, c)
		}
	}
	return out
}

// descendants returns every span below s.
func (t *spanTree) descendants(s sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, c := range t.children[s.SpanContext().SpanID()] {
		out = append(out, c)
		out = append(out, t.descendants(c)...)
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// One transfer on Postgres makes one trace: the HTTP server span (otelhttp,
// route pattern) → the DCB command → a reservation per tag at its stream
// actor → the append → the Postgres statements (db.* client spans). A
// rejected transfer (insufficient funds) is no error: its spans keep status
// Unset and carry the rejection.
func TestTransferSpanTree(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, schema := pgSchema(t)
	be, err := openBackend(ctx, pgtest.URL(t), schema, testLogger(t), tp, nil)
	require.NoError(t, err)
	t.Cleanup(be.Close)
	svc, err := newBankService(ctx, bankServiceConfig{Backend: be, NodeID: "trace-node", Logger: testLogger(t), TracerProvider: tp})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	var ready atomic.Bool
	ready.Store(true)
	h, err := newAPI(apiConfig{Service: svc, Logger: testLogger(t), Ready: &ready, TracerProvider: tp})
	require.NoError(t, err)

	do := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if method == http.MethodPost && path == "/transfers" {
			req.Header.Set("Idempotency-Key", "t-"+body)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	require.Equal(t, 201, do("POST", "/accounts", `{"id":"alice"}`).Code)
	require.Equal(t, 201, do("POST", "/accounts", `{"id":"bob"}`).Code)
	require.Equal(t, 200, do("POST", "/accounts/alice/deposit", `{"amount":100}`).Code)

	w := do("POST", "/transfers", `{"from":"alice","to":"bob","amount":25}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	id, err := trace.TraceIDFromHex(w.Header().Get("Trace-Id"))
	require.NoError(t, err)
	require.NoError(t, tp.ForceFlush(ctx))
	tr := treeOf(rec.Ended(), id)

	// HTTP: the root is otelhttp's server span, named by the route pattern.
	var root sdktrace.ReadOnlySpan
	for _, s := range tr.spans {
		if !s.Parent().IsValid() {
			root = s
		}
	}
	require.NotNil(t, root, "the trace has a root")
	require.Equal(t, "POST /transfers", root.Name())
	require.Equal(t, trace.SpanKindServer, root.SpanKind())
	route, _ := attrOf(root, "http.route")
	require.Equal(t, "/transfers", route.AsString())

	// DCB: the command under the request.
	var dcb sdktrace.ReadOnlySpan
	for _, s := range tr.descendants(root) {
		if s.Name() == otelx.SpanDCBExecute {
			dcb = s
		}
	}
	require.NotNil(t, dcb, "the DCB command's span is under the request's")

	// Tag actors: one reservation per account tag (and the transfer's own
	// tag), each served by the tag's stream actor.
	reserves := tr.named(dcb, otelx.SpanDCBReserve)
	require.GreaterOrEqual(t, len(reserves), 2)
	streams := map[string]bool{}
	for _, r := range reserves {
		v, _ := attrOf(r, "scribe.stream")
		streams[v.AsString()] = true
		require.Len(t, tr.named(r, otelx.SpanStreamReserve), 1, "the reservation of %s is served by its stream actor", v.AsString())
	}
	require.True(t, streams["default/account:alice"] && streams["default/account:bob"], "both accounts are reserved: %v", streams)
	for _, name := range []string{otelx.SpanDCBDecide, otelx.SpanDCBAppend, otelx.SpanDCBConfirm} {
		require.Len(t, tr.named(dcb, name), 1, name)
	}

	// Postgres: the append's statements are db.* client spans below it.
	appendSpan := tr.named(dcb, otelx.SpanDCBAppend)[0]
	var db []sdktrace.ReadOnlySpan
	for _, s := range tr.descendants(appendSpan) {
		if sys, ok := attrOf(s, "db.system.name"); ok {
			require.Equal(t, "postgresql", sys.AsString())
			require.Equal(t, trace.SpanKindClient, s.SpanKind())
			db = append(db, s)
		}
	}
	require.NotEmpty(t, db, "the append's Postgres statements are traced under it")
	for _, s := range tr.spans {
		require.NotEqual(t, codes.Error, s.Status().Code, "%s of a successful transfer", s.Name())
	}

	// A rejection is an answer, not a failure.
	w = do("POST", "/transfers", `{"from":"bob","to":"alice","amount":1000}`)
	require.Equal(t, http.StatusConflict, w.Code, w.Body.String())
	id, err = trace.TraceIDFromHex(w.Header().Get("Trace-Id"))
	require.NoError(t, err)
	require.NoError(t, tp.ForceFlush(ctx))
	tr = treeOf(rec.Ended(), id)
	var sawRejection bool
	for _, s := range tr.spans {
		require.NotEqual(t, codes.Error, s.Status().Code, "%s of a rejected transfer", s.Name())
		for _, ev := range s.Events() {
			if ev.Name == "bank.rejection" || ev.Name == otelx.EventRejection {
				sawRejection = true
			}
		}
	}
	require.True(t, sawRejection, "the rejection is recorded as a span event")
}
