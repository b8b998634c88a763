package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

// The evolved member of TestCLIOnAnEvolvedJournal, as runtime's upcasting
// tests have it (runtime/upcast_test.go): its first release stored
// MoneyDeposited (amount in units), AddressChanged v1 (one "street|city"
// line), EmailAdded, EmailReplaced and ProfileViewed; a second release
// stored AddressChanged v2 (street and city) and FundsDeposited v1 (the
// rename, still in units). This build writes FundsDeposited v2 (cents),
// StreetChanged, CityChanged and EmailSet.
type (
	evolvedFunds struct {
		Cents int64 `json:"cents"`
	}
	evolvedStreet struct {
		Street string `json:"street"`
	}
	evolvedCity struct {
		City string `json:"city"`
	}
	evolvedEmail struct {
		Email string `json:"email"`
	}
	evolvedMember struct {
		Cents               int64
		Street, City, Email string
		Folds               int
	}
	evolvedDeposit struct{ Cents int64 }
)

// upcastInto is an upcaster's result: v as one event of typ at version.
func upcastInto(typ string, version int, v any) ([]runtime.Upcast, error) {
	data, err := json.Marshal(v)
	return []runtime.Upcast{{Type: typ, SchemaVersion: version, Data: data}}, err
}

// registerEvolved registers the member's events, aggregate and upcasters: a
// rename (MoneyDeposited v1 → FundsDeposited v1) chained to a one-to-one
// step (FundsDeposited v1 → v2), a step then a 1→2 split (AddressChanged v1
// → v2 → StreetChanged + CityChanged), a merge (EmailAdded and
// EmailReplaced → EmailSet) and a retired type (ProfileViewed). Without
// readAddressV1 the AddressChanged v1 → v2 step is missing, as in a build
// that dropped it too early.
func registerEvolved(rt *runtime.Runtime, readAddressV1 bool) error {
	errs := []error{
		runtime.RegisterEvent[evolvedFunds](rt, "FundsDeposited", 2),
		runtime.RegisterEvent[evolvedStreet](rt, "StreetChanged", 1),
		runtime.RegisterEvent[evolvedCity](rt, "CityChanged", 1),
		runtime.RegisterEvent[evolvedEmail](rt, "EmailSet", 1),
		runtime.RegisterAggregate(rt, runtime.Aggregate[evolvedMember]{
			Name:    "member",
			Initial: func() evolvedMember { return evolvedMember{} },
			Decide: func(_ evolvedMember, cmd any) ([]any, error) {
				if c, ok := cmd.(evolvedDeposit); ok {
					return []any{evolvedFunds{Cents: c.Cents}}, nil
				}
				return nil, fmt.Errorf("member: unknown command %T", cmd)
			},
			Evolve: func(s evolvedMember, ev any) evolvedMember {
				switch e := ev.(type) {
				case evolvedFunds:
					s.Cents += e.Cents
				case evolvedStreet:
					s.Street = e.Street
				case evolvedCity:
					s.City = e.City
				case evolvedEmail:
					s.Email = e.Email
				}
				s.Folds++
				return s
			},
		}),
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "MoneyDeposited", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "FundsDeposited", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				return []runtime.Upcast{{Type: "FundsDeposited", SchemaVersion: 1, Data: data}}, nil
			},
		}),
		runtime.RegisterUpcaster(rt, "FundsDeposited", 1, func(data json.RawMessage) (json.RawMessage, error) {
			var d struct {
				Amount int64 `json:"amount"`
			}
			if err := json.Unmarshal(data, &d); err != nil {
				return nil, err
			}
			return json.Marshal(evolvedFunds{Cents: 100 * d.Amount})
		}),
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "AddressChanged", FromVersion: 2,
			Into: []runtime.EventVersion{{Type: "StreetChanged", SchemaVersion: 1}, {Type: "CityChanged", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				var a struct{ Street, City string }
				if err := json.Unmarshal(data, &a); err != nil {
					return nil, err
				}
				street, err := upcastInto("StreetChanged", 1, evolvedStreet{Street: a.Street})
				if err != nil {
					return nil, err
				}
				city, err := upcastInto("CityChanged", 1, evolvedCity{City: a.City})
				return append(street, city...), err
			},
		}),
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "EmailAdded", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "EmailSet", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				var e evolvedEmail
				if err := json.Unmarshal(data, &e); err != nil {
					return nil, err
				}
				return upcastInto("EmailSet", 1, e)
			},
		}),
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "EmailReplaced", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "EmailSet", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				var e struct {
					New string `json:"new"`
				}
				if err := json.Unmarshal(data, &e); err != nil {
					return nil, err
				}
				return upcastInto("EmailSet", 1, evolvedEmail{Email: e.New})
			},
		}),
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "ProfileViewed", FromVersion: 1,
			Upcast: func(json.RawMessage) ([]runtime.Upcast, error) { return nil, nil },
		}),
	}
	if readAddressV1 {
		errs = append(errs, runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "AddressChanged", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "AddressChanged", SchemaVersion: 2}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				var a struct {
					Line string `json:"line"`
				}
				if err := json.Unmarshal(data, &a); err != nil {
					return nil, err
				}
				street, city, _ := strings.Cut(a.Line, "|")
				return upcastInto("AddressChanged", 2, struct{ Street, City string }{street, city})
			},
		}))
	}
	return errors.Join(errs...)
}

