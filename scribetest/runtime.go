package scribetest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// EnvDatabaseURL names the environment variable holding the URL of the
// database throwaway schemas are made in.
const EnvDatabaseURL = pgtest.EnvDatabaseURL

// EnvRequire names the environment variable that, when "1", turns a missing
// database into a test failure instead of a skip ($CI=true does too).
const EnvRequire = pgtest.EnvRequire

// Memory returns a single-node runtime on an in-memory journal, snapshot
// store and key store (so events with personal data and Erase work), with
// NodeID "test". adjust may change the configuration before the runtime
// starts. The runtime is shut down when the test ends; a failed shutdown
// fails the test.
func Memory(t testing.TB, adjust ...func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	cfg := runtime.Config{
		Journal:   memory.New(),
		Snapshots: snapshots.NewMemory(),
		KeyStore:  erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{}),
		NodeID:    "test",
	}
	return start(t, cfg, adjust)
}

// PostgresRuntime returns a single-node runtime on a throwaway schema
// (Postgres), with its snapshot and key stores; see Memory for adjust and the
// shutdown.
func PostgresRuntime(t testing.TB, adjust ...func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	s := Postgres(t)
	cfg := runtime.Config{Journal: s.Journal, Snapshots: s.Snapshots, KeyStore: s.Keys, NodeID: "test"}
	return start(t, cfg, adjust)
}

func start(t testing.TB, cfg runtime.Config, adjust []func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	for _, a := range adjust {
		a(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := runtime.New(ctx, cfg)
	if err != nil {
		t.Fatalf("scribetest: starting the runtime: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("scribetest: shutting the runtime down: %v", err)
		}
	})
	return rt
}

// DatabaseURL returns the database URL in $SCRIBE_TEST_DATABASE_URL.
// Without it the test is skipped with a message naming the variable, or
// fails when $CI is "true" or $SCRIBE_REQUIRE_POSTGRES is "1".
func DatabaseURL(t testing.TB) string {
	t.Helper()
	if url := os.Getenv(EnvDatabaseURL); url != "" {
		return url
	}
	msg := "scribetest: " + EnvDatabaseURL + " is not set, so this Postgres test did not run; set it to a database tests may create schemas in, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	if os.Getenv("CI") == "true" || os.Getenv(EnvRequire) == "1" {
		t.Fatal(msg + " (required here: $CI=true or $" + EnvRequire + "=1)")
	}
	t.Skip(msg)
	return ""
}

// Postgres opens a fresh schema named after the test on the database
// DatabaseURL names, migrated by postgres.Open with its erasure key store in
// the schema beside it (postgres.KeyStoreSchemaFor). When the test ends the
// store is closed and both schemas are dropped.
func Postgres(t testing.TB) *postgres.Store {
	t.Helper()
	url := DatabaseURL(t)
	schema := schemaName(t)
	keys := postgres.KeyStoreSchemaFor(schema)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { dropSchemas(t, url, schema, keys) }) // also after a failed Open
	s, err := postgres.Open(ctx, url, postgres.Config{Schema: schema, KeyStore: &postgres.KeyStoreConfig{}})
	if err != nil {
		t.Fatalf("scribetest: opening a throwaway schema %s: %v", schema, err)
	}
	t.Cleanup(s.Close) // runs before the drop
	return s
}

// Schema returns the database URL (DatabaseURL) and a fresh schema name for
// a service that opens its store itself (postgres.Open with Config.Schema):
// nothing is created, and when the test ends the schema and its key store
// schema (postgres.KeyStoreSchemaFor) are dropped if they exist.
func Schema(t testing.TB) (url, schema string) {
	t.Helper()
	url = DatabaseURL(t)
	schema = schemaName(t)
	t.Cleanup(func() { dropSchemas(t, url, schema, postgres.KeyStoreSchemaFor(schema)) })
	return url, schema
}

func dropSchemas(t testing.TB, url string, schemas ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Errorf("scribetest: connecting to drop schemas %v: %v", schemas, err)
		return
	}
	defer pool.Close()
	for _, s := range schemas {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("scribetest: dropping schema %s: %v", s, err)
		}
	}
}

// schemaName is a unique schema name derived from the test's name, short
// enough for the key store schema's suffix.
func schemaName(t testing.TB) string { return pgtest.SchemaName(t) }
