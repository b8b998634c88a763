package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvDatabaseURL names the environment variable holding the test database URL.
const EnvDatabaseURL = "SCRIBE_TEST_DATABASE_URL"

// EnvRequire names the environment variable that, when "1", turns a missing
// database into a test failure instead of a skip.
const EnvRequire = "SCRIBE_REQUIRE_POSTGRES"

// URL returns the test database URL. Without SCRIBE_TEST_DATABASE_URL it skips
// the test loudly, or fails it when SCRIBE_REQUIRE_POSTGRES=1.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvDatabaseURL)
	if url != "" {
		return url
	}
	msg := "!!! " + EnvDatabaseURL + " is not set: this Postgres test did not run. " +
		"Run `make test` (it finds or starts a PostgreSQL) or set " + EnvDatabaseURL +
		"=postgres://user@host:port/db?sslmode=disable"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(msg + " (" + EnvRequire + "=1 requires Postgres)")
	}
	t.Skip(msg)
	return ""
}

// Pool returns a pool connected to the test database and the name of a fresh,
// unique schema that Pool has already created (empty). The pool's connections
// keep the default search_path: callers address the schema explicitly (for
// example through postgres.Config.Schema). When the test ends, the schema is
// dropped with CASCADE and the pool is closed.
func Pool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return PoolWith(t, nil)
}

// PoolWith is Pool with edit applied to the pool's configuration (for example
// a larger MaxConns) before it connects. edit may be nil.
func PoolWith(t testing.TB, edit func(*pgxpool.Config)) (*pgxpool.Pool, string) {
	t.Helper()
	return PoolAt(t, URL(t), edit)
}

// PoolAt is PoolWith on the database at url (for example a throwaway server)
// instead of the one SCRIBE_TEST_DATABASE_URL names.
func PoolAt(t testing.TB, url string, edit func(*pgxpool.Config)) (*pgxpool.Pool, string) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvDatabaseURL, err)
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	if edit != nil {
		edit(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvDatabaseURL, err)
	}
	schema := SchemaName(t)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
	return pool, schema
}

// SchemaName returns a unique schema name derived from the test's name, valid
// as an unquoted Postgres identifier (lowercase, at most 63 bytes).
func SchemaName(t testing.TB) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}
