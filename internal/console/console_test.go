package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/console"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// fixture is a migrated schema with a few events and a console on it.
type fixture struct {
	pool    *pgxpool.Pool
	schema  string
	exec    func(sql string, args ...any)
	journal *postgres.Journal
	admin   *pgadmin.Admin
	store   *postgres.ProjectionStore
	recs    []journal.Record
	srv     *httptest.Server
}

func setup(t *testing.T, allowActions bool) *fixture {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	ctx := t.Context()
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	ps, err := postgres.NewProjectionStore(pool, cfg)
	require.NoError(t, err)
	a, err := pgadmin.New(pool, cfg)
	require.NoError(t, err)
	f := &fixture{pool: pool, schema: schema, journal: j, admin: a, store: ps}
	f.exec = func(sql string, args ...any) {
		_, err := pool.Exec(ctx, strings.ReplaceAll(sql, "__S__", pgx.Identifier{schema}.Sanitize()), args...)
		require.NoError(t, err)
	}
	add := func(typ, data string, md journal.Metadata, tags ...journal.Tag) {
		res, err := j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: typ, SchemaVersion: 1, Tags: tags, Data: []byte(data), Metadata: md}}, journal.AppendOptions{})
		require.NoError(t, err)
		f.recs = append(f.recs, res.Records...)
	}
	add("AccountOpened", `{"owner":"alice"}`, journal.Metadata{CorrelationID: "req-1"}, "account:alice")
	add("MoneyDeposited", `{"amount":10}`, journal.Metadata{CorrelationID: "req-1"}, "account:alice")
	add("AccountOpened", `{"owner":"<script>alert(1)</script>"}`, journal.Metadata{}, "account:mallory")
	add("ClockTicked", `{}`, journal.Metadata{})
	c, err := console.New(console.Config{Journal: j, Admin: a, Projections: ps, Schema: schema, Database: "test@127.0.0.1:5432/test", AllowActions: allowActions})
	require.NoError(t, err)
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Follow(fctx) }()
	f.srv = httptest.NewServer(c.Handler())
	t.Cleanup(func() { f.srv.Close(); cancel(); <-done })
	return f
}

func (f *fixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := http.Get(f.srv.URL + path)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

// tokenRE finds the action token in a page's forms.
var tokenRE = regexp.MustCompile(`<input type="hidden" name="token" value="([0-9a-f]+)">`)

// token reads the action token from the console's projections page, as a
// browser submitting its forms does; "" when the page has none.
func (f *fixture) token(t *testing.T) string {
	t.Helper()
	code, body := f.get(t, "/projections")
	require.Equal(t, http.StatusOK, code, body)
	m := tokenRE.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// withToken returns a copy of form with the token field set.
func withToken(form url.Values, token string) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = v
	}
	out.Set("token", token)
	return out
}

// TestPages: every page answers at its stable URL with what it is about, and
// event data (user input) is shown as text, never as markup.
func TestPages(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	alice := f.recs[1]
	for _, c := range []struct{ path, want string }{
		{"/", "Events per second"},
		{"/", "events stored (hot)</div><div class=\"big\">4</div>"},
		{"/streams?prefix=account:", "account:mallory"},
		{"/streams/account:alice", "MoneyDeposited"},
		{"/events/" + alice.ID.String(), "account:alice v2"},
		{"/correlations/req-1", "AccountOpened"},
		{"/types", "ClockTicked"},
		{"/leases", "0 leases held"},
		{"/projections", "no projection has run"},
		{"/verify", "Verify chains"},
		{"/assets/console.js", "EventSource"},
	} {
		code, body := f.get(t, c.path)
		require.Equal(t, http.StatusOK, code, "%s: %s", c.path, body)
		require.Contains(t, body, c.want, c.path)
	}
	code, body := f.get(t, "/streams/account:mallory")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "<script>alert(1)</script>", "event data must be escaped")
	require.Contains(t, body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.Contains(t, body, `action="/streams"`, "the header's tag search is on every page")

	code, body = f.get(t, "/streams/account:nobody")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "has no events")
	code, _ = f.get(t, "/events/not-a-uuid")
	require.Equal(t, http.StatusBadRequest, code)
	code, body = f.get(t, "/streams?prefix=account:alice")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "account:mallory", "the prefix filters")
}

