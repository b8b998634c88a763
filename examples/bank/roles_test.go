package main

import (
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
	"github.com/scribe-es/scribe/postgres"
)

// roleURL is the test database URL with sessions that run as role.
func roleURL(t *testing.T, role string) string {
	t.Helper()
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("options", "-c role="+role)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

// TestBankRunsAsServiceRole: the bank runs connected as the service role
// of postgres.RolesSQL (what the README shows): accounts with personal data
// (the key store), deposits, a DCB transfer, the accounts read model, an
// erasure and passivation snapshots all work, and the service role still
// cannot delete an event. Started as the service role on a schema that needs
// a migration, the bank fails at start naming the owner role.
func TestBankRunsAsServiceRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin, schema := pgSchema(t)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	base := "scribe_t_" + hex.EncodeToString(rnd[:])
	roles := postgres.Roles{Owner: base + "_owner", Service: base + "_service", Reader: base + "_reader", KeyStoreSchema: keySchema(schema)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// One role at a time: DROP OWNED BY of several roles sharing a
		// default privilege fails to find it the second time.
		for _, n := range []string{roles.Owner, roles.Service, roles.Reader} {
			if _, err := admin.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop what %s owns: %v", n, err)
			}
		}
		if _, err := admin.Exec(ctx, "DROP ROLE "+pgx.Identifier{roles.Owner}.Sanitize()+", "+pgx.Identifier{roles.Service}.Sanitize()+", "+pgx.Identifier{roles.Reader}.Sanitize()); err != nil {
			t.Errorf("drop roles: %v", err)
		}
	})
	sql, err := postgres.RolesSQL(schema, roles)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, sql)
	require.NoError(t, err)

	_, err = startServer(ctx, serverConfig{Addr: "127.0.0.1:0", NodeID: "svc-node", Logger: testLogger(t), DatabaseURL: roleURL(t, roles.Service), Schema: schema})
	require.Error(t, err, "the service role cannot migrate")
	require.Contains(t, err.Error(), `as role "`+roles.Service+`"`)
	require.Contains(t, err.Error(), "use the owner role")

	owner, err := pgxpool.New(ctx, roleURL(t, roles.Owner))
	require.NoError(t, err)
	t.Cleanup(owner.Close)
	require.NoError(t, postgres.Migrate(ctx, owner, postgres.Config{Schema: schema}))
	require.NoError(t, postgres.MigrateKeyStore(ctx, owner, postgres.KeyStoreConfig{Schema: roles.KeyStoreSchema}))
	_, err = admin.Exec(ctx, sql)
	require.NoError(t, err)

	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "svc-node", Logger: testLogger(t), DatabaseURL: roleURL(t, roles.Service), Schema: schema})
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"alice","customer":{"id":"c-alice","name":"Alice Service","email":"alice@example.com"}}`).Status)
	require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"bob"}`).Status)
	require.Equal(t, 200, ts.request("POST", "/accounts/alice/deposit", `{"amount":50}`).Status)
	r := ts.request("POST", "/transfers", `{"from":"alice","to":"bob","amount":20}`)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = ts.request("GET", "/accounts/alice", "")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), `"balance":30`)
	require.Contains(t, string(r.Body), "Alice Service")
	// The read model, written by its projection as the service role,
	// catches up.
	var accounts []AccountView
	for deadline := time.Now().Add(30 * time.Second); ; {
		accounts, _ = ts.listAll(t, "/accounts")
		if len(accounts) == 2 && accounts[0].Balance == 30 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, accounts, 2)
	require.EqualValues(t, 30, accounts[0].Balance)
	require.EqualValues(t, 20, accounts[1].Balance)
	require.Equal(t, 204, ts.request("DELETE", "/customers/c-alice", "").Status)
	r = ts.request("GET", "/accounts/alice", "")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.NotContains(t, string(r.Body), "Alice Service")
	ts.stop() // passivation saves snapshots, as the service role

	var snaps int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".snapshots").Scan(&snaps))
	require.Positive(t, snaps)
	svc, err := pgxpool.New(ctx, roleURL(t, roles.Service))
	require.NoError(t, err)
	t.Cleanup(svc.Close)
	_, err = svc.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema}.Sanitize()+".events")
	require.ErrorContains(t, err, "permission denied")
}
