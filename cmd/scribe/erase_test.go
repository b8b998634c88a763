package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"math"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/throwawaypg"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// The erasure acceptance test's domain: a customer aggregate, an account
// aggregate whose opening names its holder, and a DCB command logging a
// contact in a campaign. Each carries personal data of the customer.

type (
	registerCustomer struct{ ID, Name, Email string }
	openAccount      struct{ ID, CustomerID, Holder string }
	logContact       struct{ Campaign, CustomerID, Email string }
	getState         struct{}
)

type customerRegistered struct {
	CustomerID string `json:"customerId"`
	Name       string `json:"name"`
	Email      string `json:"email"`
}

type accountOpened struct {
	AccountID  string `json:"accountId"`
	CustomerID string `json:"customerId"`
	Holder     string `json:"holder"`
}

type contactLogged struct {
	Campaign   string `json:"campaign"`
	CustomerID string `json:"customerId"`
	Email      string `json:"email"`
}

func (c contactLogged) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("campaign", c.Campaign)}
}

type customerState struct{ ID, Name, Email string }
type accountState struct{ ID, CustomerID, Holder string }

func startShop(t *testing.T, j *postgres.Journal, snaps snapshots.Store, ks erasure.KeyStore) (*runtime.Runtime, *runtime.DCBCommand[logContact, int]) {
	t.Helper()
	policy := snapshots.Policy{Every: 1, OnPassivation: true}
	rt, err := runtime.New(t.Context(), runtime.Config{Journal: j, Snapshots: snaps, SnapshotPolicy: &policy, KeyStore: ks, NodeID: "shop-1"})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	personal := func(fields ...string) runtime.EventOption {
		return runtime.WithPersonalData(runtime.PersonalData{Fields: fields, SubjectField: "customerId"})
	}
	require.NoError(t, runtime.RegisterEvent[customerRegistered](rt, "CustomerRegistered", 1, personal("name", "email")))
	require.NoError(t, runtime.RegisterEvent[accountOpened](rt, "AccountOpened", 1, personal("holder")))
	require.NoError(t, runtime.RegisterEvent[contactLogged](rt, "ContactLogged", 1, personal("email")))
	require.NoError(t, runtime.RegisterAggregate(rt, runtime.Aggregate[customerState]{
		Name:    "customer",
		Initial: func() customerState { return customerState{} },
		Decide: func(s customerState, cmd any) ([]any, error) {
			if c, ok := cmd.(registerCustomer); ok {
				return []any{customerRegistered{CustomerID: c.ID, Name: c.Name, Email: c.Email}}, nil
			}
			return nil, nil
		},
		Evolve: func(s customerState, ev any) customerState {
			if e, ok := ev.(customerRegistered); ok {
				return customerState{ID: e.CustomerID, Name: e.Name, Email: e.Email}
			}
			return s
		},
	}))
	require.NoError(t, runtime.RegisterAggregate(rt, runtime.Aggregate[accountState]{
		Name:    "account",
		Initial: func() accountState { return accountState{} },
		Decide: func(s accountState, cmd any) ([]any, error) {
			if c, ok := cmd.(openAccount); ok {
				return []any{accountOpened{AccountID: c.ID, CustomerID: c.CustomerID, Holder: c.Holder}}, nil
			}
			return nil, nil
		},
		Evolve: func(s accountState, ev any) accountState {
			if e, ok := ev.(accountOpened); ok {
				return accountState{ID: e.AccountID, CustomerID: e.CustomerID, Holder: e.Holder}
			}
			return s
		},
	}))
	dcb, err := runtime.RegisterDCB(rt, runtime.DCB[logContact, int]{
		Name: "log-contact",
		Query: func(c logContact) journal.Query {
			return journal.Query{Items: []journal.QueryItem{{Types: []string{"ContactLogged"}, Tags: []journal.Tag{journal.NewTag("campaign", c.Campaign)}}}}
		},
		Evolve: func(_ logContact, n int, _ runtime.DCBEvent) int { return n + 1 },
		Decide: func(c logContact, _ int) ([]any, error) {
			return []any{contactLogged{Campaign: c.Campaign, CustomerID: c.CustomerID, Email: c.Email}}, nil
		},
	})
	require.NoError(t, err)
	return rt, dcb
}

