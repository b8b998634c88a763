package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/erasure/erasuretest"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/journaltest"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection/projectiontest"
	"github.com/scribe-es/scribe/snapshots/snapshotstest"
)

// roleSet is an owner, a service and a reader role unique to one test
// (roles are cluster-wide), each schema of which RolesSQL set up; the roles,
// and everything they own, are dropped when the test ends.
type roleSet struct {
	url   string
	admin *pgxpool.Pool
	roles postgres.Roles
	// applying serializes the runs of RolesSQL of the subtests sharing the
	// set: two CREATE ROLE of one name at once collide in pg_authid
	// (SQLSTATE 23505) however the script checks first, and concurrent
	// GRANTs on one role can fail with "tuple concurrently updated".
	applying sync.Mutex
}

// apply runs RolesSQL's output sql as the administrator, one run at a time.
func (rs *roleSet) apply(ctx context.Context, sql string) error {
	rs.applying.Lock()
	defer rs.applying.Unlock()
	_, err := rs.admin.Exec(ctx, sql)
	return err
}

func newRoleSet(t *testing.T) *roleSet {
	t.Helper()
	url := pgtest.URL(t)
	admin, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	base := "scribe_t_" + hex.EncodeToString(rnd[:])
	rs := &roleSet{url: url, admin: admin, roles: postgres.Roles{Owner: base + "_owner", Service: base + "_service", Reader: base + "_reader"}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		names := pgx.Identifier{rs.roles.Owner}.Sanitize() + ", " + pgx.Identifier{rs.roles.Service}.Sanitize() + ", " + pgx.Identifier{rs.roles.Reader}.Sanitize()
		var exists bool
		require.NoError(t, admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", rs.roles.Owner).Scan(&exists))
		if !exists {
			return
		}
		// One role at a time: DROP OWNED BY of several roles sharing a
		// default privilege fails to find it the second time.
		for _, n := range []string{rs.roles.Owner, rs.roles.Service, rs.roles.Reader} {
			if _, err := admin.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop what %s owns: %v", n, err)
			}
		}
		if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+names); err != nil {
			t.Errorf("drop roles %s: %v", names, err)
		}
	})
	return rs
}

// schema sets up a fresh journal schema and its key store for the roles: it
// runs RolesSQL as the administrator, migrates both schemas as the owner
// and runs RolesSQL again (as after every migration). migrate false stops
// after the first RolesSQL: the schemas exist, owned by the owner, empty.
func (rs *roleSet) schema(t *testing.T, migrate bool) (postgres.Config, postgres.KeyStoreConfig) {
	t.Helper()
	ctx := context.Background()
	cfg := postgres.Config{Schema: pgtest.SchemaName(t)}
	keys := postgres.KeyStoreConfig{Schema: postgres.KeyStoreSchemaFor(cfg.Schema)}
	r := rs.roles
	r.KeyStoreSchema = keys.Schema
	sql, err := postgres.RolesSQL(cfg.Schema, r)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range []string{cfg.Schema, keys.Schema} {
			if _, err := rs.admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", s, err)
			}
		}
	})
	require.NoError(t, rs.apply(ctx, sql))
	if !migrate {
		return cfg, keys
	}
	owner := rs.pool(t, r.Owner)
	require.NoError(t, postgres.Migrate(ctx, owner, cfg))
	require.NoError(t, postgres.MigrateKeyStore(ctx, owner, keys))
	require.NoError(t, rs.apply(ctx, sql), "RolesSQL runs again after a migration")
	return cfg, keys
}

// pool returns a pool whose connections run as role: SET ROLE at connection
// start, so every privilege check is the role's.
func (rs *roleSet) pool(t *testing.T, role string) *pgxpool.Pool {
	t.Helper()
	return rolePool(t, rs.url, role)
}

