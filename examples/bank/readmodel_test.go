package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
)

// listAll follows GET /accounts pages from path and returns every account.
func (ts *testServer) listAll(t *testing.T, path string) ([]AccountView, int) {
	t.Helper()
	var all []AccountView
	pages := 0
	for path != "" {
		r := ts.request("GET", path, "")
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var page []AccountView
		require.NoError(t, json.Unmarshal(r.Body, &page))
		all = append(all, page...)
		pages++
		next, err := nextLink(r.Header.Values("Link"))
		require.NoError(t, err)
		path = next
		require.Less(t, pages, 100, "paging does not end")
	}
	return all, pages
}

func TestAccountsReadModel(t *testing.T) {
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			ts := startTestServer(t, kind)
			want := map[string]AccountView{}
			for i := range 5 {
				id := fmt.Sprintf("rm-%d", i)
				require.Equal(t, http.StatusCreated, ts.request("POST", "/accounts", `{"id":"`+id+`"}`).Status)
				r := ts.request("POST", "/accounts/"+id+"/deposit", `{"amount":100}`)
				require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			}
			require.Equal(t, http.StatusOK, ts.request("POST", "/transfers", `{"from":"rm-0","to":"rm-4","amount":30}`).Status)
			require.Equal(t, http.StatusOK, ts.request("POST", "/accounts/rm-2/withdraw", `{"amount":5}`).Status)
			for i := range 5 {
				id := fmt.Sprintf("rm-%d", i)
				var a AccountView
				r := ts.request("GET", "/accounts/"+id, "")
				require.NoError(t, json.Unmarshal(r.Body, &a))
				want[id] = a
			}
			require.Equal(t, int64(70), want["rm-0"].Balance)
			require.Equal(t, int64(130), want["rm-4"].Balance)

			// The read model catches up with the accounts' own state.
			var got []AccountView
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, _ = ts.listAll(t, "/accounts")
				if len(got) == len(want) && got[0] == want["rm-0"] && got[4] == want["rm-4"] && got[2] == want["rm-2"] || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			require.Len(t, got, 5)
			for i, a := range got {
				require.Equal(t, want[fmt.Sprintf("rm-%d", i)], a, "read model and aggregate differ")
			}

			// Pages of two, in ID order, linked.
			paged, pages := ts.listAll(t, "/accounts?limit=2")
			require.Equal(t, got, paged)
			require.Equal(t, 3, pages)
			after, _ := ts.listAll(t, "/accounts?after=rm-2")
			require.Equal(t, got[3:], after)
			r := ts.request("GET", "/accounts", "")
			require.NotEmpty(t, r.Header.Get("Scribe-Read-Model-Checkpoint"))

			requireError(t, ts.request("GET", "/accounts?limit=0", ""), http.StatusBadRequest, bank.CodeInvalidRequest)
			requireError(t, ts.request("GET", "/accounts?limit=1001", ""), http.StatusBadRequest, bank.CodeInvalidRequest)
			requireError(t, ts.request("GET", "/accounts?page=2", ""), http.StatusBadRequest, bank.CodeInvalidRequest)
			requireError(t, ts.request("GET", "/accounts?limit=1&limit=2", ""), http.StatusBadRequest, bank.CodeInvalidRequest)
			requireError(t, ts.request("DELETE", "/accounts", ""), http.StatusMethodNotAllowed, codeMethodNotAllowed)
		})
	}
}

// sseClient reads server-sent events.
type sseClient struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func (ts *testServer) openStream(t *testing.T, ctx context.Context, path string, lastID string) *sseClient {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", ts.url+path, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	t.Cleanup(func() { resp.Body.Close() })
	return &sseClient{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next message's id, event name and data.
func (c *sseClient) next(t *testing.T) (id, event string, data StreamEvent) {
	t.Helper()
	for c.sc.Scan() {
		line := c.sc.Text()
		switch {
		case line == "":
			if id != "" {
				return id, event, data
			}
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data))
		}
	}
	t.Fatalf("the event stream ended: %v", c.sc.Err())
	return
}