// startContacts runs a read model of customers (table rm_customers in
// schema rmSchema, as a user would build it) that deletes a customer's row
// when the erasure record reaches it through the feed.
func startContacts(t *testing.T, f *fixture, rt *runtime.Runtime, rmSchema string) {
	t.Helper()
	table := pgx.Identifier{rmSchema, "rm_customers"}.Sanitize()
	f.exec(t, `CREATE SCHEMA `+pgx.Identifier{rmSchema}.Sanitize())
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{rmSchema}.Sanitize()+" CASCADE")
	})
	f.exec(t, `CREATE TABLE `+table+` (id text PRIMARY KEY, name text NOT NULL, email text NOT NULL)`)
	store, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	r, err := projection.NewRunner(f.journal, store, projection.Projection[pgx.Tx]{
		Name: "customers", Version: 1,
		Query: journal.Query{Items: []journal.QueryItem{{Types: []string{"CustomerRegistered", erasure.RecordType}}}},
		Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
			for _, rec := range b.Records {
				if d, ok, err := erasure.ParseRecord(&rec); ok {
					if err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE id = $1`, d.Subject); err != nil {
						return err
					}
					continue
				}
				ev, _, err := runtime.DecodeAsRecord[customerRegistered](ctx, rt, rec)
				if err != nil {
					return err
				}
				if ev.Name == "" { // erased before this projection saw it
					continue
				}
				if _, err := tx.Exec(ctx, `INSERT INTO `+table+` VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, email = EXCLUDED.email`, ev.CustomerID, ev.Name, ev.Email); err != nil {
					return err
				}
			}
			return nil
		},
	}, projection.Options{Owner: "test"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("read model: %v", err)
		}
	})
}

// leaks returns the forms of secret found in b: as is, and hex-encoded (the
// way pg_dump and ::text render bytea columns).
func leaks(b []byte, secrets ...string) []string {
	var out []string
	lower := bytes.ToLower(b)
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			out = append(out, s)
		}
		if bytes.Contains(lower, []byte(hex.EncodeToString([]byte(s)))) {
			out = append(out, "hex("+s+")")
		}
	}
	return out
}

func pgDump(t *testing.T, url, schema string) []byte {
	t.Helper()
	bin := "/usr/lib/postgresql/15/bin/pg_dump"
	if _, err := exec.LookPath(bin); err != nil {
		if bin, err = exec.LookPath("pg_dump"); err != nil {
			t.Skip("pg_dump is not installed: the dump half of the erasure acceptance test cannot run")
		}
	}
	out, err := exec.CommandContext(t.Context(), bin, "--dbname="+url, "--schema="+schema, "--no-owner").Output()
	require.NoError(t, err)
	return out
}

// tableText returns every row of every table of schema as text.
func tableText(t *testing.T, f *fixture, schema string) []byte {
	t.Helper()
	rows, err := f.pool.Query(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	var buf bytes.Buffer
	for _, tb := range tables {
		q := pgx.Identifier{schema, tb}.Sanitize()
		rows, err := f.pool.Query(t.Context(), `SELECT t::text FROM `+q+` t`)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, l := range lines {
			buf.WriteString(l)
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes()
}

// TestEraseAcceptance is the erasure acceptance test on Postgres: a subject
// with events in two aggregate streams and a DCB event, snapshots and a
// read model is erased through `scribe erase`; afterwards its personal data
// is readable nowhere, every chain verifies, its aggregates still load with
// zero fields, its read-model row is gone, and another subject is intact.
func TestEraseAcceptance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setup(t, true)
	keySchema := f.schema + "_keys"
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{keySchema}.Sanitize()+" CASCADE")
	})
	require.Equal(t, 0, f.scribe(t, "migrate", "keys", "-keys", keySchema).code)
	ks, err := postgres.NewKeyStore(f.pool, postgres.KeyStoreConfig{Schema: keySchema})
	require.NoError(t, err)
	snaps, err := postgres.NewSnapshotStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	rt, contact := startShop(t, f.journal, snaps, ks)
	rmSchema := f.schema + "_rm"
	startContacts(t, f, rt, rmSchema)

	const (
		name, email, holder = "Alice Erasable-Marker", "alice.marker@example.invalid", "A. Erasable-Marker Holder"
		otherName           = "Bob Keeps-His-Data"
	)
	secrets := []string{name, email, holder}
	for _, c := range []struct{ id, name, email, holder, account string }{
		{"c-42", name, email, holder, "a-1"},
		{"c-7", otherName, "bob@example.invalid", "Bob Holder", "a-2"},
	} {
		_, err := rt.Execute(ctx, runtime.Target{Aggregate: "customer", ID: c.id}, registerCustomer{ID: c.id, Name: c.name, Email: c.email})
		require.NoError(t, err)
		_, err = rt.Execute(ctx, runtime.Target{Aggregate: "account", ID: c.account}, openAccount{ID: c.account, CustomerID: c.id, Holder: c.holder})
		require.NoError(t, err)
		_, err = contact.Execute(ctx, logContact{Campaign: "spring", CustomerID: c.id, Email: c.email})
		require.NoError(t, err)
	}
	customerStream := journal.Stream("customer:c-42")
	accountStream := journal.Stream("account:a-1")
	for _, s := range []journal.StreamID{customerStream, accountStream} {
		require.Eventually(t, func() bool { // saved after the append, asynchronously
			_, err := snaps.Load(ctx, s, math.MaxUint64)
			return err == nil
		}, 20*time.Second, 5*time.Millisecond, "stream %s must have a snapshot before the erasure", s)
	}
	rmTable := pgx.Identifier{rmSchema, "rm_customers"}.Sanitize()
	require.Eventually(t, func() bool {
		var n int
		return f.pool.QueryRow(ctx, `SELECT count(*) FROM `+rmTable).Scan(&n) == nil && n == 2
	}, 20*time.Second, 10*time.Millisecond)

	// Before the erasure: the read model (the user's own table, in a
	// schema of its own) holds plaintext, which shows the test can see it;
	// the journal's schema holds ciphertext only, events and snapshots
	// (sealed under the subjects' keys) alike.
	require.NotEmpty(t, leaks(tableText(t, f, rmSchema), secrets...), "the test must be able to see plaintext where it is")
	require.Empty(t, leaks(tableText(t, f, f.schema), secrets...), "the journal's schema holds plaintext before the erasure")
	var eventsText string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT string_agg(convert_from(data, 'UTF8'), E'\n') FROM `+pgx.Identifier{f.schema, "events"}.Sanitize()).Scan(&eventsText))
	require.Empty(t, leaks([]byte(eventsText), secrets...), "the journal must hold ciphertext only")
	require.Contains(t, eventsText, `"$personal"`)
	dump := pgDump(t, f.url, f.schema)
	require.NotContains(t, string(dump), "data_key", "the key store must live outside the journal's schema")

	// Without -confirm nothing happens, and the command says what would.
	r := f.scribe(t, "erase", "c-42", "-keys", keySchema)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "not erasing without -confirm")
	look, err := ks.Lookup(ctx, []string{"c-42"})
	require.NoError(t, err)
	require.Contains(t, look.Keys, "c-42")

	r = f.scribe(t, "erase", "c-42", "-confirm", "-by", "dpo-ticket-17", "-keys", keySchema)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `subject "c-42" erased`)
	r2 := f.scribe(t, "erase", "c-42", "-confirm", "-keys", keySchema)
	require.Equal(t, exitOK, r2.code, r2.stderr)
	require.Contains(t, r2.stdout, "already erased")
	for _, s := range []journal.StreamID{customerStream, accountStream, journal.Stream("campaign:spring")} {
		infos, err := snaps.List(ctx, s)
		require.NoError(t, err)
		require.Empty(t, infos, "the snapshots of %s must be deleted by the erasure", s)
	}
	list := f.scribe(t, "subjects", "-keys", keySchema, "-json")
	require.Equal(t, exitOK, list.code, list.stderr)
	rows := jsonLines(t, list.stdout)
	require.Len(t, rows, 2)
	require.Equal(t, "c-42", rows[0]["subject"])
	require.Equal(t, true, rows[0]["erased"])
	require.Equal(t, "dpo-ticket-17", rows[0]["erasedBy"])
	require.Equal(t, false, rows[1]["erased"])
	for _, out := range []string{r.stdout, r.stderr, r2.stdout, r2.stderr, list.stdout, list.stderr} {
		require.Empty(t, leaks([]byte(out), secrets...))
	}

	// The key is gone from the key store.
	var keyed int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{keySchema, "subjects"}.Sanitize()+` WHERE subject = 'c-42' AND data_key IS NOT NULL`).Scan(&keyed))
	require.Zero(t, keyed)

	// The running runtime learns of the erasure through the feed: its
	// aggregates reload with zero personal fields, the read model drops the
	// row.
	require.Eventually(t, func() bool {
		res, err := runtime.ExecuteTyped[customerState](ctx, rt, runtime.Target{Aggregate: "customer", ID: "c-42"}, getState{})
		return err == nil && res.State == customerState{ID: "c-42"}
	}, 20*time.Second, 10*time.Millisecond)
	acc, err := runtime.State[accountState](ctx, rt, runtime.Target{Aggregate: "account", ID: "a-1"})
	require.NoError(t, err)
	require.Equal(t, accountState{ID: "a-1", CustomerID: "c-42"}, acc.State)
	require.Eventually(t, func() bool {
		var n int
		return f.pool.QueryRow(ctx, `SELECT count(*) FROM `+rmTable+` WHERE id = 'c-42'`).Scan(&n) == nil && n == 0
	}, 20*time.Second, 10*time.Millisecond)
	_, err = rt.Execute(ctx, runtime.Target{Aggregate: "customer", ID: "c-42"}, registerCustomer{ID: "c-42", Name: "x", Email: "y"})
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	// Give the evicted actors' successors a snapshot too, then look at
	// every table: no plaintext anywhere (journal, snapshots, read model).
	_, err = rt.Execute(ctx, runtime.Target{Aggregate: "account", ID: "a-1"}, getState{})
	require.NoError(t, err)
	after := append(tableText(t, f, f.schema), tableText(t, f, rmSchema)...)
	require.Empty(t, leaks(after, secrets...), "personal data is still readable in the journal's schema or the read model after the erasure")
	require.Empty(t, leaks(dump, secrets...), "the dump taken before the erasure must hold ciphertext only")
	require.True(t, bytes.Contains(dump, []byte(hex.EncodeToString([]byte(`"$personal"`)))), "the dump must hold the sealed envelopes")

	// Every chain verifies, the erasure record's untagged chain included.
	for _, s := range []journal.StreamID{customerStream, accountStream, journal.Stream("campaign:spring"), journal.Stream("customer:c-7"), journal.Stream(journal.UntaggedChain(erasure.RecordType))} {
		n, err := journal.VerifyStream(ctx, f.journal, s)
		require.NoError(t, err, "stream %s", s)
		require.NotZero(t, n, "stream %s", s)
	}
	v := f.scribe(t, "verify")
	require.Equal(t, exitOK, v.code, v.stdout+v.stderr)
	// With the key store, verify counts the events whose content it could
	// verify only up to the erased fields: c-42's customer registration,
	// account opening and DCB contact; c-7's stay readable.
	v = f.scribe(t, "verify", "-keys", keySchema)
	require.Equal(t, exitOK, v.code, v.stdout+v.stderr)
	require.Contains(t, v.stdout, "ERASED 3 event(s) hold personal data of erased subjects")
	require.Contains(t, v.stdout, "every chain is intact")
	v = f.scribe(t, "verify", "-keys", keySchema, "-json")
	require.Equal(t, exitOK, v.code, v.stdout+v.stderr)
	require.Contains(t, v.stdout, `"erasedEvents":3`)

	// The DCB event still decodes, with its personal field erased.
	for rec, err := range f.journal.ReadStream(ctx, journal.Stream("campaign:spring"), 1, 0) {
		require.NoError(t, err)
		ev, erased, err := runtime.DecodeAsRecord[contactLogged](ctx, rt, rec)
		require.NoError(t, err)
		if ev.CustomerID == "c-42" {
			require.Equal(t, []string{"email"}, erased)
			require.Empty(t, ev.Email)
		} else {
			require.Empty(t, erased)
			require.Equal(t, "bob@example.invalid", ev.Email)
		}
	}

	// The other subject is intact everywhere.
	other, err := runtime.State[customerState](ctx, rt, runtime.Target{Aggregate: "customer", ID: "c-7"})
	require.NoError(t, err)
	require.Equal(t, otherName, other.State.Name)
	var rmName string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT name FROM `+rmTable+` WHERE id = 'c-7'`).Scan(&rmName))
	require.Equal(t, otherName, rmName)
	require.Equal(t, []string{otherName}, leaks(tableText(t, f, rmSchema), otherName))
}

func TestEraseUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"erase"}, "give exactly one subject ID"},
		{[]string{"erase", "c-1", "c-2"}, `unexpected argument "c-2"`},
		{[]string{"erase", "c-1", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"subjects", "-limit", "-1"}, "-limit -1 is negative"},
	} {
		var out, errOut bytes.Buffer
		code := runWith(t.Context(), c.args, &out, &errOut, func(string) string { return "" })
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errOut.String())
		require.Contains(t, errOut.String(), c.want, "%v", c.args)
	}
}

// TestEraseArchivedStream: erasing a subject deletes (and shreds) the
// snapshots its streams recover from; a stream whose oldest events were
// archived behind that snapshot then recovers through the archive, with the
// erased fields as zero values, instead of failing with journal.ErrArchived.
func TestEraseArchivedStream(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setup(t, true)
	keySchema := f.schema + "_keys"
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{keySchema}.Sanitize()+" CASCADE")
	})
	kcfg := postgres.KeyStoreConfig{Schema: keySchema}
	require.NoError(t, postgres.MigrateKeyStore(ctx, f.pool, kcfg))
	ks, err := postgres.NewKeyStore(f.pool, kcfg)
	require.NoError(t, err)
	snaps, err := postgres.NewSnapshotStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	rt, _ := startShop(t, f.journal, snaps, ks)

	target := runtime.Target{Aggregate: "customer", ID: "c-1"}
	for _, name := range []string{"First Name-Marker", "Second Name-Marker", "Third Name-Marker"} {
		_, err := rt.Execute(ctx, target, registerCustomer{ID: "c-1", Name: name, Email: "c1@example.invalid"})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { // saved after the append, asynchronously
		s, err := snaps.Load(ctx, target.Stream(), math.MaxUint64)
		return err == nil && s.Version == 3
	}, 20*time.Second, 5*time.Millisecond)
	_, err = f.admin.Archive(ctx, pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{"customer": {KeepLast: 1}}}, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	sum, err := f.journal.TagSummary(ctx, target.Stream())
	require.NoError(t, err)
	require.EqualValues(t, 2, sum.Cut.Version, "the first two events are archived")

	_, err = erasure.Erase(ctx, erasure.EraseParams{Journal: f.journal, KeyStore: ks, Snapshots: snaps, Subject: "c-1", By: "test"})
	require.NoError(t, err)
	infos, err := snaps.List(ctx, target.Stream())
	require.NoError(t, err)
	require.Empty(t, infos)

	// The runtime drops its cached key when the erasure record reaches it
	// through the feed; from then on the stream folds through the archive
	// with the erased fields empty.
	var lastErr error
	require.Eventually(t, func() bool {
		st, err := runtime.State[customerState](ctx, rt, target)
		lastErr = err
		return err == nil && st.State == customerState{ID: "c-1"} && st.Version == 3
	}, 20*time.Second, 10*time.Millisecond, "the stream must recover through the archive with the erased fields empty")
	require.NoError(t, lastErr)
	require.Eventually(t, func() bool {
		res, err := runtime.ExecuteTyped[customerState](ctx, rt, target, getState{})
		return err == nil && res.State == customerState{ID: "c-1"}
	}, 20*time.Second, 10*time.Millisecond)
	n, err := journal.VerifyStream(ctx, f.journal, target.Stream())
	require.NoError(t, err)
	require.NotZero(t, n)
}

// TestSubjectsShowsPendingErasures: an erasure stopped after its first
// step shows as pending in `scribe subjects` (never "yes", "erased": false
// in JSON), the dry run says running it again completes it, and
// `scribe erase -confirm` again completes it: then, and only then, "yes".
func TestSubjectsShowsPendingErasures(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setup(t, true)
	keySchema := f.schema + "_keys"
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{keySchema}.Sanitize()+" CASCADE")
	})
	require.Equal(t, 0, f.scribe(t, "migrate", "keys", "-keys", keySchema).code)
	ks, err := postgres.NewKeyStore(f.pool, postgres.KeyStoreConfig{Schema: keySchema})
	require.NoError(t, err)
	_, err = ks.DataKey(ctx, "c-1")
	require.NoError(t, err)
	_, err = ks.DataKey(ctx, "c-2")
	require.NoError(t, err)
	_, err = ks.BeginErasure(ctx, "c-1", "dpo") // the process stopped here
	require.NoError(t, err)

	r := f.scribe(t, "subjects", "-keys", keySchema)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `c-1 +\S+ +pending +\S+ +dpo`, r.stdout)
	require.Regexp(t, `c-2 +\S+ +no `, r.stdout)
	require.Contains(t, r.stdout, "1 erasure(s) pending")
	require.NotContains(t, r.stdout, "yes")
	r = f.scribe(t, "subjects", "-keys", keySchema, "-json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"erased":false`)
	require.Contains(t, r.stdout, `"erasure":"pending"`)

	r = f.scribe(t, "erase", "c-1", "-keys", keySchema)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "erasing again completes it")

	r = f.scribe(t, "erase", "c-1", "-confirm", "-by", "someone-else", "-keys", keySchema)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `by "dpo"`, "the original erasure is reported")
	r = f.scribe(t, "subjects", "-keys", keySchema)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `c-1 +\S+ +yes +\S+ +dpo`, r.stdout)
	require.NotContains(t, r.stdout, "pending")
	n := 0
	for rec, err := range f.journal.Read(ctx, erasure.RecordQuery(), journal.ReadOptions{}) {
		require.NoError(t, err)
		require.Equal(t, erasure.RecordID("c-1"), rec.ID)
		n++
	}
	require.Equal(t, 1, n)
}

