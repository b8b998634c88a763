package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/snapshots"
)

// keySchema is the key store's schema for the journal schema schema.
func keySchema(schema string) string { return schema + "_keys" }

// backend is the storage the runtime runs on.
type backend struct {
	Journal   journal.Journal
	Sessions  journal.Sessions
	Snapshots snapshots.Store
	// KeyStore keeps the customers' data keys (erasure): in memory with the
	// memory journal; on Postgres in the schema "<schema>_keys", beside the
	// journal's schema and never in it.
	KeyStore erasure.KeyStore
	// Description says what it is, for the start log line (no secrets).
	Description string
	// pool and pgCfg are set on Postgres (the read model's tables live there).
	pool  *pgxpool.Pool
	pgCfg postgres.Config
	close func()
}

// Close releases the backend's resources (background goroutines, pool).
func (b *backend) Close() {
	if b.close != nil {
		b.close()
	}
}

// openBackend opens the in-memory journal when databaseURL is empty, or
// connects to Postgres, migrates the schema explicitly and opens the
// Postgres journal, sessions and snapshot store; every statement on the pool
// is traced to tp (postgres.Tracer: db.* spans).
func openBackend(ctx context.Context, databaseURL, schema string, log *slog.Logger, tp trace.TracerProvider) (*backend, error) {
	if databaseURL == "" {
		mem := journal.NewMemory()
		log.Info("no -db and no SCRIBE_DATABASE_URL: using the in-memory journal; every account is lost when the process exits (pass -db postgres://… for durable storage)")
		return &backend{
			Journal:     mem,
			Sessions:    mem,
			Snapshots:   snapshots.NewMemory(),
			KeyStore:    erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{}),
			Description: "memory",
			close:       func() { _ = mem.Close() },
		}, nil
	}
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// pgconn's parse errors redact the password.
		return nil, fmt.Errorf("the database URL (-db or SCRIBE_DATABASE_URL) is not valid: %v; give a URL such as postgres://user@localhost:5432/bank?sslmode=disable", err)
	}
	if poolCfg.MaxConns < 16 {
		poolCfg.MaxConns = 16
	}
	poolCfg.ConnConfig.Tracer = postgres.NewTracer(tp)
	where := configuredHosts(poolCfg) + "/" + poolCfg.ConnConfig.Database
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres at %s: %w", where, err)
	}
	if err := pool.Ping(cctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to Postgres at %s: %w; check that the server runs and the URL is right", where, err)
	}
	server, err := postgres.ServerAddress(cctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to Postgres at %s: %w", where, err)
	}
	log.Info("connected to postgres", "configured", where, "server", server)
	pgCfg := postgres.Config{Schema: schema, Logger: log}
	start := time.Now()
	if err := postgres.Migrate(cctx, pool, pgCfg); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate schema %q at %s: %w", schema, where, err)
	}
	log.Info("postgres schema migrated", "database", where, "server", server, "schema", schema, "version", postgres.LatestVersion(), "took_ms", time.Since(start).Milliseconds())
	j, err := postgres.NewJournal(pool, pgCfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	snaps, err := postgres.NewSnapshotStore(pool, pgCfg)
	if err != nil {
		_ = j.Close()
		pool.Close()
		return nil, err
	}
	keyCfg := postgres.KeyStoreConfig{Schema: keySchema(schema)}
	if err := postgres.MigrateKeyStore(cctx, pool, keyCfg); err != nil {
		_ = j.Close()
		pool.Close()
		return nil, fmt.Errorf("migrate the key store schema %q at %s: %w", keyCfg.Schema, where, err)
	}
	keys, err := postgres.NewKeyStore(pool, keyCfg)
	if err != nil {
		_ = j.Close()
		pool.Close()
		return nil, err
	}
	return &backend{
		Journal:     j,
		Sessions:    j,
		Snapshots:   snaps,
		KeyStore:    keys,
		Description: "postgres " + where + " schema " + schema,
		pool:        pool,
		pgCfg:       pgCfg,
		close: func() {
			_ = j.Close()
			pool.Close()
		},
	}, nil
}

// configuredHosts renders the hosts of a (possibly multi-host) database URL:
// "h1:p1,h2:p2". The host actually connected is logged beside it.
func configuredHosts(c *pgxpool.Config) string {
	hosts := []string{net.JoinHostPort(c.ConnConfig.Host, strconv.Itoa(int(c.ConnConfig.Port)))}
	for _, f := range c.ConnConfig.Fallbacks {
		h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port)))
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return strings.Join(hosts, ",")
}
