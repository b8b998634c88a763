package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

//go:embed assets
var assets embed.FS

// Config is what a console shows and may do.
type Config struct {
	// Journal is the schema's journal (required), Admin its operator queries
	// (required; pgadmin.New on the same pool and Config), Projections its
	// projection store (required).
	Journal     *postgres.Journal
	Admin       *pgadmin.Admin
	Projections *postgres.ProjectionStore
	// Schema and Database name what the console looks at in its header;
	// Database must not hold a password (the CLI passes user@host:port/db).
	Schema   string
	Database string
	// AllowActions enables the state-changing actions (a projection rebuild,
	// pause or resume, a dead-letter replay); without it the console is read-only and every POST is
	// refused with 403.
	AllowActions bool
	// AllowedHosts are the further names (a host, or host:port to pin the
	// port) the console answers to in a request's Host header, such as the
	// name an authenticating proxy forwards. The address a request arrived
	// on and localhost, 127.0.0.1 and [::1] with the listening port are
	// always accepted; every other Host is refused with 421, so a page that
	// rebinds its own DNS name to this address reaches nothing. Default none.
	AllowedHosts []string
	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
}

// Server serves the console's pages. Create it with New, mount Handler and
// run Follow for the live parts.
type Server struct {
	cfg  Config
	tmpl *template.Template
	mux  *http.ServeMux
	hub  *hub
	log  *slog.Logger
	// token is the per-process secret the console's own forms carry
	// (tokenField); every POST without it is refused.
	token string
	// hosts are Config.AllowedHosts, lower-cased.
	hosts []string
}

// tokenField is the form field (and tokenHeader the header) that carries
// the action token of a POST.
const (
	tokenField  = "token"
	tokenHeader = "X-Scribe-Console-Token"
)

// New returns a console for cfg; it fails when a required field is missing.
func New(cfg Config) (*Server, error) {
	if cfg.Journal == nil || cfg.Admin == nil || cfg.Projections == nil {
		return nil, errors.New("console: Config.Journal, Config.Admin and Config.Projections are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: parsing the page templates: %w", err)
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("console: making the action token: %w", err)
	}
	hosts := make([]string, 0, len(cfg.AllowedHosts))
	for _, h := range cfg.AllowedHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || strings.ContainsAny(h, "/ \t") {
			return nil, fmt.Errorf("console: allowed host %q is not a host name or host:port; give names such as console.example.com or console.example.com:8443", h)
		}
		hosts = append(hosts, h)
	}
	s := &Server{cfg: cfg, tmpl: tmpl, mux: http.NewServeMux(), hub: newHub(), log: log, token: hex.EncodeToString(secret[:]), hosts: hosts}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.overview)
	s.mux.HandleFunc("GET /streams", s.streams)
	s.mux.HandleFunc("GET /streams/{tag}", s.stream)
	s.mux.HandleFunc("GET /events/{id}", s.event)
	s.mux.HandleFunc("GET /correlations/{id}", s.correlation)
	s.mux.HandleFunc("GET /types", s.types)
	s.mux.HandleFunc("GET /leases", s.leases)
	s.mux.HandleFunc("GET /projections", s.projections)
	s.mux.HandleFunc("POST /projections/rebuild", s.rebuild)
	s.mux.HandleFunc("POST /projections/replay", s.replay)
	s.mux.HandleFunc("POST /projections/pause", s.pause(false))
	s.mux.HandleFunc("POST /projections/resume", s.pause(true))
	s.mux.HandleFunc("GET /verify", s.verifyPage)
	s.mux.HandleFunc("GET /verify/run", s.verifyRun)
	s.mux.HandleFunc("GET /live", s.live)
	s.mux.HandleFunc("GET /live/stats", s.stats)
	return s, nil
}

