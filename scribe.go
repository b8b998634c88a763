package scribe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// Config configures Open. The zero value runs in memory.
type Config struct {
	// DatabaseURL is the Postgres database holding the events, snapshots,
	// read models and (unless KeysDatabaseURL) the erasure keys; empty
	// means in memory (lost at Close: for tests and demos).
	DatabaseURL string
	// Schema holds Scribe's tables in that database (default "scribe"); the
	// key store lives beside it (postgres.KeyStoreSchemaFor).
	Schema string
	// KeysDatabaseURL keeps the erasure keys on another database, backed up
	// apart from the events (see docs/erasure-and-retention.md). Optional.
	KeysDatabaseURL string
	// NodeID identifies this process (runtime.Config.NodeID): give each
	// replica its own, stable across restarts. Default: the host name.
	NodeID string
	// Logger receives the runtime's and the read models' logs. Default:
	// discard.
	Logger *slog.Logger
	// Runtime, if set, adjusts the runtime's configuration (limits,
	// telemetry, cluster …) before it starts; the stores are already set.
	Runtime func(*runtime.Config)
	// Postgres configures postgres.Open beyond the schema and the key store
	// (pool size, verify only, tracing …); its Schema, KeyStore and
	// KeyStoreURL are this Config's Schema and KeysDatabaseURL, with the key
	// store always set up. Default: the zero postgres.Config.
	Postgres postgres.Config
}

// Service is a running runtime with its stores and read models. Its
// methods are safe for concurrent use.
type Service struct {
	// Runtime executes commands; register events, aggregates and DCB
	// commands on it before the first command.
	Runtime *runtime.Runtime
	// Store is the Postgres store (pool, journal, snapshots, projections,
	// keys); nil in memory.
	Store *postgres.Store

	cfg     Config
	journal journal.Journal
	project func(projection.RowProjection, projection.Options) (*ReadModel, error)

	ctx    context.Context // ends at Close: the read models' runners stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	models []*ReadModel
	closed bool
}

// Open sets up the stores (migrating a Postgres schema) and starts the
// runtime. Every failure is returned with what to fix, and nothing stays
// open after one.
func Open(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DatabaseURL == "" && cfg.KeysDatabaseURL != "" {
		return nil, fmt.Errorf("%w: scribe: KeysDatabaseURL is set but DatabaseURL is empty (in memory); set both or neither", journal.ErrConfiguration)
	}
	s := &Service{cfg: cfg}
	rc := runtime.Config{NodeID: cfg.NodeID, Logger: cfg.Logger}
	if cfg.DatabaseURL == "" {
		j, ps := memory.New(), projection.NewMemoryStore()
		rc.Journal, rc.Snapshots = j, snapshots.NewMemory()
		rc.KeyStore = erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
		s.journal = j
		s.project = func(p projection.RowProjection, o projection.Options) (*ReadModel, error) {
			return startReadModel(s, j, ps, p, o)
		}
	} else {
		pcfg := cfg.Postgres
		pcfg.Schema, pcfg.KeyStore, pcfg.KeyStoreURL = cfg.Schema, &postgres.KeyStoreConfig{}, cfg.KeysDatabaseURL
		store, err := postgres.Open(ctx, cfg.DatabaseURL, pcfg)
		if err != nil {
			return nil, err
		}
		s.Store, s.journal = store, store.Journal
		rc.Journal, rc.Snapshots, rc.KeyStore = store.Journal, store.Snapshots, store.Keys
		s.project = func(p projection.RowProjection, o projection.Options) (*ReadModel, error) {
			return startReadModel(s, store.Journal, store.Projections, p, o)
		}
	}
	if cfg.Runtime != nil {
		cfg.Runtime(&rc)
	}
	rt, err := runtime.New(ctx, rc)
	if err != nil {
		if s.Store != nil {
			s.Store.Close()
		}
		return nil, err
	}
	s.Runtime = rt
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Ready is nil when the runtime is ready (runtime.Runtime.Ready) and no read
// model has stopped for good (a configuration error, a newer version
// active) or is stuck on a record its handler keeps failing; otherwise an
// error naming each. Serve it as a readiness probe.
func (s *Service) Ready() error {
	errs := []error{s.Runtime.Ready()}
	s.mu.Lock()
	for _, m := range s.models {
		errs = append(errs, m.Err())
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

// Close stops the read models' runners (waiting for them while ctx lasts),
// shuts the runtime down and closes the stores. Commands after Close fail.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("scribe: the read models' runners did not stop before the close's deadline: %w", ctx.Err()))
	}
	if err := s.Runtime.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if s.Store != nil {
		s.Store.Close()
	}
	return errors.Join(errs...)
}
