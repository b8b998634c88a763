package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/postgres"
)

// scribeOffline runs the command line with no database configured.
func scribeOffline(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(t.Context(), args, &out, &errOut, func(string) string { return "" })
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// `scribe migrate sql` needs no database: it prints the fresh schema's SQL,
// or writes one file per migration.
func TestMigrateSQLWithoutADatabase(t *testing.T) {
	res := scribeOffline(t, "-schema", "shop", "migrate", "sql")
	require.Equal(t, 0, res.code, res.stderr)
	want, err := postgres.SchemaSQL("shop")
	require.NoError(t, err)
	require.Equal(t, want, res.stdout)
	require.Contains(t, res.stdout, `CREATE SCHEMA IF NOT EXISTS "shop"`)

	dir := filepath.Join(t.TempDir(), "migrations")
	res = scribeOffline(t, "-schema", "shop", "migrate", "sql", "-files", dir)
	require.Equal(t, 0, res.code, res.stderr)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files, err := postgres.MigrationFiles("shop")
	require.NoError(t, err)
	names, err := fs.Glob(files, "*.up.sql")
	require.NoError(t, err)
	require.Len(t, entries, len(names))
	for _, e := range entries {
		require.True(t, strings.HasSuffix(e.Name(), ".up.sql"), e.Name())
	}
	first, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
	require.NoError(t, err)
	require.Contains(t, string(first), `"shop".schema_migrations`)
}