// Handler returns the console's HTTP handler. It answers only requests whose
// Host header names a host it serves (see Config.AllowedHosts), refusing any
// other with 421 Misdirected Request; it refuses a state-changing request
// (any method but GET and HEAD) with 403 unless it comes from the console's
// own pages: same-origin, and carrying the per-process action token that only
// those pages hold. Its headers keep the pages from being framed or from
// loading anything but their own assets.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if !s.servesHost(r) {
			http.Error(w, "misdirected request: this console answers only to its own address, localhost and the names given with -allowed-host", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) {
				http.Error(w, "cross-origin request refused: the console accepts state changes only from its own pages", http.StatusForbidden)
				return
			}
			if !s.validToken(r) {
				http.Error(w, "missing or wrong action token: reload the console's page and submit its form again", http.StatusForbidden)
				return
			}
		}
		s.mux.ServeHTTP(w, r)
	})
}

// servesHost reports whether r's Host header names this console: the
// address the request arrived on, a loopback name (localhost, 127.0.0.1,
// [::1]) with the port it arrived on, or one of Config.AllowedHosts (a name
// alone matches any port).
func (s *Server) servesHost(r *http.Request) bool {
	host := strings.ToLower(r.Host)
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ""
	}
	for _, allowed := range s.hosts {
		if allowed == host || allowed == name {
			return true
		}
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	if port == "" {
		port = "80"
		if r.TLS != nil {
			port = "443"
		}
	}
	if port != lport {
		return false
	}
	switch name {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	ip, lip := net.ParseIP(name), net.ParseIP(lhost)
	return ip != nil && lip != nil && ip.Equal(lip) && !lip.IsUnspecified()
}

// validToken reports whether a state-changing request carries the action
// token, in the form field the console's forms send or in its header.
func (s *Server) validToken(r *http.Request) bool {
	got := r.Header.Get(tokenHeader)
	if got == "" {
		got = r.PostFormValue(tokenField)
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// sameOrigin reports whether a state-changing request comes from the
// console's own pages: the browser's Sec-Fetch-Site says same-origin, or the
// Origin header (sent with every POST by browsers) names this host.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// Follow keeps the live parts current: it follows the journal's feed from its
// head and fans each new event out to the open live views, and emits a
// per-second tick with the event rate. It returns when ctx ends.
func (s *Server) Follow(ctx context.Context) error {
	return s.hub.follow(ctx, s.cfg.Journal, s.lags, s.log)
}

// lags reads each projection's lag in seconds for the live chart: the
// projections table and one index probe of the feed per projection.
func (s *Server) lags(ctx context.Context) []projectionLag {
	statuses, err := s.cfg.Projections.Statuses(ctx)
	if err != nil {
		return nil
	}
	out := make([]projectionLag, 0, len(statuses))
	for _, st := range statuses {
		l := projectionLag{Name: st.Key.String()}
		if st.Slices > 0 {
			if lags, err := s.cfg.Admin.SliceLags(ctx, st.Key, 1); err == nil {
				l.Seconds = age(pgadmin.TotalSliceLag(lags).Oldest).Seconds()
			}
			out = append(out, l)
			continue
		}
		for rec, err := range s.cfg.Journal.ReadAll(ctx, st.Checkpoint, 1) {
			if err == nil {
				l.Seconds = max(0, time.Since(rec.RecordedAt).Seconds())
			}
		}
		out = append(out, l)
	}
	return out
}

// page renders the named template inside the layout.
func (s *Server) page(w http.ResponseWriter, name string, title string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	d := pageData{Title: title, Schema: s.cfg.Schema, Database: s.cfg.Database, Actions: s.cfg.AllowActions, Data: data}
	if s.cfg.AllowActions {
		d.Token = s.token
	}
	err := s.tmpl.ExecuteTemplate(w, name, d)
	if err != nil {
		s.log.Error("console: rendering a page", "page", name, "err", err)
	}
}

// fail renders an error page with status code.
func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	w.WriteHeader(code)
	s.page(w, "error", http.StatusText(code), err.Error())
}

// pageData is what every page template receives.
type pageData struct {
	Title    string
	Schema   string
	Database string
	Actions  bool
	// Token is the action token the page's forms send; empty on a
	// read-only console.
	Token string
	Data  any
}

var funcs = template.FuncMap{
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"pathEscape": url.PathEscape,
	"short": func(s string, n int) string {
		if len(s) <= n {
			return s
		}
		return s[:n] + "…"
	},
	"join": strings.Join,
	"num":  thousands,
}

// thousands renders n with thin-space thousands separators.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	return b.String()
}
