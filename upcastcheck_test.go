package scribe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

type checkedDeposit struct {
	Amount int `json:"amount"`
}

// UpcastCheck exits 1 naming the type, the version and the first event of
// a stored version no upcaster reads, and 0 once the build has the
// upcaster.
func TestUpcastCheck(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL(t)
	pool, schema := pgtest.Pool(t)
	t.Cleanup(func() { // Open made the key store's schema beside the test's
		_, _ = pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+postgres.KeyStoreSchemaFor(schema)+`" CASCADE`)
	})
	store, err := postgres.Open(ctx, url, postgres.Config{Schema: schema, KeyStore: &postgres.KeyStoreConfig{}})
	require.NoError(t, err)
	var firstV1 string
	for i, v := range []int{2, 1, 1, 3} {
		ev := journal.Event{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: v, Tags: []journal.Tag{"account:a"}, Data: json.RawMessage(`{"amount":5}`)}
		_, err := store.Journal.Append(ctx, []journal.Event{ev}, journal.AppendOptions{})
		require.NoError(t, err)
		if i == 1 {
			firstV1 = ev.ID.String()
		}
	}
	store.Close()

	identity := func(d json.RawMessage) (json.RawMessage, error) { return d, nil }
	check := func(fromV1 bool, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := scribe.UpcastCheck(ctx, scribe.UpcastCheckParams{
			Name: "svc upcast check",
			Args: append([]string{"-db", url, "-schema", schema}, args...),
			Register: func(rt *runtime.Runtime) error {
				runtime.MustRegisterEvent[checkedDeposit](rt, "Deposited", 3)
				runtime.MustRegisterUpcaster(rt, "Deposited", 2, identity)
				if fromV1 {
					runtime.MustRegisterUpcaster(rt, "Deposited", 1, identity)
				}
				return nil
			},
			Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut,
		})
		return code, out.String(), errOut.String()
	}
	code, out, errOut := check(false)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, "Deposited v1: 2 failed, first event "+firstV1)
	require.NotContains(t, errOut, "Deposited v2:")
	require.Regexp(t, `(?m)^Deposited\s+1\s+2\s+2\s+2\s+`+firstV1, out)
	code, _, errOut = check(false, "-sample", "1")
	require.Equal(t, 1, code, "a sample of one per version still finds it")
	require.Contains(t, errOut, "Deposited v1: 1 failed, first event "+firstV1)

	code, out, errOut = check(true)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "4 events checked of 4: every one decodes")

	code, _, errOut = check(true, "extra")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unexpected argument "extra"`)
}
