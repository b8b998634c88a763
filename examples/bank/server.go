package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scribe-es/scribe/admission"
	"github.com/scribe-es/scribe/runtime"
)

// serverConfig configures a bank server.
type serverConfig struct {
	// Addr is the listen address; port 0 picks a free port (see server.Addr).
	Addr string
	// DatabaseURL selects Postgres; empty means the in-memory journal.
	DatabaseURL string
	// Schema is the Postgres schema (default "scribe").
	Schema string
	// KeysDatabaseURL keeps the erasure key store (schema
	// "<Schema>_keys") on another Postgres database, backed up apart from
	// the events; empty: on DatabaseURL's.
	KeysDatabaseURL string
	// NodeID names this node; keep it stable across restarts.
	NodeID string
	// OtelStdout exports traces and metrics to TelemetryOut.
	OtelStdout   bool
	TelemetryOut io.Writer
	Logger       *slog.Logger
	// ShutdownTimeout bounds Shutdown when the caller's context has none.
	ShutdownTimeout time.Duration
	// Cluster, when set, makes this process a cluster member (see cluster.go);
	// SessionTimeout is the runtime's node session timeout (0: its default).
	Cluster        runtime.Cluster
	SessionTimeout time.Duration
	// MaxInFlight bounds the requests served at once (0: defaultMaxInFlight).
	MaxInFlight int
	// SecondDatabaseURL, when set, stores the accounts of SecondPartition
	// on that Postgres database (see partitions.go); SecondPartition
	// defaults to defaultSecondPartition.
	SecondDatabaseURL string
	SecondPartition   string
}

// maxHeaderBytes bounds a request's headers (Go's server answers 431 past
// it): headers bypass the body limit, and a megabyte correlation ID stored on
// every event and held in caches is how one client costs everyone memory.
const maxHeaderBytes = 16 << 10

// server is a running bank service: HTTP API, Scribe runtime and storage.
type server struct {
	log     *slog.Logger
	ln      net.Listener
	http    *http.Server
	ready   atomic.Bool
	svc     *bankService
	read    *readModel
	closing chan struct{}
	// closeOnce closes closing.
	closeOnce sync.Once
	backend   *backend
	tel       *telemetry
	failed    chan error
}

// startServer opens the storage, starts the runtime and serves the API. It
// returns once the listener is bound and /healthz answers 200.
func startServer(ctx context.Context, cfg serverConfig) (_ *server, err error) {
	start := time.Now()
	if cfg.Schema == "" {
		cfg.Schema = "scribe"
	}
	if cfg.NodeID == "" {
		return nil, errors.New("the node ID is empty; pass -node with a name that stays the same across restarts")
	}
	if cfg.TelemetryOut == nil {
		cfg.TelemetryOut = io.Discard
	}
	log := cfg.Logger
	s := &server{log: log, failed: make(chan error, 1), closing: make(chan struct{})}
	defer func() {
		if err != nil {
			s.close(context.Background())
		}
	}()

	if s.tel, err = newTelemetry(ctx, cfg.NodeID, cfg.OtelStdout, cfg.TelemetryOut); err != nil {
		return nil, err
	}
	if s.backend, err = openBackendKeys(ctx, cfg.DatabaseURL, cfg.KeysDatabaseURL, cfg.Schema, log, s.tel.Tracer, s.tel.Meter); err != nil {
		return nil, err
	}
	if cfg.SecondDatabaseURL != "" {
		if cfg.SecondPartition == "" {
			cfg.SecondPartition = defaultSecondPartition
		}
		first := s.backend
		if s.backend, err = withSecondDatabase(ctx, first, cfg.SecondDatabaseURL, cfg.Schema, cfg.SecondPartition, log, s.tel.Tracer, s.tel.Meter); err != nil {
			first.Close()
			s.backend = nil
			return nil, err
		}
	}
	if s.svc, err = newBankService(ctx, bankServiceConfig{
		Backend:        s.backend,
		NodeID:         cfg.NodeID,
		Logger:         log,
		TracerProvider: s.tel.Tracer,
		MeterProvider:  s.tel.Meter,
		Cluster:        cfg.Cluster,
		SessionTimeout: cfg.SessionTimeout,
	}); err != nil {
		return nil, err
	}
	if s.read, err = startReadModel(ctx, s.backend, s.svc, cfg.NodeID, log); err != nil {
		return nil, fmt.Errorf("start the accounts read model: %w", err)
	}
	handler, err := newAPI(apiConfig{
		Read:           &readSide{List: s.read.list, Progress: s.read.progress, Feed: s.backend.feed()},
		Closing:        s.closing,
		Service:        s.svc,
		Logger:         log,
		Ready:          &s.ready,
		Readiness:      s.svc.Ready,
		Degraded:       s.svc.Degraded,
		StoreEpoch:     s.svc.rt.StoreEpoch,
		MaxInFlight:    cfg.MaxInFlight,
		TracerProvider: s.tel.Tracer,
		MeterProvider:  s.tel.Meter,
	})
	if err != nil {
		return nil, err
	}
	if s.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("listen on %s: %w; pick another address with -addr", cfg.Addr, err)
	}
	// The admission limit judges each request from its arrival in the
	// process, not from when its handler starts (admission.Arrivals).
	var arrivals admission.Arrivals
	s.http = &http.Server{
		Handler:           handler,
		ConnContext:       arrivals.ConnContext,
		ConnState:         arrivals.ConnState,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.failed <- err
		}
	}()
	s.ready.Store(true)
	log.Info("bank listening", "addr", s.ln.Addr().String(), "url", "http://"+s.ln.Addr().String(),
		"storage", s.backend.Description, "node", cfg.NodeID, "telemetry", s.tel.Description,
		"startup_ms", time.Since(start).Milliseconds())
	return s, nil
}

// Addr returns the bound listen address (host:port).
func (s *server) Addr() string { return s.ln.Addr().String() }

// Failed delivers an error when serving stops unexpectedly.
func (s *server) Failed() <-chan error { return s.failed }

// Shutdown stops accepting connections, waits for in-flight requests,
// passivates every actor (runtime shutdown: snapshots flushed, leases
// released), closes the storage and flushes telemetry.
func (s *server) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	s.closeOnce.Do(func() { close(s.closing) })
	var errs []error
	if s.http != nil {
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	errs = append(errs, s.close(ctx))
	return errors.Join(errs...)
}

func (s *server) close(ctx context.Context) error {
	var errs []error
	if s.read != nil {
		s.read.Stop()
	}
	if s.svc != nil {
		if err := s.svc.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("runtime shutdown: %w", err))
		}
	}
	if s.tel != nil {
		if err := s.tel.Flush(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry flush: %w", err))
		}
	}
	if s.backend != nil {
		s.backend.Close()
	}
	if s.tel != nil {
		if err := s.tel.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry shutdown: %w", err))
		}
	}
	return errors.Join(errs...)
}