// TestCLIOnAnEvolvedJournal is issue 43's "done when" for the command
// line: on a journal holding the stored shapes a rename, a 1→2 split, a
// merge and a retired type upcast, the read verbs an operator runs work.
// `scribe types` lists every stored type version with its count and the
// recorded builds that read it; `scribe upcast check` exits 1 naming type,
// version and first event for a recorded build missing one upcaster, and 0
// for the build that has it; the service's own check (scribe.UpcastCheck)
// decodes every event through the split and the merge the same way;
// `scribe stream show` prints the stored events as stored; and `scribe
// verify` exits 0 before and after a build recovered a stream through the
// upcasters and appended to it: upcasting never rewrites the stored bytes.
func TestCLIOnAnEvolvedJournal(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	// scribe.UpcastCheck opens the key store without creating it (VerifyOnly).
	keys := postgres.KeyStoreConfig{Schema: postgres.KeyStoreSchemaFor(f.schema)}
	require.NoError(t, postgres.MigrateKeyStore(ctx, f.pool, keys))
	t.Cleanup(func() {
		_, _ = f.pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+keys.Schema+`" CASCADE`)
	})

	stored := func(tag string, events ...journal.Event) []journal.Record {
		t.Helper()
		for i := range events {
			events[i].ID = journal.NewEventID()
			events[i].Tags = []journal.Tag{journal.Tag(tag)}
		}
		res, err := f.journal.Append(ctx, events, journal.AppendOptions{})
		require.NoError(t, err)
		return res.Records
	}
	ev := func(typ string, version int, data string) journal.Event {
		return journal.Event{Type: typ, SchemaVersion: version, Data: json.RawMessage(data)}
	}
	old := stored("member:m1",
		ev("MoneyDeposited", 1, `{"amount":3}`),
		ev("AddressChanged", 1, `{"line":"1 Main St|Springfield"}`),
		ev("EmailAdded", 1, `{"email":"a@example.com"}`),
		ev("ProfileViewed", 1, `{}`),
		ev("EmailReplaced", 1, `{"new":"b@example.com"}`),
	)
	old = append(old, stored("member:m2",
		ev("AddressChanged", 2, `{"Street":"3 Oak St","City":"Ogdenville"}`),
		ev("FundsDeposited", 1, `{"amount":2}`),
		ev("AddressChanged", 1, `{"line":"4 Elm St|Capital City"}`),
	)...)
	firstAddressV1 := old[1].ID.String()

	// fields is a regular expression matching s's words with any spacing
	// between them, as a table prints them.
	fields := func(s string) string {
		words := strings.Fields(s)
		for i, w := range words {
			words[i] = regexp.QuoteMeta(w)
		}
		return strings.Join(words, `\s+`)
	}
	verify := func(events int) {
		t.Helper()
		res := f.scribe(t, "verify")
		require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
		require.Contains(t, res.stdout, fmt.Sprintf("verified 2 streams, %d events: every chain is intact", events))
	}
	verify(8)

	typeRows := func(want map[string]string) {
		t.Helper()
		res := f.scribe(t, "types")
		require.Equal(t, exitOK, res.code, res.stderr)
		for row, readBy := range want {
			require.Regexp(t, `(?m)^`+fields(row)+`\s+\S+\s+`+fields(readBy)+`$`, res.stdout, "scribe types:\n%s", res.stdout)
		}
	}
	// Stored type versions with their counts: type, version, events.
	storedVersions := []string{
		"AddressChanged 1 2", "AddressChanged 2 1", "EmailAdded 1 1",
		"EmailReplaced 1 1", "FundsDeposited 1 1", "MoneyDeposited 1 1", "ProfileViewed 1 1",
	}
	res := f.scribe(t, "types")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "6 event types, 8 events")
	for _, row := range storedVersions {
		require.Regexp(t, `(?m)^`+fields(row)+`\s+-\s+no build recorded$`, res.stdout, "scribe types:\n%s", res.stdout)
	}

	// build starts a runtime with the member's registrations as a service's
	// deploy does: Start refuses what it cannot read, or records its types
	// and what it reads.
	build := func(node string, readAddressV1, tolerate bool) (*runtime.Runtime, error) {
		t.Helper()
		rt, err := runtime.New(ctx, runtime.Config{Journal: f.journal, NodeID: node, TolerateUnreadableTypes: tolerate})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = rt.Shutdown(ctx)
		})
		require.NoError(t, registerEvolved(rt, readAddressV1))
		return rt, rt.Start(ctx)
	}
	// serviceCheck runs the service's own check, scribe.UpcastCheck, with
	// the member's registrations.
	serviceCheck := func(readAddressV1 bool) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := scribe.UpcastCheck(ctx, scribe.UpcastCheckParams{
			Name: "member upcast check", Args: []string{"-db", f.url, "-schema", f.schema},
			Register: func(rt *runtime.Runtime) error { return registerEvolved(rt, readAddressV1) },
			Getenv:   func(string) string { return "" }, Stdout: &out, Stderr: &errOut,
		})
		return code, out.String(), errOut.String()
	}

	// A build without the AddressChanged v1 upcaster refuses to start
	// unless told to tolerate it; tolerated, it is recorded.
	_, err := build("node-early", false, false)
	require.ErrorIs(t, err, runtime.ErrConfiguration)
	require.ErrorContains(t, err, "the journal holds AddressChanged v1, which this build cannot read")
	early, err := build("node-early", false, true)
	require.NoError(t, err)
	res = f.scribe(t, "upcast", "check")
	require.Equal(t, exitFailure, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Regexp(t, `(?m)^AddressChanged\s+1\s+2\s+NO\s+`+firstAddressV1+`$`, res.stdout)
	require.Equal(t, 1, strings.Count(res.stdout, " NO "), "only AddressChanged v1 is unread:\n%s", res.stdout)
	for _, row := range storedVersions[1:] {
		require.Regexp(t, `(?m)^`+fields(row)+`\s+yes\s*$`, res.stdout)
	}
	require.Contains(t, res.stdout, "build "+early.BuildID())
	require.Contains(t, res.stdout, "cannot read 1 stored type versions")
	code, out, errOut := serviceCheck(false)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, "AddressChanged v1: 2 failed, first event "+firstAddressV1)
	require.Equal(t, 1, strings.Count(errOut, " failed, first event "), "the split, the merge, the rename's chain and the retired type decode:\n%s", errOut)
	typeRows(map[string]string{
		"AddressChanged 1 2": "0 of 1 builds", "AddressChanged 2 1": "1 of 1 builds",
		"MoneyDeposited 1 1": "1 of 1 builds", "ProfileViewed 1 1": "1 of 1 builds",
	})

	// The build with every upcaster starts, recovers m1 through the rename,
	// the split, the merge and the retired event, and appends to it.
	full, err := build("node-full", true, false)
	require.NoError(t, err)
	got, err := runtime.ExecuteTyped[evolvedMember](ctx, full, runtime.Target{Aggregate: "member", ID: "m1"}, evolvedDeposit{Cents: 50})
	require.NoError(t, err)
	require.Equal(t, evolvedMember{Cents: 350, Street: "1 Main St", City: "Springfield", Email: "b@example.com", Folds: 6}, got.State,
		"5 stored events are 5 values (1, 2, 1, 0 and 1), then the new deposit")
	require.Equal(t, uint64(6), got.Version)
	st, err := runtime.State[evolvedMember](ctx, full, runtime.Target{Aggregate: "member", ID: "m2"})
	require.NoError(t, err)
	require.Equal(t, evolvedMember{Cents: 200, Street: "4 Elm St", City: "Capital City", Folds: 5}, st.State)

	res = f.scribe(t, "upcast", "check")
	require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, "build "+full.BuildID()+" ")
	require.Contains(t, res.stdout, "reads every stored type version")
	require.Regexp(t, `(?m)^FundsDeposited\s+2\s+1\s+yes\s*$`, res.stdout)
	res = f.scribe(t, "upcast", "check", "-build", early.BuildID())
	require.Equal(t, exitFailure, res.code, "the early build still cannot read AddressChanged v1")
	code, out, errOut = serviceCheck(true)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "9 events checked of 9: every one decodes")
	require.Regexp(t, `(?m)^AddressChanged\s+1\s+2\s+2\s+0\s*$`, out)

	res = f.scribe(t, "types")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "6 event types, 9 events")
	typeRows(map[string]string{
		"AddressChanged 1 2": "1 of 2 builds", "AddressChanged 2 1": "2 of 2 builds",
		"EmailAdded 1 1": "2 of 2 builds", "EmailReplaced 1 1": "2 of 2 builds",
		"FundsDeposited 1 1": "2 of 2 builds", "FundsDeposited 2 1": "2 of 2 builds",
		"MoneyDeposited 1 1": "2 of 2 builds", "ProfileViewed 1 1": "2 of 2 builds",
		"StreetChanged 1 0": "2 of 2 builds", "CityChanged 1 0": "2 of 2 builds", "EmailSet 1 0": "2 of 2 builds",
	})

	// The stored events are as stored: stream show prints their types,
	// versions and bytes, and the journal returns the same bytes.
	res = f.scribe(t, "stream", "show", "member:m1")
	require.Equal(t, exitOK, res.code, res.stderr)
	for i, r := range old[:5] {
		require.Contains(t, res.stdout, fmt.Sprintf("version %d  position %s", i+1, r.Position))
		require.Contains(t, res.stdout, fmt.Sprintf("%s (schema %d)\n  id        %s", r.Type, r.SchemaVersion, r.ID))
		require.Contains(t, res.stdout, "  data      "+string(r.Data)+"\n")
	}
	require.Contains(t, res.stdout, `FundsDeposited (schema 2)`, "the new event, as this build wrote it")
	for _, r := range old {
		now, err := f.journal.ReadEvent(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, []any{r.Type, r.SchemaVersion, r.Position, string(r.Data)}, []any{now.Type, now.SchemaVersion, now.Position, string(now.Data)})
	}
	verify(9)
}
