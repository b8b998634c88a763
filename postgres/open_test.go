package postgres_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/snapshots"
)

// openURL returns the test database URL and a fresh schema, dropped at
// cleanup (the schema exists, empty: Open migrates it).
func openURL(t *testing.T) (string, string) {
	t.Helper()
	_, schema := pgtest.Pool(t)
	return pgtest.URL(t), schema
}

// withURL returns the test database URL with edit applied.
func withURL(t *testing.T, edit func(*url.URL)) string {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	edit(u)
	return u.String()
}

// deadPort returns a local TCP port nothing listens on.
func deadPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

func TestOpenMigratesTracesAndCloses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL, schema := openURL(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	store, err := postgres.Open(ctx, dbURL, postgres.Config{Schema: schema, TracerProvider: tp, MaxConns: 3})
	require.NoError(t, err)
	require.Equal(t, int32(3), store.Pool.Config().MaxConns)
	require.Equal(t, schema, store.Config.Schema)
	require.NotContains(t, store.Address, ":@", "no password")

	v, err := postgres.SchemaVersion(ctx, store.Pool, store.Config)
	require.NoError(t, err)
	require.Equal(t, postgres.LatestVersion(), v, "migrated")

	stream := journal.StreamID{Partition: journal.DefaultPartition, Tag: journal.NewTag("acct", "1")}
	_, err = store.Journal.OpenNode(ctx, "open-test", time.Minute)
	require.NoError(t, err)
	require.NoError(t, store.Snapshots.Save(ctx, snapshots.Snapshot{Stream: stream, Version: 1, SchemaVersion: 1, State: []byte(`{}`)}))
	snap, err := store.Snapshots.Load(ctx, stream, 1)
	require.NoError(t, err)
	require.Equal(t, uint64(1), snap.Version)
	_, err = store.Projections.Join(ctx, projection.Key{Name: "p", Version: 1}, projection.Layout{}, "open-test", time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, rec.Ended(), "every statement on the pool is traced")

	store.Close()
	_, err = store.Journal.TagSummary(ctx, stream)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen, "the journal is closed")
	require.Error(t, store.Pool.Ping(ctx), "the pool is closed")
	store.Close() // idempotent
}

func TestOpenWrongPortIsConfigurationError(t *testing.T) {
	t.Parallel()
	port := deadPort(t)
	dbURL := fmt.Sprintf("postgres://scribe:s3cret-pw@127.0.0.1:%d/shop?sslmode=disable&connect_timeout=5", port)
	_, err := postgres.Open(t.Context(), dbURL, postgres.Config{})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.NotErrorIs(t, err, journal.ErrUnavailable, "at start an unreachable database is not an outage")
	require.ErrorContains(t, err, fmt.Sprintf("scribe@127.0.0.1:%d/shop", port), "names where")
	require.ErrorContains(t, err, "host and port")
	require.NotContains(t, err.Error(), "s3cret-pw")
}

func TestOpenUnknownDatabaseIsConfigurationError(t *testing.T) {
	t.Parallel()
	dbURL := withURL(t, func(u *url.URL) { u.Path = "/no_such_db_scribe" })
	_, err := postgres.Open(t.Context(), dbURL, postgres.Config{})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.NotErrorIs(t, err, journal.ErrUnavailable)
	require.ErrorContains(t, err, "no such database")
	require.ErrorContains(t, err, "no_such_db_scribe")
}

func TestOpenRefusedCredentialsIsConfigurationError(t *testing.T) {
	t.Parallel()
	// The test server trusts local users; a role that does not exist is
	// refused all the same (28000).
	dbURL := withURL(t, func(u *url.URL) { u.User = url.UserPassword("no_such_role_scribe", "s3cret-pw") })
	_, err := postgres.Open(t.Context(), dbURL, postgres.Config{})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.NotErrorIs(t, err, journal.ErrUnavailable)
	require.ErrorContains(t, err, "refused the credentials")
	require.NotContains(t, err.Error(), "s3cret-pw")
}

func TestOpenVerifyOnlySchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL, schema := openURL(t)
	_, err := postgres.Open(ctx, dbURL, postgres.Config{Schema: schema, VerifyOnly: true})
	require.ErrorIs(t, err, journal.ErrConfiguration, "an unmigrated schema is refused at once")
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.ErrorContains(t, err, "migrate up")
	v, err := postgres.SchemaVersion(ctx, mustPool(t, dbURL), postgres.Config{Schema: schema})
	require.NoError(t, err)
	require.Zero(t, v, "verifying changed nothing")

	store, err := postgres.Open(ctx, dbURL, postgres.Config{Schema: schema})
	require.NoError(t, err)
	defer store.Close()
	again, err := postgres.Open(ctx, dbURL, postgres.Config{Schema: schema, VerifyOnly: true})
	require.NoError(t, err, "a migrated schema verifies")
	again.Close()

	// A newer, incompatible build migrated the schema: refused, permanently.
	_, err = store.Pool.Exec(ctx, `INSERT INTO `+quote(schema)+`.schema_migrations (version, name, compatible_from) VALUES ($1, 'future.sql', $1)`, postgres.LatestVersion()+1)
	require.NoError(t, err)
	for _, verify := range []bool{true, false} {
		_, err = postgres.Open(ctx, dbURL, postgres.Config{Schema: schema, VerifyOnly: verify})
		require.ErrorIs(t, err, journal.ErrConfiguration)
		require.ErrorContains(t, err, "upgrade the program")
	}
}

func TestMigrateConnectErrorNamesTheDatabase(t *testing.T) {
	t.Parallel()
	port := deadPort(t)
	pool := mustPool(t, fmt.Sprintf("postgres://scribe:s3cret-pw@127.0.0.1:%d/shop?sslmode=disable&connect_timeout=5", port))
	err := postgres.Migrate(t.Context(), pool, postgres.Config{Schema: "shop"})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.ErrorContains(t, err, "migrate schema shop")
	require.ErrorContains(t, err, fmt.Sprintf("scribe@127.0.0.1:%d/shop", port))
	require.ErrorContains(t, err, "host and port")
	require.NotContains(t, err.Error(), "s3cret-pw")
}

func TestOpenInvalidOptions(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(context.Background(), "postgres://u:pw@[bad", postgres.Config{})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.NotContains(t, err.Error(), "pw@")
	_, err = postgres.Open(context.Background(), "postgres://u@127.0.0.1/db", postgres.Config{MaxConns: -1})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	_, err = postgres.Open(context.Background(), "postgres://u@127.0.0.1/db", postgres.Config{Schema: string(make([]byte, 64))})
	require.ErrorIs(t, err, journal.ErrConfiguration)
}

// mustPool opens a pool on dbURL (no connection yet), closed at cleanup.
func mustPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// A projection runner on a schema that was never migrated returns a
// permanent error at once instead of retrying until its context ends.
func TestRunnerOnUnmigratedSchemaFailsAtOnce(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Pool(t)
	cfg := postgres.Config{Schema: schema}
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	defer func() { _ = j.Close() }()
	store, err := postgres.NewProjectionStore(pool, cfg)
	require.NoError(t, err)
	r, err := projection.NewRunner(j, store, projection.Projection[pgx.Tx]{
		Name: "unmigrated", Version: 1,
		Handle: func(context.Context, pgx.Tx, projection.Batch) error { return nil },
	}, projection.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = r.Run(ctx)
	require.NoError(t, ctx.Err(), "Run returned before its context ended")
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.ErrorContains(t, err, "unmigrated@1")
	require.ErrorContains(t, err, "Migrate")
}
