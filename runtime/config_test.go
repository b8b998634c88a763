package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

// deadPort returns a local TCP port nothing listens on (it was free a moment
// ago; the kernel does not hand it out again at once).
func deadPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// newOnPool starts a runtime on a Postgres journal over pool's schema and
// returns New's error (shutting the runtime down if it started).
func newOnPool(t *testing.T, pool *pgxpool.Pool, schema string) error {
	t.Helper()
	j, err := postgres.NewJournal(pool, postgres.Config{Schema: schema})
	require.NoError(t, err)
	defer func() { _ = j.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt, err := runtime.New(ctx, runtime.Config{Journal: j, NodeID: "config-test"})
	if err == nil {
		require.NoError(t, rt.Shutdown(ctx))
	}
	return err
}

// A wrong port at New is a configuration error: permanent, naming what to
// check, and not the retryable "unavailable".
func TestNewWrongPortIsConfigurationError(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/scribe?sslmode=disable&connect_timeout=5", deadPort(t)))
	require.NoError(t, err)
	defer pool.Close()
	err = newOnPool(t, pool, "scribe")
	t.Log(err)
	require.ErrorIs(t, err, runtime.ErrConfiguration)
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.NotErrorIs(t, err, journal.ErrUnavailable, "at start an unreachable database is not an outage")
	require.False(t, runtime.IsRetryable(err), "%v", err)
	require.ErrorContains(t, err, "host and port")
}

// An unmigrated schema at New is a configuration error saying to migrate.
func TestNewUnmigratedSchemaIsConfigurationError(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Pool(t)
	err := newOnPool(t, pool, schema)
	require.ErrorIs(t, err, runtime.ErrConfiguration)
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.False(t, runtime.IsRetryable(err))
	require.ErrorContains(t, err, "Migrate")
}

func TestMustRegisterPanicsWithTheRegistrationError(t *testing.T) {
	t.Parallel()
	rt := memoryEnv().start(t)
	want := runtime.RegisterEvent[Incremented](rt, "Incremented", 1)
	require.ErrorIs(t, want, runtime.ErrRegistration)
	requirePanicsWith(t, want, func() { runtime.MustRegisterEvent[Incremented](rt, "Incremented", 1) })

	want = runtime.RegisterAggregate(rt, counterAggregate(1))
	require.ErrorIs(t, want, runtime.ErrRegistration)
	requirePanicsWith(t, want, func() { runtime.MustRegisterAggregate(rt, counterAggregate(1)) })

	bad := runtime.DCB[Increment, CounterState]{Name: ""}
	_, want = runtime.RegisterDCB(rt, bad)
	require.ErrorIs(t, want, runtime.ErrRegistration)
	requirePanicsWith(t, want, func() { runtime.MustRegisterDCB(rt, bad) })

	// Valid registrations do not panic, and the handle works.
	rt2 := memoryEnv().start(t)
	runtime.MustRegisterEvent[Renamed](rt2, "Renamed", 1)
}

func requirePanicsWith(t *testing.T, want error, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		got, ok := recover().(error)
		require.True(t, ok, "panicked with an error")
		require.True(t, errors.Is(got, runtime.ErrRegistration))
		require.Equal(t, want.Error(), got.Error(), "the same descriptive error")
	}()
	f()
	t.Fatal("did not panic")
}
