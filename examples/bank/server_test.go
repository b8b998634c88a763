package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
)

// testServer is a real bank server started in-process on a random port.
type testServer struct {
	t      *testing.T
	srv    *server
	url    string
	client *http.Client
}

// backendKinds are the storage modes every end-to-end test runs against.
var backendKinds = []string{"memory", "postgres"}

// startTestServer starts the server on kind's storage: the in-memory journal,
// or Postgres in a fresh schema (skipped loudly without a database). It is
// shut down when the test ends.
func startTestServer(t *testing.T, kind string) *testServer {
	t.Helper()
	cfg := serverConfig{Addr: "127.0.0.1:0", NodeID: "test-node", Logger: testLogger(t)}
	if kind == "postgres" {
		_, schema := pgSchema(t)
		cfg.DatabaseURL = pgtest.URL(t)
		cfg.Schema = schema
	}
	return startTestServerWith(t, cfg)
}

// pgSchema is pgtest.Pool that also drops, when the test ends, the key
// store schema a bank server creates beside the schema (keySchema).
func pgSchema(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{keySchema(schema)}.Sanitize()+" CASCADE")
	})
	return pool, schema
}

func startTestServerWith(t *testing.T, cfg serverConfig) *testServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := startServer(ctx, cfg)
	require.NoError(t, err)
	ts := &testServer{t: t, srv: srv, url: "http://" + srv.Addr(), client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(func() { ts.stop() })
	return ts
}

func (ts *testServer) stop() {
	if ts.srv == nil {
		return
	}
	// Close the client's idle connections first: the server's Shutdown
	// counts a connection that never sent a request as active for 5 s.
	ts.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(ts.t, ts.srv.Shutdown(ctx))
	ts.srv = nil
}

// testLogger logs warnings and errors into the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// reply is one HTTP response.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), string(r.Body))
	return m
}

// request sends method path with body (sent as application/json unless a
// Content-Type header is given) and extra headers as name, value pairs.
func (ts *testServer) request(method, path, body string, headers ...string) reply {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	require.NoError(ts.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := ts.client.Do(req)
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(ts.t, err)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// requireError checks an error response: status, JSON envelope, code and a
// non-empty message.
func requireError(t *testing.T, r reply, status int, code bank.Code) {
	t.Helper()
	require.Equal(t, status, r.Status, string(r.Body))
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var eb map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &eb), string(r.Body))
	require.Len(t, eb, 2, "the error envelope has exactly error and code: %s", r.Body)
	require.Equal(t, string(code), eb["code"], string(r.Body))
	require.NotEmpty(t, eb["error"])
}

func requireAccount(t *testing.T, r reply, status int, id string, balance int64, version uint64) {
	t.Helper()
	require.Equal(t, status, r.Status, string(r.Body))
	var got AccountView
	require.NoError(t, json.Unmarshal(r.Body, &got))
	require.Equal(t, AccountView{ID: id, Balance: balance, Version: version}, got, string(r.Body))
	require.JSONEq(t, `{"id":"`+id+`","balance":`+strconv.FormatInt(balance, 10)+`,"version":`+strconv.FormatUint(version, 10)+`}`, string(r.Body))
}

