package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// roleFixture is a schema and its key store set up by `scribe roles sql`
// with roles unique to the test (dropped, with what they own, when it
// ends), migrated as the owner and filled with the bank's events.
type roleFixture struct {
	*fixture
	roles postgres.Roles
	keys  string
	recs  []journal.Record
}

// asRole is the test database URL with sessions that run as role.
func asRole(t *testing.T, raw, role string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	q := u.Query()
	q.Set("options", "-c role="+role)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

func setupRoles(t *testing.T) *roleFixture {
	t.Helper()
	ctx := t.Context()
	admin, err := pgxpool.New(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	base := "scribe_t_" + hex.EncodeToString(rnd[:])
	r := postgres.Roles{Owner: base + "_owner", Service: base + "_service", Reader: base + "_reader"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		names := pgx.Identifier{r.Owner}.Sanitize() + ", " + pgx.Identifier{r.Service}.Sanitize() + ", " + pgx.Identifier{r.Reader}.Sanitize()
		var exists bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", r.Owner).Scan(&exists); err != nil || !exists {
			return
		}
		// One role at a time: DROP OWNED BY of several roles sharing a
		// default privilege fails to find it the second time.
		for _, n := range []string{r.Owner, r.Service, r.Reader} {
			if _, err := admin.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop what %s owns: %v", n, err)
			}
		}
		if _, err := admin.Exec(ctx, "DROP ROLE "+names); err != nil {
			t.Errorf("drop roles %s: %v", names, err)
		}
	})
	f := setup(t, false)
	keys := postgres.KeyStoreSchemaFor(f.schema)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{keys}.Sanitize()+" CASCADE")
	})
	rolesSQL := func() {
		res := f.scribe(t, "roles", "sql", "-owner", r.Owner, "-service", r.Service, "-reader", r.Reader)
		require.Equal(t, exitOK, res.code, res.stderr)
		_, err := admin.Exec(ctx, res.stdout)
		require.NoError(t, err)
	}
	rolesSQL()
	owner := asRole(t, f.url, r.Owner)
	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "keys"}} {
		var out, errOut bytes.Buffer
		code := runWith(ctx, append([]string{"-db", owner, "-schema", f.schema}, args...), &out, &errOut, func(string) string { return "" })
		require.Equal(t, exitOK, code, "%v as the owner: %s", args, errOut.String())
	}
	rolesSQL()
	rf := &roleFixture{fixture: f, roles: r, keys: keys}
	rf.recs = f.fillBank(t)
	return rf
}

// as runs the command line as role against the fixture's schema.
func (f *roleFixture) as(t *testing.T, role string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(t.Context(), append([]string{"-db", asRole(t, f.url, role), "-schema", f.schema}, args...), &out, &errOut, func(string) string { return "" })
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestRolesSQLCommand: `scribe roles sql` prints the roles' SQL for -schema
// without a database, and refuses names it cannot use.
func TestRolesSQLCommand(t *testing.T) {
	t.Parallel()
	run := func(args ...string) result {
		var out, errOut bytes.Buffer
		code := runWith(t.Context(), args, &out, &errOut, func(string) string { return "" })
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
	res := run("-schema", "shop", "roles", "sql")
	require.Equal(t, exitOK, res.code, res.stderr)
	for _, want := range []string{`CREATE ROLE "shop_owner" NOLOGIN`, `CREATE ROLE "shop_service" NOLOGIN`, `CREATE ROLE "shop_reader" NOLOGIN`,
		`CREATE SCHEMA IF NOT EXISTS "shop" AUTHORIZATION "shop_owner"`, `"shop_keys"`, `GRANT INSERT ON "shop"."events" TO "shop_service"`} {
		require.Contains(t, res.stdout, want)
	}
	require.NotContains(t, res.stdout, `UPDATE ON "shop"."events"`)
	res = run("-schema", "shop", "roles", "sql", "-service", "bad name")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, `"bad name" is not a plain identifier`)
	require.Empty(t, res.stdout)
}

// TestRolesReadVerbsAsReader: every read verb works connected as the
// read-only role; a verb that needs more is refused by the database and
// says which role it needs; migrating as the service role names the owner.
func TestRolesReadVerbsAsReader(t *testing.T) {
	t.Parallel()
	f := setupRoles(t)
	ctx := t.Context()
	ps, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	k := projection.Key{Name: "balances", Version: 1}
	lease, err := claimOne(ctx, ps, k, "node-1")
	require.NoError(t, err)
	require.NoError(t, commitOne(ctx, ps, lease, lease.Checkpoint, f.recs[:3], func(context.Context, pgx.Tx) error { return nil }))
	last := f.recs[len(f.recs)-1]
	for _, args := range [][]string{
		{"migrate", "status"},
		{"streams", "list"},
		{"stream", "show", "account:a"},
		{"events", "-type", "MoneyDeposited"},
		{"event", last.ID.String()},
		{"correlation", last.Metadata.CorrelationID},
		{"types"},
		{"verify"},
		{"leases"},
		{"snapshots", "list"},
		{"tags", "account"},
		{"projections", "status"},
		{"projections", "dead-letters", "list", "-name", "balances", "-version", "1"},
		{"subjects"},
	} {
		res := f.as(t, f.roles.Reader, args...)
		require.Equal(t, exitOK, res.code, "%v as the reader: %s", args, res.stderr)
		require.NotContains(t, res.stderr, "permission denied", args)
		require.NotEmpty(t, res.stdout, args)
	}

	res := f.as(t, f.roles.Reader, "projections", "rebuild", "-version", "1", "-confirm", "balances")
	require.Equal(t, exitFailure, res.code, res.stderr)
	require.Contains(t, res.stderr, "permission denied")
	require.Contains(t, res.stderr, "`scribe projections rebuild` needs the service role")
	st, err := ps.Status(ctx, k)
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Events, "the refused rebuild changed nothing")

	res = f.as(t, f.roles.Service, "archive", "-policy", "account=keep:1,nosnapshot", "-confirm")
	require.Equal(t, exitFailure, res.code, res.stderr)
	require.Contains(t, res.stderr, "permission denied")
	require.Contains(t, res.stderr, "`scribe archive` needs the owner role")

	for _, role := range []string{f.roles.Service, f.roles.Reader} {
		res = f.as(t, role, "migrate", "up")
		require.Equal(t, exitOK, res.code, "an up-to-date schema: nothing to do, as %s: %s", role, res.stderr)
	}
	_, err = f.pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{f.keys}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	res = f.as(t, f.roles.Service, "migrate", "keys")
	require.Equal(t, exitFailure, res.code, res.stderr)
	require.Contains(t, res.stderr, `as role "`+f.roles.Service+`"`)
	require.Contains(t, res.stderr, "use the owner role")
}

// TestConsoleAllowedHosts: -allowed-host takes names repeated or separated
// by commas, blanks dropped.
func TestConsoleAllowedHosts(t *testing.T) {
	t.Parallel()
	var h hostList
	require.NoError(t, h.Set("a.example, b.example:8443,"))
	require.NoError(t, h.Set("c.example"))
	require.Equal(t, hostList{"a.example", "b.example:8443", "c.example"}, h)
	require.Equal(t, "a.example,b.example:8443,c.example", h.String())
}
