package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

func TestProjections(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	ctx := t.Context()
	st, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	k := projection.Key{Name: "accounts", Version: 2}
	lease, err := st.Claim(ctx, k, "bank-1", time.Minute)
	require.NoError(t, err)
	// The projection applied the first five events.
	require.NoError(t, st.Commit(ctx, lease, lease.Checkpoint, recs[:5], func(context.Context, pgx.Tx) error { return nil }))

	res := f.scribe(t, "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `accounts\s+2\s+running\s+\S+\s+`+recs[4].Position.String()+`\s+5\s+10\s+bank-1\s+\S+Z\s+-`, res.stdout, "10 of the feed's 15 events are not applied yet")

	res = f.scribe(t, "projections", "rebuild", "-version", "2", "accounts")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "pass -confirm")
	res = f.scribe(t, "projections", "rebuild", "-confirm", "accounts")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "-version")
	res = f.scribe(t, "projections", "rebuild", "-version", "7", "-confirm", "accounts")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "is unknown to schema")

	res = f.scribe(t, "projections", "rebuild", "-version", "2", "-confirm", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "reset from checkpoint "+recs[4].Position.String()+" (5 events applied)")

	res = f.scribe(t, "-json", "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, "idle", rows[0]["state"])
	require.EqualValues(t, 15, rows[0]["lag"], "after a rebuild the whole feed is to be applied again")
	require.Equal(t, "0.0", rows[0]["checkpoint"])

	// The runner that held the lease is fenced.
	require.ErrorIs(t, st.Commit(ctx, lease, recs[4].Position, recs[5:6], func(context.Context, pgx.Tx) error { return nil }), projection.ErrFenced)
}