// login creates a LOGIN role granted group (its name unique, dropped when
// the test ends) and returns a pool connected as it, as a deployed service
// connects.
func (rs *roleSet) login(t *testing.T, group string) *pgxpool.Pool {
	t.Helper()
	name := group + "_login"
	id := pgx.Identifier{name}.Sanitize()
	_, err := rs.admin.Exec(context.Background(), "CREATE ROLE "+id+" LOGIN IN ROLE "+pgx.Identifier{group}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := rs.admin.Exec(context.Background(), "DROP OWNED BY "+id+" CASCADE; DROP ROLE "+id); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	cfg, err := pgxpool.ParseConfig(rs.url)
	require.NoError(t, err)
	cfg.ConnConfig.User = name
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// rolePool is a pool on url whose sessions run as role.
func rolePool(t *testing.T, url, role string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["options"] = "-c role=" + role
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var user string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_user").Scan(&user))
	require.Equal(t, role, user)
	return pool
}

// roleURL is url with the connection option that makes its sessions run
// as role.
func roleURL(t *testing.T, raw, role string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	q := u.Query()
	q.Set("options", "-c role="+role)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

// requirePrivilegeRefused asserts that err is the database refusing a privilege
// (SQLSTATE 42501).
func requirePrivilegeRefused(t *testing.T, err error, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: want a refusal, got %v", what, err)
	require.Equal(t, "42501", pgErr.Code, "%s: %v", what, err)
}

// TestRolesCoverEveryTable: RolesSQL decides the service role's writes for
// every table the migrations create (a new table must be added to its
// lists), and the grants are what the roles promise: both read every
// journal table, the service writes no event, tag row or archived event,
// the reader writes nothing and never sees a data key.
func TestRolesCoverEveryTable(t *testing.T) {
	t.Parallel()
	rs := newRoleSet(t)
	cfg, keys := rs.schema(t, true)
	ctx := t.Context()
	tables := func(schema string) []string {
		rows, err := rs.admin.Query(ctx, `SELECT relname::text FROM pg_class WHERE relnamespace = to_regnamespace($1) AND relkind IN ('r', 'p') ORDER BY 1`, pgx.Identifier{schema}.Sanitize())
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NotEmpty(t, out, schema)
		return out
	}
	journalTables, keyTables := postgres.RoleTablesForTest()
	require.Equal(t, journalTables, tables(cfg.Schema), "every journal table needs its service grants decided in postgres/roles.go")
	require.Equal(t, keyTables, tables(keys.Schema), "every key store table needs its service grants decided in postgres/roles.go")

	has := func(role, table, priv string) bool {
		var ok bool
		require.NoError(t, rs.admin.QueryRow(ctx, "SELECT has_table_privilege($1, $2, $3)", role, table, priv).Scan(&ok))
		return ok
	}
	q := func(schema, table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	for _, tb := range journalTables {
		require.True(t, has(rs.roles.Service, q(cfg.Schema, tb), "SELECT"), tb)
		require.True(t, has(rs.roles.Reader, q(cfg.Schema, tb), "SELECT"), tb)
		for _, p := range []string{"INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"} {
			require.False(t, has(rs.roles.Reader, q(cfg.Schema, tb), p), "reader %s %s", p, tb)
		}
		require.False(t, has(rs.roles.Service, q(cfg.Schema, tb), "TRUNCATE"), tb)
	}
	for _, tb := range []string{"events", "event_tags", "events_archive", "event_tags_archive", "schema_migrations", "partition_fences"} {
		for _, p := range []string{"UPDATE", "DELETE", "TRUNCATE"} {
			require.False(t, has(rs.roles.Service, q(cfg.Schema, tb), p), "service %s %s", p, tb)
		}
	}
	for _, tb := range keyTables {
		for _, p := range []string{"INSERT", "UPDATE", "DELETE", "TRUNCATE"} {
			require.False(t, has(rs.roles.Reader, q(keys.Schema, tb), p), "reader %s %s", p, tb)
		}
		require.False(t, has(rs.roles.Service, q(keys.Schema, tb), "TRUNCATE"), tb)
	}
	var keyCol, subjectCol bool
	require.NoError(t, rs.admin.QueryRow(ctx, "SELECT has_column_privilege($1, $2, 'data_key', 'SELECT'), has_column_privilege($1, $2, 'subject', 'SELECT')",
		rs.roles.Reader, q(keys.Schema, "subjects")).Scan(&keyCol, &subjectCol))
	require.False(t, keyCol, "the reader must not read data keys")
	require.True(t, subjectCol)

	// Idempotent: a third run changes nothing and fails on nothing.
	r := rs.roles
	r.KeyStoreSchema = keys.Schema
	sql, err := postgres.RolesSQL(cfg.Schema, r)
	require.NoError(t, err)
	require.NoError(t, rs.apply(ctx, sql))
	require.False(t, has(rs.roles.Service, q(cfg.Schema, "events"), "UPDATE"))
}

// TestRolesSQLRefusesBadNames: names RolesSQL cannot use safely, or that
// would merge two roles, are refused; the defaults derive from the schema.
func TestRolesSQLRefusesBadNames(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]postgres.Roles{
		"quote in a role":      {Owner: `o"; DROP TABLE x; --`},
		"space in a role":      {Service: "svc role"},
		"same owner, service":  {Owner: "a", Service: "a"},
		"keys in the journal":  {KeyStoreSchema: "app"},
		"too long":             {Reader: strings.Repeat("r", 64)},
		"starts with a digit":  {Reader: "1reader"},
		"quote in key schema":  {KeyStoreSchema: "k'eys"},
		"same service, reader": {Service: "b", Reader: "b"},
	} {
		_, err := postgres.RolesSQL("app", r)
		require.Error(t, err, name)
	}
	_, err := postgres.RolesSQL("my-app", postgres.Roles{})
	require.Error(t, err, "a schema that is not a plain identifier")
	sql, err := postgres.RolesSQL("app", postgres.Roles{})
	require.NoError(t, err)
	for _, want := range []string{`CREATE ROLE "app_owner" NOLOGIN`, `CREATE ROLE "app_service" NOLOGIN`, `CREATE ROLE "app_reader" NOLOGIN`, `"app_keys"`} {
		require.Contains(t, sql, want)
	}
	require.Equal(t, postgres.Roles{Owner: "app_owner", Service: "app_service", Reader: "app_reader", KeyStoreSchema: "app_keys"}, postgres.DefaultRoles("app"))
}

// TestRolesServiceCannotRewriteHistory: connected as the service role, an
// UPDATE, DELETE or TRUNCATE of an event, a tag row or an archived event is
// refused by the database, and so is becoming the owner; the owner's
// archive still moves rows. The reader can write nothing and cannot read a
// data key.
func TestRolesServiceCannotRewriteHistory(t *testing.T) {
	t.Parallel()
	rs := newRoleSet(t)
	cfg, keys := rs.schema(t, true)
	ctx := t.Context()
	svc := rs.pool(t, rs.roles.Service)
	j, err := postgres.NewJournal(svc, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	recs := appendN(t, j, "acct:1", 5)
	ks, err := postgres.NewKeyStore(svc, keys)
	require.NoError(t, err)
	_, err = ks.DataKey(ctx, "subject-1")
	require.NoError(t, err)

	// The owner archives (the service could not: it would DELETE events).
	owner := rs.pool(t, rs.roles.Owner)
	oj, err := postgres.NewJournal(owner, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = oj.Close() })
	_, err = admin(t, svc, cfg).Archive(ctx, keep("acct", 2, true), pgadmin.ArchiveOptions{})
	requirePrivilegeRefused(t, err, "archive as the service role")
	_, err = admin(t, owner, cfg).Archive(ctx, keep("acct", 2, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	var archived, archivedTags int
	s := pgx.Identifier{cfg.Schema}.Sanitize()
	require.NoError(t, svc.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+s+".events_archive), (SELECT count(*) FROM "+s+".event_tags_archive)").Scan(&archived, &archivedTags))
	require.Equal(t, 3, archived, "the owner's archive moved the rows")
	require.Equal(t, 3, archivedTags)

	for _, stmt := range []string{
		"UPDATE " + s + ".events SET data = data WHERE id = $1",
		"DELETE FROM " + s + ".events WHERE id = $1",
		"UPDATE " + s + ".event_tags SET version = version WHERE commit_xid = (SELECT commit_xid FROM " + s + ".events WHERE id = $1)",
		"DELETE FROM " + s + ".event_tags WHERE commit_xid = (SELECT commit_xid FROM " + s + ".events WHERE id = $1)",
		"UPDATE " + s + ".events_archive SET data = data WHERE id <> $1",
		"DELETE FROM " + s + ".events_archive WHERE id <> $1",
		"UPDATE " + s + ".event_tags_archive SET version = version WHERE $1::uuid IS NOT NULL",
		"DELETE FROM " + s + ".event_tags_archive WHERE $1::uuid IS NOT NULL",
	} {
		_, err := svc.Exec(ctx, stmt, recs[4].ID)
		requirePrivilegeRefused(t, err, stmt)
	}
	for _, tb := range []string{"events", "event_tags", "events_archive", "event_tags_archive"} {
		_, err := svc.Exec(ctx, "TRUNCATE "+s+"."+tb)
		requirePrivilegeRefused(t, err, "TRUNCATE "+tb)
		_, err = svc.Exec(ctx, "ALTER TABLE "+s+"."+tb+" DISABLE TRIGGER ALL")
		require.Error(t, err, "ALTER TABLE %s as the service role", tb)
	}
	// A login role granted the service role cannot become the owner (the
	// pools above SET ROLE from a superuser session, which could).
	login := rs.login(t, rs.roles.Service)
	_, err = login.Exec(ctx, "SET ROLE "+pgx.Identifier{rs.roles.Owner}.Sanitize())
	requirePrivilegeRefused(t, err, "SET ROLE to the owner")
	_, err = login.Exec(ctx, "DELETE FROM "+s+".events")
	requirePrivilegeRefused(t, err, "DELETE events as a login granted the service role")
	_, err = svc.Exec(ctx, "CREATE TABLE "+s+".sneaky (x int)")
	requirePrivilegeRefused(t, err, "CREATE TABLE in the journal schema")

	// Every event is still there, in the hot table or the archive.
	n := 0
	for rec, err := range j.ReadStreamWithArchive(ctx, journal.Stream("acct:1"), 1, 0) {
		require.NoError(t, err)
		require.Equal(t, recs[n].ID, rec.ID)
		n++
	}
	require.Equal(t, 5, n)

	reader := rs.pool(t, rs.roles.Reader)
	rj, err := postgres.NewJournal(reader, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rj.Close() })
	_, err = rj.Append(ctx, []journal.Event{event("Changed", "acct:2")}, journal.AppendOptions{})
	requirePrivilegeRefused(t, err, "append as the reader")
	k := pgx.Identifier{keys.Schema}.Sanitize()
	_, err = reader.Exec(ctx, "SELECT data_key FROM "+k+".subjects")
	requirePrivilegeRefused(t, err, "reading data keys as the reader")
	_, err = reader.Exec(ctx, "SELECT * FROM "+k+".subjects")
	requirePrivilegeRefused(t, err, "SELECT * of the subjects as the reader")
	var subjects int
	require.NoError(t, reader.QueryRow(ctx, "SELECT count(subject) FROM "+k+".subjects WHERE erased_at IS NULL").Scan(&subjects))
	require.Equal(t, 1, subjects)
	rks, err := postgres.NewKeyStore(reader, keys)
	require.NoError(t, err)
	subs, err := rks.Subjects(ctx, "", 0)
	require.NoError(t, err, "the reader lists subjects and their erasure state without a key")
	require.Len(t, subs, 1)
	_, err = rks.DataKey(ctx, "subject-1")
	requirePrivilegeRefused(t, err, "a data key read as the reader")
}

// TestRolesMigrateNeedsTheOwner: a migration attempted as the service role
// fails at once with a configuration error naming the role connected and
// the owner role to use, for the journal and the key store; once the owner
// migrated, Migrate and Open as the service role find nothing to do and
// succeed, and Open with Config.VerifyOnly does too.
func TestRolesMigrateNeedsTheOwner(t *testing.T) {
	t.Parallel()
	rs := newRoleSet(t)
	cfg, keys := rs.schema(t, false)
	ctx := t.Context()
	svc := rs.pool(t, rs.roles.Service)
	for name, migrate := range map[string]func() error{
		"journal":   func() error { return postgres.Migrate(ctx, svc, cfg) },
		"key store": func() error { return postgres.MigrateKeyStore(ctx, svc, keys) },
		"unknown schema": func() error {
			return postgres.Migrate(ctx, svc, postgres.Config{Schema: cfg.Schema + "_x"})
		},
	} {
		err := migrate()
		require.ErrorIs(t, err, journal.ErrConfiguration, name)
		require.Contains(t, err.Error(), `as role "`+rs.roles.Service+`"`, name)
		require.Contains(t, err.Error(), "permission denied", name)
		require.Contains(t, err.Error(), "use the owner role", name)
		require.Less(t, len(err.Error()), 300, name)
	}
	svcURL := roleURL(t, rs.url, rs.roles.Service)
	_, err := postgres.Open(ctx, svcURL, postgres.Config{Schema: cfg.Schema})
	require.ErrorIs(t, err, journal.ErrConfiguration, "Open migrates, which the service role may not")
	require.Contains(t, err.Error(), "use the owner role")

	owner := rs.pool(t, rs.roles.Owner)
	require.NoError(t, postgres.Migrate(ctx, owner, cfg))
	require.NoError(t, postgres.MigrateKeyStore(ctx, owner, keys))
	r := rs.roles
	r.KeyStoreSchema = keys.Schema
	sql, err := postgres.RolesSQL(cfg.Schema, r)
	require.NoError(t, err)
	require.NoError(t, rs.apply(ctx, sql), "RolesSQL again after the migration: grants on the new tables")
	require.NoError(t, postgres.Migrate(ctx, svc, cfg), "an up-to-date schema needs no privilege to migrate")
	require.NoError(t, postgres.MigrateKeyStore(ctx, svc, keys))
	for _, verify := range []bool{false, true} {
		st, err := postgres.Open(ctx, svcURL, postgres.Config{Schema: cfg.Schema, KeyStore: &keys, VerifyOnly: verify})
		require.NoError(t, err)
		_, err = st.Journal.Append(ctx, []journal.Event{event("Opened", "acct:1")}, journal.AppendOptions{})
		require.NoError(t, err)
		_, err = st.Keys.DataKey(ctx, "subject-1")
		require.NoError(t, err)
		st.Close()
	}
}

// serviceSchema is a fresh schema set up by a role set shared by the
// subtests of one test, with pools connected as the service role.
func serviceSchema(t *testing.T, rs *roleSet) (*pgxpool.Pool, postgres.Config, postgres.KeyStoreConfig) {
	t.Helper()
	cfg, keys := rs.schema(t, true)
	return rs.pool(t, rs.roles.Service), cfg, keys
}

// TestRolesJournalConformanceAsService runs the journal conformance suite
// (appends, reads, subscriptions, sessions and fencing) connected as the
// service role. Its tampering cases alter rows as the administrator, as an
// attacker with more than the service role would.
func TestRolesJournalConformanceAsService(t *testing.T) {
	t.Parallel()
	rs := newRoleSet(t)
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		svc, cfg, _ := serviceSchema(t, rs)
		j, err := postgres.NewJournal(svc, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = j.Close() })
		admin := &fixture{pool: rs.admin, cfg: cfg, journal: j}
		h := admin.harness(t)
		peer, err := postgres.NewJournal(svc, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = peer.Close() })
		h.Peer = peer
		return h
	})
}

