package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/snapshots"
)

// keySchema is the key store's schema for the journal schema schema:
// "<schema>_keys", the default of postgres.Open's Config.KeyStore and of the
// scribe CLI's -keys, so that the three find the same keys.
func keySchema(schema string) string { return postgres.KeyStoreSchemaFor(schema) }

// backend is the storage the runtime runs on.
type backend struct {
	Journal   journal.Journal
	Sessions  journal.Sessions
	Snapshots snapshots.Store
	// KeyStore keeps the customers' data keys (erasure): in memory with the
	// memory journal; on Postgres in the schema "<schema>_keys", beside the
	// journal's schema and never in it, on the journal's database or on
	// -keys-db's.
	KeyStore erasure.KeyStore
	// Description says what it is, for the start log line (no secrets).
	Description string
	// pool and pgCfg are set on Postgres (the read model's tables live there).
	pool  *pgxpool.Pool
	pgCfg postgres.Config
	close func()
	// partitions says which partition each account lives in. With a
	// second partition's database (-db2), databases are the two databases
	// (read models run per database, over every partition: readAll), the
	// router serves the runtime, and member is a database's name in it.
	partitions accountPartitions
	databases  []*backend
	router     *partitioned.Router
	member     string
	readAll    bool
}

// Close releases the backend's resources (background goroutines, pool).
func (b *backend) Close() {
	if b.close != nil {
		b.close()
	}
}

// openBackend is openBackendKeys with the key store on the journal's
// database.
func openBackend(ctx context.Context, databaseURL, schema string, log *slog.Logger, tp trace.TracerProvider, mp metric.MeterProvider) (*backend, error) {
	return openBackendKeys(ctx, databaseURL, "", schema, log, tp, mp)
}

// openBackendKeys opens the in-memory journal when databaseURL is empty, or
// connects to Postgres, migrates the schema explicitly and opens the
// Postgres journal, sessions, snapshot store and key store (schema
// keySchema(schema) on keysURL's database, or on databaseURL's when keysURL
// is empty); every statement on the pools is traced to tp (pgtrace.Tracer:
// db.* spans) and the append engine's counters go to mp (scribe.postgres.*;
// nil: none).
func openBackendKeys(ctx context.Context, databaseURL, keysURL, schema string, log *slog.Logger, tp trace.TracerProvider, mp metric.MeterProvider) (*backend, error) {
	if databaseURL == "" {
		if keysURL != "" {
			return nil, fmt.Errorf("-keys-db (or SCRIBE_KEYS_DATABASE_URL) is set without -db: the in-memory journal keeps its keys in memory; give -db too, or drop -keys-db")
		}
		mem := memory.New()
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
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	// Open connects, migrates the schema and the key store's and opens the
	// journal, the snapshot and projection stores and the key store; its
	// errors name the database (never the password) and what to check.
	store, err := postgres.Open(cctx, databaseURL, postgres.Config{Schema: schema, Logger: log, TracerProvider: tp, MeterProvider: mp,
		KeyStore: &postgres.KeyStoreConfig{Schema: keySchema(schema)}, KeyStoreURL: keysURL})
	if err != nil {
		if keysURL != "" {
			return nil, fmt.Errorf("open Postgres (-db or SCRIBE_DATABASE_URL, -keys-db or SCRIBE_KEYS_DATABASE_URL): %w", err)
		}
		return nil, fmt.Errorf("open Postgres (-db or SCRIBE_DATABASE_URL): %w", err)
	}
	server, err := postgres.ServerAddress(cctx, store.Pool)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("connect to Postgres at %s: %w", store.Address, err)
	}
	log.Info("connected to postgres", "configured", store.Address, "server", server)
	log.Info("postgres schema migrated", "database", store.Address, "server", server, "schema", schema, "version", postgres.LatestVersion(),
		"key_store_database", store.KeysAddress, "key_store_schema", keySchema(schema), "took_ms", time.Since(start).Milliseconds())
	desc := "postgres " + store.Address + " schema " + schema
	if keysURL != "" {
		desc += ", keys " + store.KeysAddress + " schema " + keySchema(schema)
	}
	return &backend{
		Journal:     store.Journal,
		Sessions:    store.Journal,
		Snapshots:   store.Snapshots,
		KeyStore:    store.Keys,
		Description: desc,
		pool:        store.Pool,
		pgCfg:       store.Config,
		close:       store.Close,
	}, nil
}
