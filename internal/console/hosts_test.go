package console_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/console"
	"github.com/scribe-es/scribe/projection"
)

// request sends method to path of srv with the Host header host (the
// connection still goes to srv), the given Origin ("" for none) and form as
// the body of a POST; it returns the status and body.
func request(t *testing.T, srv *httptest.Server, method, host, path, origin string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, srv.URL+path, body)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

// TestForeignHostRefused: DNS rebinding reaches nothing. A request whose
// Host names another site is refused with 421, GET and POST alike, also
// when its Origin matches that Host (what a browser sends after a
// rebinding) and when it carries the real action token; the console's own
// address, localhost and a name given in AllowedHosts are served.
func TestForeignHostRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	_, port, err := net.SplitHostPort(f.srv.Listener.Addr().String())
	require.NoError(t, err)
	token := f.token(t)
	require.NotEmpty(t, token)
	k := projection.Key{Name: "accounts", Version: 1}
	_, err = claimOne(t.Context(), f.store, k, "node-1")
	require.NoError(t, err)
	form := url.Values{"name": {"accounts"}, "version": {"1"}, "confirm": {"accounts"}, "token": {token}}

	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "localhost:1", "127.0.0.2:" + port} {
		for _, path := range []string{"/", "/streams/account:alice", "/projections", "/live/stats", "/assets/console.js"} {
			code, body := request(t, f.srv, http.MethodGet, host, path, "", nil)
			require.Equal(t, http.StatusMisdirectedRequest, code, "GET %s with Host %s", path, host)
			require.NotContains(t, body, "alice", "GET %s with Host %s", path, host)
		}
		for _, origin := range []string{"", "http://" + host, f.srv.URL} {
			code, _ := request(t, f.srv, http.MethodPost, host, "/projections/pause", origin, form)
			require.Equal(t, http.StatusMisdirectedRequest, code, "POST with Host %s and Origin %q", host, origin)
		}
	}
	st, err := f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.NotEqual(t, projection.StatePaused, st.State, "no refused POST reached the action")

	for _, host := range []string{"", "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port} {
		code, body := request(t, f.srv, http.MethodGet, host, "/streams/account:alice", "", nil)
		require.Equal(t, http.StatusOK, code, "Host %q: %s", host, body)
	}

	// A name given in AllowedHosts is served under any port, host:port only
	// under its own.
	c, err := console.New(console.Config{Journal: f.journal, Admin: f.admin, Projections: f.store, AllowedHosts: []string{"Console.Example", "proxy.example:8443"}})
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	for host, want := range map[string]int{
		"console.example":      http.StatusOK,
		"console.example:443":  http.StatusOK,
		"proxy.example:8443":   http.StatusOK,
		"proxy.example:8444":   http.StatusMisdirectedRequest,
		"proxy.example":        http.StatusMisdirectedRequest,
		"evil.example":         http.StatusMisdirectedRequest,
		"xconsole.example":     http.StatusMisdirectedRequest,
		"console.example.evil": http.StatusMisdirectedRequest,
	} {
		code, _ := request(t, srv, http.MethodGet, host, "/types", "", nil)
		require.Equal(t, want, code, "Host %s", host)
	}
	_, err = console.New(console.Config{Journal: f.journal, Admin: f.admin, Projections: f.store, AllowedHosts: []string{"http://x.example/"}})
	require.Error(t, err, "an allowed host must be a name, not a URL")
}

// TestActionToken: a same-origin POST needs the action token of this
// console's pages: missing, wrong or another console's token is refused with
// 403 and changes nothing; the page's own token (as a form field or header)
// is accepted. A read-only console puts no token in its pages.
func TestActionToken(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	other := setup(t, true)
	token, otherToken := f.token(t), other.token(t)
	require.Len(t, token, 64)
	require.NotEqual(t, token, otherToken, "each console process has its own token")
	k := projection.Key{Name: "accounts", Version: 1}
	_, err := claimOne(t.Context(), f.store, k, "node-1")
	require.NoError(t, err)
	form := func(token string) url.Values {
		v := url.Values{"name": {"accounts"}, "version": {"1"}, "confirm": {"accounts"}}
		if token != "" {
			v.Set("token", token)
		}
		return v
	}
	for name, tok := range map[string]string{"missing": "", "wrong": strings.Repeat("0", 64), "another console's": otherToken, "truncated": token[:32]} {
		code, body := request(t, f.srv, http.MethodPost, "", "/projections/pause", f.srv.URL, form(tok))
		require.Equal(t, http.StatusForbidden, code, "%s token", name)
		require.Contains(t, body, "action token", "%s token", name)
	}
	st, err := f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.NotEqual(t, projection.StatePaused, st.State, "no refused POST reached the action")

	code, body := request(t, f.srv, http.MethodPost, "", "/projections/pause", f.srv.URL, form(token))
	require.Equal(t, http.StatusSeeOther, code, body)
	st, err = f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.Equal(t, projection.StatePaused, st.State)

	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/projections/resume", strings.NewReader(form("").Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.srv.URL)
	req.Header.Set("X-Scribe-Console-Token", token)
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode, "the token in the header")
	st, err = f.store.Status(t.Context(), k)
	require.NoError(t, err)
	require.NotEqual(t, projection.StatePaused, st.State)

	ro := setup(t, false)
	require.Empty(t, ro.token(t), "a read-only console's pages hold no token")
}