// TestKeyStoreDefaultAndApart: -keys defaults to "<-schema>_keys"
// (postgres.KeyStoreSchemaFor, what postgres.Open's Config.KeyStore and the
// bank create); a key store schema that is missing makes subjects and erase
// exit 1 saying so, distinct from an erasure, and erase writes nothing;
// -keys-db keeps the key store on another database only.
func TestKeyStoreDefaultAndApart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setup(t, true)
	keySchema := postgres.KeyStoreSchemaFor(f.schema)
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{keySchema}.Sanitize()+" CASCADE")
	})

	r := f.scribe(t, "subjects")
	require.Equal(t, exitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "key store is missing")
	require.Contains(t, r.stderr, "not an erasure")
	require.Contains(t, r.stderr, "restore")
	require.Contains(t, r.stderr, keySchema)
	r = f.scribe(t, "erase", "c-1", "-confirm")
	require.Equal(t, exitFailure, r.code, r.stdout)
	require.Contains(t, r.stderr, "key store is missing")
	for _, err := range f.journal.Read(ctx, erasure.RecordQuery(), journal.ReadOptions{}) {
		require.NoError(t, err)
		t.Fatal("an erasure without a key store wrote to the journal")
	}

	r = f.scribe(t, "migrate", "keys")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, keySchema)
	st, err := postgres.Open(ctx, f.url, postgres.Config{Schema: f.schema, KeyStore: &postgres.KeyStoreConfig{}})
	require.NoError(t, err)
	_, err = st.Keys.DataKey(ctx, "c-open")
	require.NoError(t, err)
	st.Close()
	r = f.scribe(t, "subjects")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "c-open", "the CLI's default key schema is the one Open created")

	if testing.Short() {
		t.Skip("starts a second Postgres server")
	}
	url2 := throwawaypg.Start(t).URL()
	r = f.scribe(t, "migrate", "keys", "-keys-db", url2, "-keys", "apart_keys")
	require.Equal(t, 0, r.code, r.stderr)
	r = f.scribe(t, "erase", "c-apart", "-confirm", "-keys-db", url2, "-keys", "apart_keys")
	require.Equal(t, 0, r.code, r.stderr)
	r = f.scribe(t, "subjects", "-keys-db", url2, "-keys", "apart_keys")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `c-apart +\S+ +yes`, r.stdout)
	var here bool
	require.NoError(t, f.pool.QueryRow(ctx, "SELECT to_regclass('apart_keys.subjects') IS NOT NULL").Scan(&here))
	require.False(t, here, "-keys-db keeps the key store off the journal's database")
	r = f.scribe(t, "subjects", "-keys-db", "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "-keys-db")
}
