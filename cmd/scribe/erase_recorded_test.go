package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// secondDatabase creates a database of its own on the test server (dropped
// at the test's end) and returns its URL.
func secondDatabase(t *testing.T) string { return pgtest.Database(t, "scribe_keys_") }

// scribeEnv runs the command line against f's schema with env as the
// environment.
func (f *fixture) scribeEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(t.Context(), append([]string{"-db", f.url, "-schema", f.schema}, args...), &out, &errOut, func(k string) string { return env[k] })
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestEraseRecordedRestoresErasures: a key store on another database
// (-keys-db), restored from a backup taken before subject c-1's erasure,
// still holds c-1's key although the journal records the erasure.
// `scribe erase -recorded` without -confirm names c-1 (not c-2), changes
// nothing and exits 1; with -confirm (the database given by
// $SCRIBE_KEYS_DATABASE_URL this time) it erases c-1 in that key store
// only; run again it finds nothing to do. A subject with it is a usage
// error.
func TestEraseRecordedRestoresErasures(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setup(t, true)
	keysURL := secondDatabase(t)
	const restored = "restored_keys"
	current := postgres.KeyStoreSchemaFor(f.schema)
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{current}.Sanitize()+" CASCADE")
	})
	require.Equal(t, 0, f.scribe(t, "migrate", "keys").code)
	r := f.scribe(t, "migrate", "keys", "-keys-db", keysURL, "-keys", restored)
	require.Equal(t, 0, r.code, r.stderr)
	cur, err := postgres.NewKeyStore(f.pool, postgres.KeyStoreConfig{Schema: current})
	require.NoError(t, err)
	kpool, err := postgres.Connect(ctx, keysURL, postgres.Config{})
	require.NoError(t, err)
	defer kpool.Close()
	old, err := postgres.NewKeyStore(kpool, postgres.KeyStoreConfig{Schema: restored})
	require.NoError(t, err)
	for _, ks := range []erasure.KeyStore{cur, old} {
		for _, s := range []string{"c-1", "c-2"} {
			_, err := ks.DataKey(ctx, s)
			require.NoError(t, err)
		}
	}
	r = f.scribe(t, "erase", "c-1", "-confirm", "-by", "dpo-3")
	require.Equal(t, 0, r.code, r.stderr)

	r = f.scribe(t, "erase", "-recorded", "-keys-db", keysURL, "-keys", restored)
	require.Equal(t, exitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, "c-1")
	require.NotContains(t, r.stderr, "c-2")
	require.Contains(t, r.stderr, "-confirm")
	look, err := old.Lookup(ctx, []string{"c-1"})
	require.NoError(t, err)
	require.Contains(t, look.Keys, "c-1", "without -confirm nothing changes")

	env := map[string]string{EnvKeysDatabaseURL: keysURL}
	r = f.scribeEnv(t, env, "erase", "-recorded", "-confirm", "-keys", restored)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `subject "c-1" erased again`)
	require.Contains(t, r.stdout, "1 recorded erasure(s) applied")
	look, err = old.Lookup(ctx, []string{"c-1", "c-2"})
	require.NoError(t, err)
	require.NotContains(t, look.Keys, "c-1")
	require.Equal(t, erasure.ErasureComplete, look.Erased["c-1"].State)
	require.Equal(t, "dpo-3", look.Erased["c-1"].By)
	require.Contains(t, look.Keys, "c-2")

	r = f.scribeEnv(t, env, "erase", "-recorded", "-keys", restored)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "nothing to do")

	r = f.scribe(t, "erase", "c-2", "-recorded")
	require.Equal(t, exitUsage, r.code, r.stderr)
	look, err = cur.Lookup(ctx, []string{"c-2"})
	require.NoError(t, err)
	require.Contains(t, look.Keys, "c-2")
}

// TestVerifyReadsKeysDB: scribe verify finds the key store on the database
// -keys-db or $SCRIBE_KEYS_DATABASE_URL names, as erase and subjects do:
// with it, the event sealed for a subject erased there is counted; without
// it (no key store of that schema on the journal's database) it is not.
func TestVerifyReadsKeysDB(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setup(t, true)
	keysURL := secondDatabase(t)
	const schema = "apart_keys"
	r := f.scribe(t, "migrate", "keys", "-keys-db", keysURL, "-keys", schema)
	require.Equal(t, 0, r.code, r.stderr)
	kpool, err := postgres.Connect(ctx, keysURL, postgres.Config{})
	require.NoError(t, err)
	defer kpool.Close()
	ks, err := postgres.NewKeyStore(kpool, postgres.KeyStoreConfig{Schema: schema})
	require.NoError(t, err)
	key, err := ks.DataKey(ctx, "c-9")
	require.NoError(t, err)
	data, err := erasure.Seal([]byte(`{"customerId":"c-9","name":"Nina Verify-Marker"}`),
		erasure.SealParams{EventType: "CustomerRegistered", Subject: "c-9", Fields: []string{"name"}, Key: key})
	require.NoError(t, err)
	_, err = f.journal.Append(ctx, []journal.Event{{ID: uuid.Must(uuid.NewV7()), Type: "CustomerRegistered", SchemaVersion: 1,
		Tags: []journal.Tag{"customer:c-9"}, Data: data}}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = erasure.Erase(ctx, erasure.EraseParams{Journal: f.journal, KeyStore: ks, Subject: "c-9", By: "test"})
	require.NoError(t, err)

	r = f.scribe(t, "verify", "-keys", schema)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "ERASED")
	r = f.scribe(t, "verify", "-keys", schema, "-keys-db", keysURL)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "ERASED 1 event(s)")
	r = f.scribeEnv(t, map[string]string{EnvKeysDatabaseURL: keysURL}, "verify", "-keys", schema)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "ERASED 1 event(s)")
	require.NotContains(t, r.stdout+r.stderr, "Nina")
	// A key store database without that schema is said, not silently used.
	r = f.scribe(t, "verify", "-keys", "no_such_keys", "-keys-db", keysURL)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "no key store schema")
	require.NotContains(t, r.stdout, "ERASED")
}
