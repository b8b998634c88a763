package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// linkNext matches the rel="next" Link of an events page.
var linkNext = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// walkEvents reads account id's whole history as a client does: from
// version 1, following rel="next" until there is none, limit events a page.
func walkEvents(t *testing.T, ts *testServer, id string, limit int) []EventView {
	t.Helper()
	var all []EventView
	path := fmt.Sprintf("/accounts/%s/events?from=1&limit=%d", id, limit)
	for pages := 0; path != ""; pages++ {
		require.Less(t, pages, 1000, "the walk does not end")
		r := ts.request("GET", path, "")
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
		var page []EventView
		require.NoError(t, json.Unmarshal(r.Body, &page))
		all = append(all, page...)
		path = ""
		if l := r.Header.Get("Link"); l != "" {
			m := linkNext.FindStringSubmatch(l)
			require.NotNil(t, m, "Link header %q", l)
			path = m[1]
		}
	}
	for i, ev := range all {
		require.Equal(t, uint64(i+1), ev.Version, "the walk yields every version once, in order")
	}
	return all
}

// openStore opens the schema's journal beside the bank, as an operator's
// tool (scribe archive, retire-stream) does.
func openStore(t *testing.T, url, schema string) *postgres.Store {
	t.Helper()
	store, err := postgres.Open(t.Context(), url, postgres.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	return store
}

// TestAnswersAfterAnArchive: after `scribe archive` retired the oldest
// events of the accounts (the bank restarted, so its replay cache is empty
// and every repeat reaches the runtime), a repeated Idempotency-Key answers
// its first response, byte for byte, whether its event is hot or archived (a
// create, a deposit and a transfer); the same key with another request is
// 422; the events walk from version 1 following rel="next" yields the whole
// history, as before the archive; a page past the head is 200 []; the
// account takes new commands.
func TestAnswersAfterAnArchive(t *testing.T) {
	t.Parallel()
	_, schema := pgSchema(t)
	url := pgtest.URL(t)
	cfg := serverConfig{Addr: "127.0.0.1:0", NodeID: "archive-node", Logger: testLogger(t), DatabaseURL: url, Schema: schema}
	ts := startTestServerWith(t, cfg)

	open := ts.request("POST", "/accounts", `{"id":"alice"}`, "Idempotency-Key", "k-open")
	requireAccount(t, open, 201, "alice", 0, 1)
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"bob"}`), 201, "bob", 0, 1)
	dep := ts.request("POST", "/accounts/alice/deposit", `{"amount":100}`, "Idempotency-Key", "k-dep")
	requireAccount(t, dep, 200, "alice", 100, 2)
	tr := ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":10}`, "Idempotency-Key", "k-tr")
	require.Equal(t, http.StatusOK, tr.Status, string(tr.Body))
	for i := range 10 {
		requireAccount(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":1}`), 200, "alice", int64(91+i), uint64(4+i))
	}
	hot := ts.request("POST", "/accounts/alice/deposit", `{"amount":7}`, "Idempotency-Key", "k-hot")
	requireAccount(t, hot, 200, "alice", 107, 14)
	requireAccount(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":1}`), 200, "alice", 108, 15)
	before := walkEvents(t, ts, "alice", 4)
	require.Len(t, before, 15)
	// The archive keeps what a projection has not applied: let the read
	// model take every event first (alice's last is the newest).
	require.Eventually(t, func() bool {
		all, _ := ts.listAll(t, "/accounts")
		return slices.ContainsFunc(all, func(a AccountView) bool { return a.ID == "alice" && a.Version == 15 })
	}, time.Minute, 10*time.Millisecond, "the read model holds alice at version 15")
	ts.stop() // passivation snapshots every account at its head

	store := openStore(t, url, schema)
	prog, err := storeAdmin(t, store).Archive(t.Context(), pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{"account": {KeepLast: 3}}}, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(12), prog.Versions, "alice's versions 1 to 12 are archived; bob keeps his 2")
	sum, err := store.Journal.TagSummary(t.Context(), streamOf("alice"))
	require.NoError(t, err)
	require.Equal(t, uint64(12), sum.Cut.Version)
	_, err = drain(store.Journal.ReadStream(t.Context(), streamOf("alice"), 1, 0))
	require.ErrorIs(t, err, journal.ErrArchived)

	ts = startTestServerWith(t, cfg)
	// Repeats: the first responses, whether the key's event is hot (k-hot,
	// version 14) or archived (k-open, k-dep; k-tr at alice's version 3).
	for _, rep := range []struct {
		first      reply
		path, body string
		key        string
	}{
		{hot, "/accounts/alice/deposit", `{"amount":7}`, "k-hot"},
		{dep, "/accounts/alice/deposit", `{"amount":100}`, "k-dep"},
		{open, "/accounts", `{"id":"alice"}`, "k-open"},
		{tr, "/transfers", `{"from":"alice","to":"bob","amount":10}`, "k-tr"},
	} {
		r := ts.request("POST", rep.path, rep.body, "Idempotency-Key", rep.key)
		require.Equal(t, rep.first.Status, r.Status, "%s: %s", rep.key, r.Body)
		require.Equal(t, string(rep.first.Body), string(r.Body), rep.key)
	}
	requireError(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":101}`, "Idempotency-Key", "k-dep"), 422, codeIdempotencyKeyReused)
	requireError(t, ts.request("POST", "/accounts/alice/withdraw", `{"amount":7}`, "Idempotency-Key", "k-hot"), 422, codeIdempotencyKeyReused)

	// The documented walk from version 1, through the archive.
	require.Equal(t, before, walkEvents(t, ts, "alice", 4))
	require.Equal(t, before, walkEvents(t, ts, "alice", 1000))
	for _, from := range []int{16, 1000} {
		r := ts.request("GET", fmt.Sprintf("/accounts/alice/events?from=%d", from), "")
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.JSONEq(t, `[]`, string(r.Body), "from=%d is past the head", from)
	}
	requireError(t, ts.request("GET", "/accounts/nobody/events?from=2", ""), 404, "account_not_found")

	requireAccount(t, ts.request("GET", "/accounts/alice", ""), 200, "alice", 108, 15)
	requireAccount(t, ts.request("POST", "/accounts/alice/deposit", `{"amount":2}`, "Idempotency-Key", "k-new"), 200, "alice", 110, 16)
	r := ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":5}`)
	require.Equal(t, http.StatusOK, r.Status, "a transfer decides from the accounts' states, recovered from snapshots: %s", r.Body)
	requireAccount(t, ts.request("GET", "/accounts/bob", ""), 200, "bob", 15, 3)
}

// TestRetiredAccountAnswersGone: an account retired behind a tombstone
// (scribe retire-stream) answers 410 account_retired, never a retry, to a
// deposit, a withdrawal, a transfer to or from it, a repeat of one of its
// keys, a re-open and GET, both while its actor is active and after a
// restart; its history stays readable from version 1.
func TestRetiredAccountAnswersGone(t *testing.T) {
	t.Parallel()
	_, schema := pgSchema(t)
	url := pgtest.URL(t)
	cfg := serverConfig{Addr: "127.0.0.1:0", NodeID: "retired-node", Logger: testLogger(t), DatabaseURL: url, Schema: schema}
	ts := startTestServerWith(t, cfg)
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"carol"}`), 201, "carol", 0, 1)
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"dave"}`), 201, "dave", 0, 1)
	requireAccount(t, ts.request("POST", "/accounts/carol/deposit", `{"amount":50}`, "Idempotency-Key", "k-c"), 200, "carol", 50, 2)
	requireAccount(t, ts.request("POST", "/accounts/dave/deposit", `{"amount":50}`), 200, "dave", 50, 2)
	history := walkEvents(t, ts, "carol", 1)

	store := openStore(t, url, schema)
	_, err := storeAdmin(t, store).RetireStream(t.Context(), streamOf("carol"))
	require.NoError(t, err)

	gone := func(ts *testServer) {
		t.Helper()
		for _, req := range []struct{ method, path, body, key string }{
			{"POST", "/accounts/carol/deposit", `{"amount":1}`, ""},
			{"POST", "/accounts/carol/withdraw", `{"amount":1}`, ""},
			{"POST", "/transfers", `{"from":"carol","to":"dave","amount":1}`, ""},
			{"POST", "/transfers", `{"from":"dave","to":"carol","amount":1}`, ""},
			{"POST", "/accounts", `{"id":"carol"}`, ""},
			{"GET", "/accounts/carol", "", ""},
		} {
			var r reply
			if req.key != "" {
				r = ts.request(req.method, req.path, req.body, "Idempotency-Key", req.key)
			} else {
				r = ts.request(req.method, req.path, req.body)
			}
			requireError(t, r, http.StatusGone, codeAccountRetired)
			require.Empty(t, r.Header.Get("Retry-After"), "%s %s", req.method, req.path)
			require.Contains(t, string(r.Body), `account \"carol\" was retired`, "%s %s", req.method, req.path)
			require.NotRegexp(t, retryAdvice, string(r.Body), "%s %s", req.method, req.path)
		}
		require.Equal(t, history, walkEvents(t, ts, "carol", 1), "the history stays readable")
		requireAccount(t, ts.request("GET", "/accounts/dave", ""), 200, "dave", 50, 2)
	}
	gone(ts) // carol's actor is active
	ts.stop()

	_, err = storeAdmin(t, store).Archive(t.Context(), pgadmin.RetentionPolicy{}, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	sum, err := store.Journal.TagSummary(t.Context(), streamOf("carol"))
	require.NoError(t, err)
	require.True(t, sum.Retired)
	require.Equal(t, uint64(2), sum.Cut.Version, "every event of carol is archived")

	ts = startTestServerWith(t, cfg)
	gone(ts) // carol's actor recovers from the archived stream
	r := ts.request("POST", "/accounts/carol/deposit", `{"amount":50}`, "Idempotency-Key", "k-c")
	requireError(t, r, http.StatusGone, codeAccountRetired)
	requireAccount(t, ts.request("POST", "/accounts/dave/deposit", `{"amount":1}`), 200, "dave", 51, 3)
}

// drain drains a read, returning its records or its first error.
func drain(seq func(func(journal.Record, error) bool)) ([]journal.Record, error) {
	var out []journal.Record
	for r, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// storeAdmin returns the operator's Admin of store's schema.
func storeAdmin(t testing.TB, store *postgres.Store) *pgadmin.Admin {
	t.Helper()
	a, err := pgadmin.New(store.Pool, store.Config)
	require.NoError(t, err)
	return a
}
