package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/scribe-es/scribe/journal"
)

// TestSetupWrongPortFailsFast: the bank's Postgres setup (postgres.Open)
// reports a database nobody listens on as a configuration error naming
// where, without the password, not as a retryable outage.
func TestSetupWrongPortFailsFast(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	url := fmt.Sprintf("postgres://bank:hunter2-pw@127.0.0.1:%d/bank?sslmode=disable&connect_timeout=5", port)
	_, err = openBackend(context.Background(), url, "scribe", slog.New(slog.DiscardHandler), tracenoop.NewTracerProvider(), nil)
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.NotErrorIs(t, err, journal.ErrUnavailable)
	require.ErrorContains(t, err, fmt.Sprintf("bank@127.0.0.1:%d/bank", port))
	require.ErrorContains(t, err, "-db or SCRIBE_DATABASE_URL")
	require.NotContains(t, err.Error(), "hunter2-pw")
}