// TestActions: a read-only console refuses every change; one started with
// actions refuses cross-origin requests and a missing confirmation, and
// rebuilds with both right.
func TestActions(t *testing.T) {
	t.Parallel()
	post := func(f *fixture, origin string, form url.Values) int {
		form = withToken(form, f.token(t))
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/projections/rebuild", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	form := url.Values{"name": {"accounts"}, "version": {"1"}, "confirm": {"accounts"}}

	ro := setup(t, false)
	require.Equal(t, http.StatusForbidden, post(ro, ro.srv.URL, form), "read-only")

	f := setup(t, true)
	k := projection.Key{Name: "accounts", Version: 1}
	lease, err := claimOne(t.Context(), f.store, k, "node-1")
	require.NoError(t, err)
	require.NoError(t, commitOne(t.Context(), f.store, lease, lease.Checkpoint, f.recs[:2], func(context.Context, pgx.Tx) error { return nil }))

	require.Equal(t, http.StatusForbidden, post(f, "https://evil.example", form), "cross-origin")
	require.Equal(t, http.StatusForbidden, post(f, "", form), "no origin")
	require.Equal(t, http.StatusBadRequest, post(f, f.srv.URL, url.Values{"name": {"accounts"}, "version": {"1"}, "confirm": {"yes"}}), "wrong confirmation")
	st, err := f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Events, "nothing reset yet")

	require.Equal(t, http.StatusSeeOther, post(f, f.srv.URL, form))
	st, err = f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.True(t, st.Checkpoint.IsZero(), "the rebuild reset the checkpoint")
	_, body := f.get(t, "/projections")
	require.Contains(t, body, "Rebuild a projection")

	// A dead letter is listed, and its replay needs the confirmation too.
	tx, err := f.pool.Begin(t.Context())
	require.NoError(t, err)
	require.NoError(t, f.store.DeadLetter(t.Context(), tx, projection.DeadLetter{Key: k, Record: f.recs[2], Error: "sink refused <b>it</b>", Attempts: 3, At: time.Now()}))
	require.NoError(t, tx.Commit(t.Context()))
	_, body = f.get(t, "/projections")
	require.Contains(t, body, "Dead letters of accounts@1")
	require.Contains(t, body, f.recs[2].ID.String())
	require.Contains(t, body, "sink refused &lt;b&gt;it&lt;/b&gt;")
	replay := func(form url.Values) int {
		form = withToken(form, f.token(t))
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/projections/replay", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", f.srv.URL)
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusBadRequest, replay(url.Values{"name": {"accounts"}, "version": {"1"}}))
	letters, err := f.store.DeadLetters(t.Context(), k)
	require.NoError(t, err)
	require.True(t, letters[0].ReplayRequestedAt.IsZero(), "not confirmed, not requested")
	require.Equal(t, http.StatusSeeOther, replay(form))
	letters, err = f.store.DeadLetters(t.Context(), k)
	require.NoError(t, err)
	require.False(t, letters[0].ReplayRequestedAt.IsZero(), "the replay was requested")

	// Pause and resume, behind the same confirmation.
	postTo := func(path string, form url.Values) int {
		form = withToken(form, f.token(t))
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", f.srv.URL)
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusSeeOther, postTo("/projections/pause", form))
	st, err = f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.Equal(t, projection.StatePaused, st.State)
	require.Equal(t, http.StatusSeeOther, postTo("/projections/resume", form))
	st, err = f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.NotEqual(t, projection.StatePaused, st.State)
}

// sse reads server-sent events from path until match accepts one or the
// deadline passes.
func sse(t *testing.T, f *fixture, path string, deadline time.Duration, match func(kind, data string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+path, nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	kind := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if match(kind, strings.TrimPrefix(line, "data: ")) {
				return
			}
		}
	}
	t.Fatalf("%s: no matching message within %s (%v)", path, deadline, sc.Err())
}