func TestEndpointsAndErrorCodes(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, kind)

			require.Equal(t, 200, ts.request("GET", "/healthz", "").Status)

			// Accounts.
			requireAccount(t, ts.request("POST", "/accounts", `{"id":"alice"}`), 201, "alice", 0, 1)
			requireError(t, ts.request("POST", "/accounts", `{"id":"alice"}`), 409, bank.CodeAccountExists)
			requireAccount(t, ts.request("POST", "/accounts", `{"id":"bob"}`), 201, "bob", 0, 1)
			for _, body := range []string{`{"id":"a b"}`, `{"id":""}`, `{"id":"` + strings.Repeat("x", 65) + `"}`, `{"id":5}`, `{}`, `{"id":"é"}`} {
				requireError(t, ts.request("POST", "/accounts", body), 400, bank.CodeInvalidRequest)
			}

			// Deposits and withdrawals.
			requireAccount(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":100}`), 200, "alice", 100, 2)
			requireAccount(t, ts.request("POST", "/accounts/alice/withdraw", `{"amount":50}`), 200, "alice", 50, 3)
			requireError(t, ts.request("POST", "/accounts/alice/withdraw", `{"amount":51}`), 409, bank.CodeInsufficientFunds)
			for _, body := range []string{`{"amount":0}`, `{"amount":-5}`, `{"amount":1.5}`, `{"amount":"100"}`, `{"amount":1000000000001}`, `{}`, `{"amount":null}`, `{"amount":1e3}`} {
				requireError(t, ts.request("POST", "/accounts/alice/deposit", body), 400, bank.CodeInvalidAmount)
				requireError(t, ts.request("POST", "/accounts/alice/withdraw", body), 400, bank.CodeInvalidAmount)
			}
			requireAccount(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":1000000000000}`), 200, "alice", 1_000_000_000_050, 4)
			requireAccount(t, ts.request("POST", "/accounts/alice/withdraw", `{"amount":1000000000000}`), 200, "alice", 50, 5)
			requireError(t, ts.request("POST", "/accounts/nobody/deposit", `{"amount":1}`), 404, bank.CodeAccountNotFound)
			requireError(t, ts.request("POST", "/accounts/nobody/withdraw", `{"amount":1}`), 404, bank.CodeAccountNotFound)
			requireError(t, ts.request("POST", "/accounts/bad%20id/deposit", `{"amount":1}`), 400, bank.CodeInvalidRequest)

			// Transfers.
			r := ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":25}`)
			require.Equal(t, 200, r.Status, string(r.Body))
			var tv TransferView
			require.NoError(t, json.Unmarshal(r.Body, &tv))
			require.NotEmpty(t, tv.ID)
			require.Equal(t, AccountView{ID: "alice", Balance: 25, Version: 6}, tv.From)
			require.Equal(t, AccountView{ID: "bob", Balance: 25, Version: 2}, tv.To)
			requireError(t, ts.request("POST", "/transfers", `{"from":"alice","to":"alice","amount":1}`), 400, bank.CodeSameAccount)
			requireError(t, ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":26}`), 409, bank.CodeInsufficientFunds)
			requireError(t, ts.request("POST", "/transfers", `{"from":"alice","to":"nobody","amount":1}`), 404, bank.CodeAccountNotFound)
			requireError(t, ts.request("POST", "/transfers", `{"from":"nobody","to":"alice","amount":1}`), 404, bank.CodeAccountNotFound)
			requireError(t, ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":0}`), 400, bank.CodeInvalidAmount)
			requireError(t, ts.request("POST", "/transfers", `{"from":"alice","to":"b/b","amount":1}`), 400, bank.CodeInvalidRequest)
			requireError(t, ts.request("POST", "/transfers", `{"from":"alice","amount":1}`), 400, bank.CodeInvalidRequest)

			// Reads.
			requireAccount(t, ts.request("GET", "/accounts/alice", ""), 200, "alice", 25, 6)
			requireAccount(t, ts.request("GET", "/accounts/bob", ""), 200, "bob", 25, 2)
			requireError(t, ts.request("GET", "/accounts/nobody", ""), 404, bank.CodeAccountNotFound)
			requireError(t, ts.request("GET", "/accounts/nobody/events", ""), 404, bank.CodeAccountNotFound)
			requireError(t, ts.request("GET", "/accounts/no%20body", ""), 400, bank.CodeInvalidRequest)

			r = ts.request("GET", "/accounts/alice/events", "")
			require.Equal(t, 200, r.Status, string(r.Body))
			require.Empty(t, r.Header.Values("Link"), "six events fit in one default page")
			var events []EventView
			require.NoError(t, json.Unmarshal(r.Body, &events))
			require.Len(t, events, 6)
			wantTypes := []string{bank.TypeAccountOpened, bank.TypeMoneyDeposited, bank.TypeMoneyWithdrawn, bank.TypeMoneyDeposited, bank.TypeMoneyWithdrawn, bank.TypeMoneyTransferred}
			var raw []map[string]any
			require.NoError(t, json.Unmarshal(r.Body, &raw))
			for i, ev := range events {
				require.Equal(t, uint64(i+1), ev.Version)
				require.Equal(t, wantTypes[i], ev.Type)
				require.False(t, ev.RecordedAt.IsZero())
				require.NotEmpty(t, ev.Position)
				require.ElementsMatch(t, []string{"position", "version", "type", "data", "recordedAt"}, keys(raw[i]))
			}
			require.JSONEq(t, `{"transferId":"`+tv.ID+`","from":"alice","to":"bob","amount":25}`, string(events[5].Data))
			folded, _, err := foldEvents(events)
			require.NoError(t, err)
			require.EqualValues(t, 25, folded.Balance)

			// Malformed requests.
			requireError(t, ts.request("POST", "/accounts", `{"id":"carol"`), 400, bank.CodeInvalidRequest)
			requireError(t, ts.request("POST", "/accounts", `{"id":"carol","admin":true}`), 400, bank.CodeInvalidRequest)
			requireError(t, ts.request("POST", "/accounts", `{"id":"carol"} {"id":"dave"}`), 400, bank.CodeInvalidRequest)
			requireError(t, ts.request("POST", "/accounts", `{"id":"carol"}`, "Content-Type", "text/plain"), 400, bank.CodeInvalidRequest)
			requireError(t, ts.request("POST", "/accounts", `{"id":"`+strings.Repeat("c", 70_000)+`"}`), 400, bank.CodeInvalidRequest)
			requireError(t, ts.request("POST", "/accounts", `{"id":"carol"}`, "Idempotency-Key", strings.Repeat("k", 256)), 400, bank.CodeInvalidRequest)
			requireError(t, ts.request("GET", "/accounts/carol", ""), 404, bank.CodeAccountNotFound) // none of them created it

			// Routing.
			requireError(t, ts.request("GET", "/nope", ""), 404, "not_found")
			r = ts.request("DELETE", "/accounts/alice", "")
			requireError(t, r, 405, "method_not_allowed")
			require.Equal(t, "GET, HEAD", r.Header.Get("Allow"))
			requireError(t, ts.request("GET", "/transfers", ""), 405, "method_not_allowed")
			requireError(t, ts.request("PUT", "/accounts", `{"id":"x"}`), 405, "method_not_allowed")
		})
	}
}