func TestEventStream(t *testing.T) {
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			ts := startTestServer(t, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.Equal(t, http.StatusCreated, ts.request("POST", "/accounts", `{"id":"sse-1"}`).Status)
			require.Equal(t, http.StatusOK, ts.request("POST", "/accounts/sse-1/deposit", `{"amount":7}`).Status)

			c := ts.openStream(t, ctx, "/events/stream", "")
			id1, ev1, d1 := c.next(t)
			require.Equal(t, bank.TypeAccountOpened, ev1)
			require.Equal(t, id1, d1.Position)
			require.Equal(t, []journal.Tag{bank.AccountTag("sse-1")}, d1.Tags)
			id2, ev2, d2 := c.next(t)
			require.Equal(t, bank.TypeMoneyDeposited, ev2)
			require.JSONEq(t, `{"accountId":"sse-1","amount":7}`, string(d2.Data))
			p1, err := journal.ParsePosition(id1)
			require.NoError(t, err)
			p2, err := journal.ParsePosition(id2)
			require.NoError(t, err)
			require.True(t, p1.Before(p2))

			// Live: a new event arrives on the open stream.
			require.Equal(t, http.StatusOK, ts.request("POST", "/accounts/sse-1/withdraw", `{"amount":2}`).Status)
			id3, ev3, _ := c.next(t)
			require.Equal(t, bank.TypeMoneyWithdrawn, ev3)
			c.resp.Body.Close()

			// Resuming with Last-Event-ID continues after it: no repeat, no gap.
			require.Equal(t, http.StatusOK, ts.request("POST", "/accounts/sse-1/deposit", `{"amount":1}`).Status)
			c2 := ts.openStream(t, ctx, "/events/stream", id2)
			id, ev, _ := c2.next(t)
			require.Equal(t, id3, id)
			require.Equal(t, bank.TypeMoneyWithdrawn, ev)
			_, ev, _ = c2.next(t)
			require.Equal(t, bank.TypeMoneyDeposited, ev)
			c3 := ts.openStream(t, ctx, "/events/stream?from="+id3, "")
			_, ev, _ = c3.next(t)
			require.Equal(t, bank.TypeMoneyDeposited, ev)

			requireError(t, ts.request("GET", "/events/stream", "", "Last-Event-ID", "yesterday"), http.StatusBadRequest, bank.CodeInvalidRequest)
			requireError(t, ts.request("GET", "/events/stream?since=1", ""), http.StatusBadRequest, bank.CodeInvalidRequest)
		})
	}
}

// TestReadModelRebuild: a rebuild of the accounts read model (the one
// definition, on memory and on Postgres) empties it with the checkpoint
// and replays the feed: balances and versions after the rebuild equal
// those before, nothing counted twice.
func TestReadModelRebuild(t *testing.T) {
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			ts := startTestServer(t, kind)
			for i := range 4 {
				id := fmt.Sprintf("rb-%d", i)
				require.Equal(t, http.StatusCreated, ts.request("POST", "/accounts", `{"id":"`+id+`"}`).Status)
				r := ts.request("POST", "/accounts/"+id+"/deposit", `{"amount":100}`)
				require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			}
			r := ts.request("POST", "/transfers", `{"from":"rb-0","to":"rb-3","amount":40}`)
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rm := ts.srv.read
			last, err := ts.srv.backend.Journal.Head(ctx)
			require.NoError(t, err)
			require.NoError(t, rm.waitFor(ctx, last))
			before, _ := ts.listAll(t, "/accounts")
			require.Len(t, before, 4)
			require.Equal(t, int64(60), before[0].Balance)
			require.Equal(t, int64(140), before[3].Balance)
			p := rm.progress()

			require.NoError(t, rm.rebuild(ctx))
			require.Eventually(t, func() bool {
				now := rm.progress()
				return now.Epoch > p.Epoch && now.Events == p.Events && now.Checkpoint == p.Checkpoint
			}, 30*time.Second, 10*time.Millisecond, "the runner did not replay the feed after the rebuild")
			after, _ := ts.listAll(t, "/accounts")
			require.Equal(t, before, after, "a rebuild changed the read model")
		})
	}
}