// TestLiveFeed: an event appended while a view is open reaches it through
// the live stream.
func TestLiveFeed(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	appended := make(chan journal.Record, 1)
	connected := make(chan struct{})
	go func() {
		<-connected
		res, err := f.journal.Append(context.Background(), []journal.Event{{ID: journal.NewEventID(), Type: "MoneyDeposited", SchemaVersion: 1, Tags: []journal.Tag{"account:alice"}, Data: []byte(`{"amount":5}`)}}, journal.AppendOptions{})
		if err == nil {
			appended <- res.Records[0]
		}
		close(appended)
	}()
	var want string
	sse(t, f, "/live", 20*time.Second, func(kind, data string) bool {
		if kind == "tick" && want == "" {
			select {
			case <-connected:
			default:
				close(connected)
			}
			r, ok := <-appended
			require.True(t, ok, "the append failed")
			want = r.ID.String()
			return false
		}
		if kind != "event" {
			return false
		}
		var e struct{ ID, Type string }
		require.NoError(t, json.Unmarshal([]byte(data), &e))
		return e.ID == want
	})
}

// TestVerifyShowsBreak: a tampered event is reported as the first broken
// link of its stream, with the run's progress.
func TestVerifyShowsBreak(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	f.exec(`UPDATE __S__.events SET data = '{"amount":1000000}' WHERE id = $1`, f.recs[1].ID)
	var last struct {
		Done, Total, Broken int
		Finished            bool
		Break               *struct {
			Tag     string
			Version uint64
		}
	}
	sse(t, f, "/verify/run", 30*time.Second, func(kind, data string) bool {
		require.Equal(t, "progress", kind)
		require.NoError(t, json.Unmarshal([]byte(data), &last))
		return last.Finished
	})
	require.Equal(t, last.Total, last.Done)
	require.Equal(t, 1, last.Broken)
	require.NotNil(t, last.Break)
	require.Equal(t, "account:alice", last.Break.Tag)
	require.EqualValues(t, 2, last.Break.Version)
}

// TestSlicedProjection: a sliced projection's row sums its slices up:
// running while a slice lease is live, its runners and slices, the
// deliveries applied and the events its slices have not applied.
func TestSlicedProjection(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	ctx := t.Context()
	k := projection.Key{Name: "balances", Version: 1}
	sl := projection.Slicing{Group: "account", Count: 4, Partition: journal.DefaultPartition}
	_, err := f.store.Join(ctx, k, sl.Layout(), "runner-1", time.Minute)
	require.NoError(t, err)
	leases, err := f.store.Claim(ctx, k, "runner-1", time.Minute, []int{0, 1, 2, 3})
	require.NoError(t, err)
	require.Len(t, leases, 4)
	alice, _ := sl.SliceOf("account:alice")
	require.NoError(t, f.store.Commit(ctx, []projection.Lease{leases[alice]}, f.recs[:1], []int{alice},
		func(context.Context, pgx.Tx) error { return nil }))

	code, body := f.get(t, "/projections")
	require.Equal(t, http.StatusOK, code, body)
	// name, version, state, active, checkpoint, applied 1, lag 2 (alice's
	// deposit and mallory's opening), lag time, owner.
	require.Regexp(t, `<td>balances</td><td>1</td><td>running</td><td>no</td><td>[0-9.]+</td><td>1</td><td>2</td><td>[0-9.]+m?s</td><td>1 runners, 4 slices</td>`, body)
}

// claimOne joins k as an unsliced projection for owner and claims its one
// slice (an error when another runner holds it).
func claimOne(ctx context.Context, st *postgres.ProjectionStore, k projection.Key, owner string) (projection.Lease, error) {
	if _, err := st.Join(ctx, k, projection.Layout{}, owner, time.Minute); err != nil {
		return projection.Lease{}, err
	}
	ls, err := st.Claim(ctx, k, owner, time.Minute, []int{0})
	if err == nil && len(ls) == 0 {
		err = errors.New("the projection's slice is held by another runner")
	}
	if err != nil {
		return projection.Lease{}, err
	}
	return ls[0], nil
}

// commitOne commits recs under l, an unsliced projection's lease, from the
// checkpoint from.
func commitOne(ctx context.Context, st *postgres.ProjectionStore, l projection.Lease, from journal.Position, recs []journal.Record, apply func(context.Context, pgx.Tx) error) error {
	l.Checkpoint = from
	return st.Commit(ctx, []projection.Lease{l}, recs, make([]int, len(recs)), apply)
}