// TestEventsPagination reads an account of 25 events in pages of 10 by
// following the Link headers, reads past its end, and sends bad paging
// parameters.
func TestEventsPagination(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, kind)
			requireAccount(t, ts.request("POST", "/accounts", `{"id":"alice"}`), 201, "alice", 0, 1)
			for v := uint64(2); v <= 25; v++ {
				requireAccount(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":1}`), 200, "alice", int64(v-1), v)
			}
			events := func(r reply) []EventView {
				t.Helper()
				require.Equal(t, 200, r.Status, string(r.Body))
				var page []EventView
				require.NoError(t, json.Unmarshal(r.Body, &page), string(r.Body))
				return page
			}

			// Pages of 10, 10 and 5, each linking to the next but the last.
			var versions []uint64
			path := "/accounts/alice/events?limit=10"
			for _, want := range []struct {
				size int
				link string
			}{
				{10, `</accounts/alice/events?from=11&limit=10>; rel="next"`},
				{10, `</accounts/alice/events?from=21&limit=10>; rel="next"`},
				{5, ""},
			} {
				r := ts.request("GET", path, "")
				page := events(r)
				require.Len(t, page, want.size, path)
				for _, ev := range page {
					versions = append(versions, ev.Version)
				}
				if want.link == "" {
					require.Empty(t, r.Header.Values("Link"), "the last page links nowhere")
					break
				}
				require.Equal(t, []string{want.link}, r.Header.Values("Link"), path)
				next, err := nextLink(r.Header.Values("Link"))
				require.NoError(t, err)
				path = next
			}
			want := make([]uint64, 25)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			require.Equal(t, want, versions, "the pages hold versions 1..25 once each, in order")

			// The client helper follows the same links and gets the same events.
			all, err := (&loadClient{base: ts.url, http: ts.client}).allEvents(context.Background(), "alice")
			require.NoError(t, err)
			require.Len(t, all, 25)
			require.Equal(t, events(ts.request("GET", "/accounts/alice/events?from=1&limit=25", "")), all)

			// Page boundaries: no Link when the page ends the stream exactly.
			r := ts.request("GET", "/accounts/alice/events?from=1&limit=25", "")
			require.Len(t, events(r), 25)
			require.Empty(t, r.Header.Values("Link"))
			r = ts.request("GET", "/accounts/alice/events?limit=1&from=25", "")
			require.Equal(t, []uint64{25}, []uint64{events(r)[0].Version})
			require.Empty(t, r.Header.Values("Link"))
			r = ts.request("GET", "/accounts/alice/events?from=24&limit=1", "")
			require.Equal(t, uint64(24), events(r)[0].Version)
			require.Equal(t, `</accounts/alice/events?from=25&limit=1>; rel="next"`, r.Header.Get("Link"))

			// Past the end of an existing account: an empty page.
			for _, from := range []string{"26", "1000", "9223372036854775807"} {
				r = ts.request("GET", "/accounts/alice/events?from="+from, "")
				require.Equal(t, 200, r.Status, string(r.Body))
				require.JSONEq(t, `[]`, string(r.Body))
				require.Empty(t, r.Header.Values("Link"))
			}

			// HEAD: the GET's status and Link header, no body.
			r = ts.request("HEAD", "/accounts/alice/events?limit=10", "")
			require.Equal(t, 200, r.Status)
			require.Empty(t, r.Body)
			require.Equal(t, `</accounts/alice/events?from=11&limit=10>; rel="next"`, r.Header.Get("Link"))

			// An account without events is missing whatever the page.
			for _, q := range []string{"", "?from=1", "?from=5", "?limit=10", "?from=26&limit=1"} {
				requireError(t, ts.request("GET", "/accounts/nobody/events"+q, ""), 404, bank.CodeAccountNotFound)
			}

			// Bad parameters: 400 invalid_request naming the parameter, its
			// value and what to give.
			for _, tc := range []struct{ query, parameter, value, allowed string }{
				{"from=0", `"from"`, `"0"`, "1 to 9223372036854775807"},
				{"from=-1", `"from"`, `"-1"`, "1 to 9223372036854775807"},
				{"from=x", `"from"`, `"x"`, "1 to 9223372036854775807"},
				{"from=", `"from"`, `""`, "1 to 9223372036854775807"},
				{"from=1.5", `"from"`, `"1.5"`, "1 to 9223372036854775807"},
				{"from=9223372036854775808", `"from"`, `"9223372036854775808"`, "1 to 9223372036854775807"},
				{"limit=0", `"limit"`, `"0"`, "1 to 10000"},
				{"limit=10001", `"limit"`, `"10001"`, "1 to 10000"},
				{"limit=%2B5", `"limit"`, `"+5"`, "1 to 10000"},
				{"limit=ten&from=1", `"limit"`, `"ten"`, "1 to 10000"},
				{"page=2", `"page"`, "", `"from"`},
				{"from=1&limit=10&From=2", `"From"`, "", `"limit"`},
				{"from=1&from=2", `"from"`, "2 times", "once"},
				{"limit=%zz", "malformed", `"limit=%zz"`, "from=<version>&limit=<n>"},
			} {
				r := ts.request("GET", "/accounts/alice/events?"+tc.query, "")
				requireError(t, r, 400, bank.CodeInvalidRequest)
				msg := r.json(t)["error"].(string)
				for _, part := range []string{tc.parameter, tc.value, tc.allowed} {
					require.Contains(t, msg, part, tc.query)
				}
			}
			requireError(t, ts.request("GET", "/accounts/nobody/events?limit=0", ""), 400, bank.CodeInvalidRequest)
			require.Equal(t, 400, ts.request("HEAD", "/accounts/alice/events?from=0", "").Status)
			limit := ts.request("GET", "/accounts/alice/events?limit=10000", "")
			require.Len(t, events(limit), 25, "the largest page size is allowed")

			// The service checks its arguments too.
			for _, args := range []struct {
				from  uint64
				limit int
			}{{0, 10}, {1, 0}, {1, -1}, {1, 10_001}} {
				_, _, err := ts.srv.svc.Events(context.Background(), "alice", args.from, args.limit)
				require.ErrorIs(t, err, bank.ErrInvalidRequest, "%+v", args)
			}
		})
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, kind)

			first := ts.request("POST", "/accounts", `{"id":"alice"}`, "Idempotency-Key", "create-alice")
			requireAccount(t, first, 201, "alice", 0, 1)
			again := ts.request("POST", "/accounts", `{ "id" : "alice" }`, "Idempotency-Key", "create-alice")
			require.Equal(t, first.Status, again.Status, "a retry of a create gets the first 201, not account_exists")
			require.Equal(t, first.Body, again.Body)
			requireAccount(t, ts.request("POST", "/accounts", `{"id":"bob"}`), 201, "bob", 0, 1)

			dep := ts.request("POST", "/accounts/alice/deposit", `{"amount":100}`, "Idempotency-Key", "dep-1")
			requireAccount(t, dep, 200, "alice", 100, 2)
			require.Empty(t, dep.Header.Get("Idempotent-Replayed"))
			for range 3 {
				r := ts.request("POST", "/accounts/alice/deposit", `{"amount":100}`, "Idempotency-Key", "dep-1")
				require.Equal(t, dep.Body, r.Body)
				require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
			}
			requireError(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":101}`, "Idempotency-Key", "dep-1"), 422, "idempotency_key_reused")
			requireError(t, ts.request("POST", "/accounts/alice/withdraw", `{"amount":100}`, "Idempotency-Key", "dep-1"), 422, "idempotency_key_reused")
			// Keys are scoped per account (as the runtime's durable dedup is, so
			// the scope is the same after a restart): dep-1 on bob is another request.
			requireAccount(t, ts.request("POST", "/accounts/bob/deposit", `{"amount":100}`, "Idempotency-Key", "dep-1"), 200, "bob", 100, 2)
			requireAccount(t, ts.request("GET", "/accounts/alice", ""), 200, "alice", 100, 2)

			tr := ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":30}`, "Idempotency-Key", "tr-1")
			require.Equal(t, 200, tr.Status, string(tr.Body))
			require.Equal(t, tr.Body, ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":30}`, "Idempotency-Key", "tr-1").Body)
			requireError(t, ts.request("POST", "/transfers", `{"from":"bob","to":"alice","amount":30}`, "Idempotency-Key", "tr-1"), 422, "idempotency_key_reused")
			requireAccount(t, ts.request("GET", "/accounts/alice", ""), 200, "alice", 70, 3)
			requireAccount(t, ts.request("GET", "/accounts/bob", ""), 200, "bob", 130, 3)

			// A rejected command is replayed too: the first response wins.
			no := ts.request("POST", "/accounts/bob/withdraw", `{"amount":131}`, "Idempotency-Key", "wd-1")
			requireError(t, no, 409, bank.CodeInsufficientFunds)
			requireAccount(t, ts.request("POST", "/accounts/bob/deposit", `{"amount":10}`), 200, "bob", 140, 4)
			require.Equal(t, no.Body, ts.request("POST", "/accounts/bob/withdraw", `{"amount":131}`, "Idempotency-Key", "wd-1").Body)

			// Concurrent retries of one request: one effect, one response.
			var wg sync.WaitGroup
			bodies := make([][]byte, 16)
			for i := range bodies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					bodies[i] = ts.request("POST", "/accounts/bob/deposit", `{"amount":5}`, "Idempotency-Key", "dep-concurrent").Body
				}()
			}
			wg.Wait()
			for _, b := range bodies {
				require.Equal(t, bodies[0], b)
			}
			requireAccount(t, ts.request("GET", "/accounts/bob", ""), 200, "bob", 145, 5)
		})
	}
}

