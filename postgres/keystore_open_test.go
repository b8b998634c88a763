package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// keyTables reports whether schema holds key store tables on the database
// at url.
func keyTables(t *testing.T, ctx context.Context, url, schema string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var ok bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schema, "subjects"}.Sanitize()).Scan(&ok))
	return ok
}

// TestOpenWithKeyStore: Config.KeyStore sets up Store.Keys in
// KeyStoreSchemaFor the journal's schema on the journal's database and
// refuses the journal's own schema; Config.KeyStoreURL keeps it on another
// database only; Config.VerifyOnly reports a missing key store as
// configuration, naming it missing.
func TestOpenWithKeyStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	url := pgtest.URL(t)
	keys := postgres.KeyStoreSchemaFor(schema)
	require.Equal(t, schema+"_keys", keys)
	require.Equal(t, postgres.DefaultKeyStoreSchema, postgres.KeyStoreSchemaFor("scribe"))
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{keys}.Sanitize()+" CASCADE")
	})

	st, err := postgres.Open(ctx, url, postgres.Config{Schema: schema})
	require.NoError(t, err)
	require.Nil(t, st.Keys, "no key store without Config.KeyStore")
	st.Close()

	_, err = postgres.Open(ctx, url, postgres.Config{Schema: schema, KeyStore: &postgres.KeyStoreConfig{Schema: schema}})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.ErrorContains(t, err, "schema of their own")

	_, err = postgres.Open(ctx, url, postgres.Config{Schema: schema, VerifyOnly: true, KeyStore: &postgres.KeyStoreConfig{}})
	require.ErrorIs(t, err, journal.ErrConfiguration)
	require.ErrorContains(t, err, "missing")

	st, err = postgres.Open(ctx, url, postgres.Config{Schema: schema, KeyStore: &postgres.KeyStoreConfig{}})
	require.NoError(t, err)
	require.NotNil(t, st.Keys)
	require.Equal(t, st.Address, st.KeysAddress)
	_, err = st.Keys.DataKey(ctx, "c-1")
	require.NoError(t, err)
	st.Close()
	require.True(t, keyTables(t, ctx, url, keys))

	if testing.Short() {
		t.Skip("starts a second Postgres server")
	}
	url2 := throwawaypg.Start(t).URL()
	st, err = postgres.Open(ctx, url, postgres.Config{Schema: schema, KeyStoreURL: url2, KeyStore: &postgres.KeyStoreConfig{Schema: "apart_keys"}})
	require.NoError(t, err)
	require.NotEqual(t, st.Address, st.KeysAddress)
	_, err = st.Keys.DataKey(ctx, "c-2")
	require.NoError(t, err)
	st.Close()
	require.True(t, keyTables(t, ctx, url2, "apart_keys"))
	require.False(t, keyTables(t, ctx, url, "apart_keys"), "the keys are on the second database only")
	_, err = st.Keys.DataKey(ctx, "c-3")
	require.Error(t, err, "Close closed the key store's pool")
}