// TestRolesSnapshotConformanceAsService runs the snapshot store suite
// connected as the service role.
func TestRolesSnapshotConformanceAsService(t *testing.T) {
	t.Parallel()
	rs := newRoleSet(t)
	snapshotstest.Run(t, func(t *testing.T) snapshotstest.Harness {
		svc, cfg, _ := serviceSchema(t, rs)
		st, err := postgres.NewSnapshotStore(svc, cfg)
		require.NoError(t, err)
		return snapshotstest.Harness{Store: st}
	})
}

// TestRolesProjectionConformanceAsService runs the projection suite (claims,
// checkpoints committed in the read model's transaction, dead letters,
// slices) connected as the service role, its read model in a table of the
// service's own schema.
func TestRolesProjectionConformanceAsService(t *testing.T) {
	t.Parallel()
	rs := newRoleSet(t)
	harness := func(t *testing.T) projectiontest.Harness[pgx.Tx] {
		svc, cfg, _ := serviceSchema(t, rs)
		cfg.PollInterval = 50 * time.Millisecond
		j, err := postgres.NewJournal(svc, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = j.Close() })
		store, err := postgres.NewProjectionStore(svc, cfg)
		require.NoError(t, err)
		own := cfg.Schema + "_rm"
		_, err = rs.admin.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{own}.Sanitize()+" AUTHORIZATION "+pgx.Identifier{rs.roles.Service}.Sanitize())
		require.NoError(t, err)
		t.Cleanup(func() {
			_, _ = rs.admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{own}.Sanitize()+" CASCADE")
		})
		table := pgx.Identifier{own, "rm_applied"}.Sanitize()
		_, err = svc.Exec(t.Context(), `CREATE TABLE `+table+` (model text, id uuid, n int NOT NULL, PRIMARY KEY (model, id))`)
		require.NoError(t, err)
		h := readModelHarness(svc, table)
		h.Journal, h.Store = j, store
		return h
	}
	t.Run("runs", func(t *testing.T) { projectiontest.Run(t, harness) })
	t.Run("slices", func(t *testing.T) { projectiontest.RunSlices(t, harness) })
}

// TestRolesKeyStoreConformanceAsService runs the erasure key store suite
// connected as the service role.
func TestRolesKeyStoreConformanceAsService(t *testing.T) {
	t.Parallel()
	rs := newRoleSet(t)
	erasuretest.Run(t, func(t *testing.T) erasure.KeyStore {
		svc, _, keys := serviceSchema(t, rs)
		ks, err := postgres.NewKeyStore(svc, keys)
		require.NoError(t, err)
		return ks
	})
}
