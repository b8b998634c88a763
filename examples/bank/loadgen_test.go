package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
)

func TestNextLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{`</a?from=11&limit=10>; rel="next"`}, "/a?from=11&limit=10"},
		{[]string{`</a>; rel=next`}, "/a"},
		{[]string{`</a>;rel="prev", </b>; rel="next"`}, "/b"},
		{[]string{`</a>; rel="prev"`, `</b>; title="x; rel=next, y"; REL="Next"`}, "/b"},
		{[]string{`</a>; rel="prev next"`}, "/a"},
		{[]string{`</a>; title="a \"next\""; rel="nextpage"`}, ""},
		{[]string{`</a>; rel="prev"`}, ""},
		{[]string{`<https://example.com/x,y;z>; anchor="#"; rel="next"`}, "https://example.com/x,y;z"},
	} {
		got, err := nextLink(tc.values)
		require.NoError(t, err, "%q", tc.values)
		require.Equal(t, tc.want, got, "%q", tc.values)
	}
	for _, bad := range []string{`/a; rel="next"`, `</a; rel="next"`, `</a> rel="next"`, `</a>; rel="next`, `</a>; title="x\`} {
		_, err := nextLink([]string{bad})
		require.Error(t, err, bad)
	}
}

// pagedEvents is a Service that only serves Events: account "many" has n
// events; any other account has none.
type pagedEvents struct {
	Service
	n uint64
}

func (p pagedEvents) Events(_ context.Context, id string, from uint64, limit int) ([]EventView, bool, error) {
	if id != "many" {
		return nil, false, bank.NotFound(id)
	}
	var page []EventView
	for v := from; v <= p.n && len(page) < limit; v++ {
		page = append(page, EventView{Version: v, Type: bank.TypeMoneyDeposited, Data: json.RawMessage(`{"amount":1}`)})
	}
	return page, from+uint64(limit) <= p.n, nil
}

// TestAllEventsFollowsLinks reads 2,345 events through the real handler,
// whose default page of 1,000 makes three pages.
func TestAllEventsFollowsLinks(t *testing.T) {
	t.Parallel()
	h, err := newAPI(apiConfig{Service: pagedEvents{n: 2345}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := &loadClient{base: srv.URL, http: srv.Client()}

	all, err := c.allEvents(context.Background(), "many")
	require.NoError(t, err)
	require.Equal(t, 2345, len(all), "events read across the pages")
	for i, ev := range all {
		require.Equal(t, uint64(i+1), ev.Version)
	}
	_, err = c.allEvents(context.Background(), "nobody")
	require.ErrorContains(t, err, "404")
}

// TestAllEventsStopsOnBrokenPaging serves Link headers that would make a
// naive client loop or wander off; allEvents must fail instead.
func TestAllEventsStopsOnBrokenPaging(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		handler func(w http.ResponseWriter, r *http.Request)
		want    string
	}{
		"links to itself": {
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Link", `</accounts/a/events?from=1&limit=2>; rel="next"`)
				fmt.Fprint(w, `[{"version":1},{"version":2}]`)
			},
			"not contiguous",
		},
		"empty page with a next link": {
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Link", `</accounts/a/events?from=2>; rel="next"`)
				fmt.Fprint(w, `[]`)
			},
			"empty page",
		},
		"links to another host": {
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Link", `<http://elsewhere.invalid/accounts/a/events?from=2>; rel="next"`)
				fmt.Fprint(w, `[{"version":1}]`)
			},
			"leaves the service",
		},
		"malformed link": {
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Link", `/accounts/a/events?from=2; rel="next"`)
				fmt.Fprint(w, `[{"version":1}]`)
			},
			"malformed Link header",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(tc.handler))
			defer srv.Close()
			_, err := (&loadClient{base: srv.URL, http: srv.Client()}).allEvents(context.Background(), "a")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestReadModelCheck: the loadgen's final check passes when GET /accounts
// agrees with the accounts, follows its pages, and reports every account
// the read model shows differently (or not at all).
func TestReadModelCheck(t *testing.T) {
	t.Parallel()
	listed := []AccountView{{ID: "a", Balance: 5, Version: 2}, {ID: "b", Balance: 7, Version: 3}, {ID: "c", Balance: 1, Version: 1}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := listed[:2]
		if r.URL.Query().Get("after") == "b" {
			page = listed[2:]
		} else {
			w.Header().Set("Link", `</accounts?after=b&limit=2>; rel="next"`)
		}
		require.NoError(t, json.NewEncoder(w).Encode(page))
	}))
	defer srv.Close()
	c := &loadClient{base: srv.URL, http: srv.Client()}
	ctx := context.Background()

	var ok invariantResult
	require.NoError(t, checkReadModel(ctx, c, map[string]AccountView{"a": listed[0], "c": listed[2]}, time.Millisecond, &ok))
	require.Empty(t, ok.Problems)

	var bad invariantResult
	views := map[string]AccountView{"a": {ID: "a", Balance: 6, Version: 3}, "c": listed[2], "d": {ID: "d", Balance: 1, Version: 1}}
	require.NoError(t, checkReadModel(ctx, c, views, time.Millisecond, &bad))
	require.Equal(t, []string{"a", "d"}, bad.ReadModelMismatch)
	require.Len(t, bad.Problems, 2)
	require.Contains(t, bad.Problems[0], "account a shows balance 5 version 2, the account itself 6 version 3")
}
