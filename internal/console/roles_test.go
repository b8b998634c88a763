package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/console"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// readerPool sets up the roles of postgres.RolesSQL for f's schema (names
// unique to the test; dropped with what they own when it ends) and returns
// a pool whose sessions run as the read-only role.
func readerPool(t *testing.T, f *fixture) *pgxpool.Pool {
	t.Helper()
	ctx := t.Context()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	base := "scribe_t_" + hex.EncodeToString(rnd[:])
	r := postgres.Roles{Owner: base + "_owner", Service: base + "_service", Reader: base + "_reader", KeyStoreSchema: postgres.KeyStoreSchemaFor(f.schema)}
	names := pgx.Identifier{r.Owner}.Sanitize() + ", " + pgx.Identifier{r.Service}.Sanitize() + ", " + pgx.Identifier{r.Reader}.Sanitize()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// One role at a time: DROP OWNED BY of several roles sharing a
		// default privilege fails to find it the second time.
		for _, n := range []string{r.Owner, r.Service, r.Reader} {
			if _, err := f.pool.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop what %s owns: %v", n, err)
			}
		}
		if _, err := f.pool.Exec(ctx, "DROP ROLE "+names); err != nil {
			t.Errorf("drop roles %s: %v", names, err)
		}
	})
	sql, err := postgres.RolesSQL(f.schema, r)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, sql)
	require.NoError(t, err)
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("options", "-c role="+r.Reader)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestPagesAsReader: every page, the live stream and a verification run
// work on a console connected as the read-only role of postgres.RolesSQL.
func TestPagesAsReader(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	pool := readerPool(t, f)
	cfg := postgres.Config{Schema: f.schema}
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	ps, err := postgres.NewProjectionStore(pool, cfg)
	require.NoError(t, err)
	a, err := pgadmin.New(pool, cfg)
	require.NoError(t, err)
	c, err := console.New(console.Config{Journal: j, Admin: a, Projections: ps, Schema: f.schema})
	require.NoError(t, err)
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Follow(fctx) }()
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	reader := &fixture{srv: srv}
	for _, p := range []struct{ path, want string }{
		{"/", "Events per second"},
		{"/streams?prefix=account:", "account:mallory"},
		{"/streams/account:alice", "MoneyDeposited"},
		{"/events/" + f.recs[1].ID.String(), "account:alice v2"},
		{"/correlations/req-1", "AccountOpened"},
		{"/types", "ClockTicked"},
		{"/leases", "0 leases held"},
		{"/projections", "no projection has run"},
		{"/verify", "Verify chains"},
		{"/live/stats", "{"},
	} {
		code, body := reader.get(t, p.path)
		require.Equal(t, http.StatusOK, code, "%s: %s", p.path, body)
		require.Contains(t, body, p.want, p.path)
		require.NotContains(t, body, "permission denied", p.path)
	}
	var last struct {
		Done, Total, Broken int
		Finished            bool
	}
	sse(t, reader, "/verify/run", 30*time.Second, func(kind, data string) bool {
		require.Equal(t, "progress", kind, data)
		require.NotContains(t, data, "permission denied")
		require.NoError(t, json.Unmarshal([]byte(data), &last))
		return last.Finished
	})
	require.Equal(t, last.Total, last.Done)
	require.Positive(t, last.Total)
	require.Zero(t, last.Broken)
	sse(t, reader, "/live", 20*time.Second, func(kind, _ string) bool { return kind == "tick" })
}