// TestIdempotencyIsDurable bypasses the HTTP replay cache: the same key
// reaches the runtime twice, and the second execution appends nothing and
// returns the first response.
func TestIdempotencyIsDurable(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, kind)
			ctx := context.Background()
			svc := ts.srv.svc
			opts := func(key string) CommandOptions { return CommandOptions{IdempotencyKey: key} }

			a1, err := svc.CreateAccount(ctx, "alice", nil, opts("c1"))
			require.NoError(t, err)
			a2, err := svc.CreateAccount(ctx, "alice", nil, opts("c1"))
			require.NoError(t, err)
			require.Equal(t, a1, a2)
			_, err = svc.CreateAccount(ctx, "bob", nil, opts(""))
			require.NoError(t, err)

			d1, err := svc.Deposit(ctx, "alice", 100, opts("d1"))
			require.NoError(t, err)
			_, err = svc.Deposit(ctx, "alice", 7, opts(""))
			require.NoError(t, err)
			d2, err := svc.Deposit(ctx, "alice", 100, opts("d1"))
			require.NoError(t, err)
			require.Equal(t, d1, d2, "the replay reports the state right after the first execution")
			_, err = svc.Deposit(ctx, "alice", 99, opts("d1"))
			require.ErrorIs(t, err, &bank.Error{Code: codeIdempotencyKeyReused})
			_, err = svc.Withdraw(ctx, "alice", 100, opts("d1"))
			require.ErrorIs(t, err, &bank.Error{Code: codeIdempotencyKeyReused})

			t1, err := svc.Transfer(ctx, "alice", "bob", 50, opts("t1"))
			require.NoError(t, err)
			_, err = svc.Transfer(ctx, "alice", "bob", 1, opts(""))
			require.NoError(t, err)
			t2, err := svc.Transfer(ctx, "alice", "bob", 50, opts("t1"))
			require.NoError(t, err)
			require.Equal(t, t1, t2)
			_, err = svc.Transfer(ctx, "alice", "bob", 51, opts("t1"))
			require.ErrorIs(t, err, &bank.Error{Code: codeIdempotencyKeyReused})

			got, err := svc.Account(ctx, "alice")
			require.NoError(t, err)
			require.Equal(t, AccountView{ID: "alice", Balance: 56, Version: 5}, got)
		})
	}
}

