package postgres_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal/journaltest"
	"github.com/scribe-es/scribe/postgres"
)

// psql finds the psql client: on PATH, else in the newest server package.
func psql(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(ms) > 0 {
		slices.Sort(ms)
		return ms[len(ms)-1]
	}
	if os.Getenv(pgtest.EnvRequire) == "1" {
		t.Fatal("psql is not installed (apt-get install postgresql-client)")
	}
	t.Skip("psql is not installed")
	return ""
}

// applyWithPsql runs sql with psql against the test database, stopping at
// the first error.
func applyWithPsql(t *testing.T, sql string) {
	t.Helper()
	cmd := exec.Command(psql(t), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pgtest.URL(t), "-f", "-")
	cmd.Stdin = strings.NewReader(sql)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "psql: %s", out)
}

// fixtureFromSQL is a fixture whose schema was created by applying what
// apply is given for it, not by Migrate.
func fixtureFromSQL(t *testing.T, apply func(schema string)) *fixture {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	apply(schema)
	cfg := postgres.Config{Schema: schema}
	rep, err := postgres.MigrationStatus(context.Background(), pool, cfg)
	require.NoError(t, err)
	require.Empty(t, rep.Pending, "the applied SQL left migrations pending")
	require.Equal(t, postgres.LatestVersion(), rep.Current)
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	st, err := postgres.NewSnapshotStore(pool, cfg)
	require.NoError(t, err)
	return &fixture{pool: pool, cfg: cfg, journal: j, snapshots: st}
}

// SchemaSQL, applied with psql to an empty schema, makes a journal that
// passes the conformance suite, and Migrate finds nothing to do.
func TestSchemaSQLAppliedWithPsqlPassesTheConformanceSuite(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		f := fixtureFromSQL(t, func(schema string) {
			sql, err := postgres.SchemaSQL(schema)
			require.NoError(t, err)
			applyWithPsql(t, sql)
		})
		require.NoError(t, postgres.Migrate(context.Background(), f.pool, f.cfg), "Migrate after SchemaSQL")
		return f.harness(t)
	})
}

// MigrationFiles, applied one by one in name order as a migration tool
// would, give a schema at the latest version that appends and reads.
func TestMigrationFilesAppliedInOrder(t *testing.T) {
	t.Parallel()
	f := fixtureFromSQL(t, func(schema string) {
		files, err := postgres.MigrationFiles(schema)
		require.NoError(t, err)
		names, err := fs.Glob(files, "*.up.sql")
		require.NoError(t, err)
		require.NotEmpty(t, names)
		slices.Sort(names)
		for _, n := range names {
			b, err := fs.ReadFile(files, n)
			require.NoError(t, err)
			applyWithPsql(t, "BEGIN;\n"+string(b)+"COMMIT;\n")
		}
	})
	// The same tables, columns, indexes and functions as Migrate makes.
	migrated := setup(t)
	require.Equal(t, catalog(t, migrated), catalog(t, f))
}

// catalog lists f's schema's columns, indexes and functions, its name
// replaced by "S", for comparing two schemas.
func catalog(t *testing.T, f *fixture) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `
		SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
		  FROM information_schema.columns WHERE table_schema = $1
		UNION ALL
		SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = $1
		UNION ALL
		SELECT 'function ' || p.proname || '(' || pg_get_function_arguments(p.oid) || ')'
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`, f.cfg.Schema)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, strings.ReplaceAll(s, f.cfg.Schema, "S"))
	}
	require.NoError(t, rows.Err())
	slices.Sort(out)
	require.NotEmpty(t, out)
	return out
}
