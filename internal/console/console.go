package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/scribe-es/scribe/postgres"
)

//go:embed assets
var assets embed.FS

// Config is what a console shows and may do.
type Config struct {
	// Journal is the schema's journal (required); Projections its projection
	// store (required).
	Journal     *postgres.Journal
	Projections *postgres.ProjectionStore
	// Schema and Database name what the console looks at in its header;
	// Database must not hold a password (the CLI passes user@host:port/db).
	Schema   string
	Database string
	// AllowActions enables the state-changing actions (a projection rebuild,
	// pause or resume, a dead-letter replay); without it the console is read-only and every POST is
	// refused with 403.
	AllowActions bool
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
}

// New returns a console for cfg; it fails when a required field is missing.
func New(cfg Config) (*Server, error) {
	if cfg.Journal == nil || cfg.Projections == nil {
		return nil, errors.New("console: Config.Journal and Config.Projections are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: parsing the page templates: %w", err)
	}
	s := &Server{cfg: cfg, tmpl: tmpl, mux: http.NewServeMux(), hub: newHub(), log: log}
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

// Handler returns the console's HTTP handler. It sets headers that keep the
// pages from being framed or from loading anything but their own assets, and
// refuses cross-origin POSTs.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) {
				http.Error(w, "cross-origin request refused: the console accepts state changes only from its own pages", http.StatusForbidden)
				return
			}
		}
		s.mux.ServeHTTP(w, r)
	})
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
			if lags, err := s.cfg.Projections.SliceLags(ctx, st.Key, 1); err == nil {
				l.Seconds = age(postgres.TotalSliceLag(lags).Oldest).Seconds()
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
	err := s.tmpl.ExecuteTemplate(w, name, pageData{Title: title, Schema: s.cfg.Schema, Database: s.cfg.Database, Actions: s.cfg.AllowActions, Data: data})
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
	Data     any
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