// TestConcurrentTransfers runs 32 concurrent clients making random transfers
// (through the loadgen code) for a few seconds, then checks that money is
// conserved, no balance is negative, and every balance equals the fold of its
// events.
func TestConcurrentTransfers(t *testing.T) {
	t.Parallel()
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, kind)
			var progress bytes.Buffer
			rep, err := runLoad(context.Background(), loadConfig{
				URL: ts.url, Workers: 32, Duration: 3 * time.Second, Accounts: 10,
				Initial: 1000, MaxAmount: 300, Client: ts.client, Progress: &syncWriter{w: &progress},
			})
			require.NoError(t, err)
			if len(rep.Invariant.ReadModelMismatch) > 0 {
				explainReadModel(t, ts.srv.backend.Journal, rep.Invariant.ReadModelMismatch)
			}
			require.True(t, rep.InvariantOK, "%v", rep.Invariant.Problems)
			require.Zero(t, rep.Failed)
			require.Positive(t, rep.OK)
			require.Positive(t, rep.Rejected, "with small balances some transfers must be refused")
			require.Equal(t, rep.Total, rep.Invariant.Sum)
			require.Contains(t, progress.String(), "transfers")
			var out bytes.Buffer
			printReport(&out, loadConfig{Workers: 32, Accounts: 10}, rep)
			require.Contains(t, out.String(), "invariants OK")
			require.Contains(t, out.String(), "p99")
			t.Logf("%s: %s", kind, out.String())
		})
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestIdempotencyAcrossRestart retries requests through HTTP after the
// server restarted on the same Postgres schema (its replay cache is empty):
// the retries get the first responses and change nothing.
func TestIdempotencyAcrossRestart(t *testing.T) {
	t.Parallel()
	_, schema := pgSchema(t)
	cfg := serverConfig{Addr: "127.0.0.1:0", NodeID: "restart-node", Logger: testLogger(t), DatabaseURL: pgtest.URL(t), Schema: schema}
	ts := startTestServerWith(t, cfg)
	create := ts.request("POST", "/accounts", `{"id":"alice"}`, "Idempotency-Key", "k-create")
	requireAccount(t, create, 201, "alice", 0, 1)
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"bob"}`), 201, "bob", 0, 1)
	dep := ts.request("POST", "/accounts/alice/deposit", `{"amount":500}`, "Idempotency-Key", "k-dep")
	requireAccount(t, dep, 200, "alice", 500, 2)
	tr := ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":200}`, "Idempotency-Key", "k-tr")
	require.Equal(t, 200, tr.Status, string(tr.Body))
	requireAccount(t, ts.request("POST", "/accounts/alice/withdraw", `{"amount":1}`), 200, "alice", 299, 4)
	ts.stop()

	ts = startTestServerWith(t, cfg)
	require.Equal(t, create.Body, ts.request("POST", "/accounts", `{"id":"alice"}`, "Idempotency-Key", "k-create").Body)
	require.Equal(t, dep.Body, ts.request("POST", "/accounts/alice/deposit", `{"amount":500}`, "Idempotency-Key", "k-dep").Body)
	require.Equal(t, tr.Body, ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":200}`, "Idempotency-Key", "k-tr").Body)
	requireError(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":501}`, "Idempotency-Key", "k-dep"), 422, "idempotency_key_reused")
	requireError(t, ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":201}`, "Idempotency-Key", "k-tr"), 422, "idempotency_key_reused")
	requireAccount(t, ts.request("GET", "/accounts/alice", ""), 200, "alice", 299, 4)
	requireAccount(t, ts.request("GET", "/accounts/bob", ""), 200, "bob", 200, 2)
	// The key scope is the same as before the restart (TestIdempotencyKeys):
	// per account, so alice's k-dep on bob is another request, applied once.
	bobDep := ts.request("POST", "/accounts/bob/deposit", `{"amount":500}`, "Idempotency-Key", "k-dep")
	requireAccount(t, bobDep, 200, "bob", 700, 3)
	require.Equal(t, bobDep.Body, ts.request("POST", "/accounts/bob/deposit", `{"amount":500}`, "Idempotency-Key", "k-dep").Body)
	requireAccount(t, ts.request("GET", "/accounts/bob", ""), 200, "bob", 700, 3)
}
