package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// The member aggregate of the upcasting tests. Its first release stored
// MoneyDeposited, AddressChanged (one line), EmailAdded, EmailReplaced and
// ProfileViewed; this build reads them as
//   - MoneyDeposited v1 renamed FundsDeposited v1, then upcast one-to-one to
//     v2 (amounts in cents): a rename, then a chain;
//   - AddressChanged v1 upcast to AddressChanged v2 (street and city), then
//     split into StreetChanged and CityChanged: a 1→2 split after a step;
//   - EmailAdded and EmailReplaced merged into EmailSet;
//   - ProfileViewed retired.
type (
	FundsDeposited struct {
		Cents int64 `json:"cents"`
	}
	StreetChanged struct {
		Street string `json:"street"`
	}
	CityChanged struct {
		City string `json:"city"`
	}
	EmailSet struct {
		Email string `json:"email"`
	}
	Member struct {
		Cents  int64  `json:"cents"`
		Street string `json:"street"`
		City   string `json:"city"`
		Email  string `json:"email"`
		// Folds counts the events Evolve applied.
		Folds int `json:"folds"`
	}
	DepositFunds struct{ Cents int64 }
	GetMember    struct{}
)

func evolveMember(s Member, ev any) Member {
	switch e := ev.(type) {
	case FundsDeposited:
		s.Cents += e.Cents
	case StreetChanged:
		s.Street = e.Street
	case CityChanged:
		s.City = e.City
	case EmailSet:
		s.Email = e.Email
	default:
		panic(fmt.Sprintf("member: Evolve got %T", ev)) // never the runtime's wrapper
	}
	s.Folds++
	return s
}

var memberAggregate = runtime.Aggregate[Member]{
	Name:    "member",
	Initial: func() Member { return Member{} },
	Decide: func(s Member, cmd any) ([]any, error) {
		switch c := cmd.(type) {
		case DepositFunds:
			return []any{FundsDeposited{Cents: c.Cents}}, nil
		case GetMember:
			return nil, nil
		}
		return nil, fmt.Errorf("member: unknown command %T", cmd)
	},
	Evolve: evolveMember,
}

func memberTag(id string) journal.Tag { return journal.NewTag("member", id) }
func member(id string) runtime.Target { return runtime.Target{Aggregate: "member", ID: id} }

// upcastThrough turns data into one Upcast of to, with f rewriting it.
func upcastThrough[From, To any](to runtime.EventVersion, f func(From) To) func(json.RawMessage) ([]runtime.Upcast, error) {
	return func(data json.RawMessage) ([]runtime.Upcast, error) {
		var in From
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, err
		}
		out, err := json.Marshal(f(in))
		if err != nil {
			return nil, err
		}
		return []runtime.Upcast{{Type: to.Type, SchemaVersion: to.SchemaVersion, Data: out}}, nil
	}
}

type (
	oldDeposit struct {
		Amount int64 `json:"amount"`
	}
	oldAddressV1 struct {
		Line string `json:"line"` // "street|city"
	}
	oldAddressV2 struct {
		Street string `json:"street"`
		City   string `json:"city"`
	}
	oldEmailAdded struct {
		Email string `json:"email"`
	}
	oldEmailReplaced struct {
		New string `json:"new"`
	}
)

// registerMember registers the member aggregate with its events and
// upcasters on rt.
func registerMember(t testing.TB, rt *runtime.Runtime) {
	t.Helper()
	require.NoError(t, errors.Join(
		runtime.RegisterEvent[FundsDeposited](rt, "FundsDeposited", 2),
		runtime.RegisterEvent[StreetChanged](rt, "StreetChanged", 1),
		runtime.RegisterEvent[CityChanged](rt, "CityChanged", 1),
		runtime.RegisterEvent[EmailSet](rt, "EmailSet", 1),
		runtime.RegisterAggregate(rt, memberAggregate),
		// A rename, then the one-to-one step of the new name.
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "MoneyDeposited", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "FundsDeposited", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				return []runtime.Upcast{{Type: "FundsDeposited", SchemaVersion: 1, Data: data}}, nil
			},
		}),
		runtime.RegisterUpcaster(rt, "FundsDeposited", 1, func(data json.RawMessage) (json.RawMessage, error) {
			var d oldDeposit
			if err := json.Unmarshal(data, &d); err != nil {
				return nil, err
			}
			return json.Marshal(FundsDeposited{Cents: 100 * d.Amount})
		}),
		// A step of the old type, then a split.
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "AddressChanged", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "AddressChanged", SchemaVersion: 2}},
			Upcast: upcastThrough(runtime.EventVersion{Type: "AddressChanged", SchemaVersion: 2}, func(a oldAddressV1) oldAddressV2 {
				street, city, _ := strings.Cut(a.Line, "|")
				return oldAddressV2{Street: street, City: city}
			}),
		}),
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "AddressChanged", FromVersion: 2,
			Into: []runtime.EventVersion{{Type: "StreetChanged", SchemaVersion: 1}, {Type: "CityChanged", SchemaVersion: 1}},
			Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
				var a oldAddressV2
				if err := json.Unmarshal(data, &a); err != nil {
					return nil, err
				}
				street, _ := json.Marshal(StreetChanged{Street: a.Street})
				city, _ := json.Marshal(CityChanged{City: a.City})
				return []runtime.Upcast{
					{Type: "StreetChanged", SchemaVersion: 1, Data: street},
					{Type: "CityChanged", SchemaVersion: 1, Data: city},
				}, nil
			},
		}),
		// A merge: two old types into one.
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "EmailAdded", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "EmailSet", SchemaVersion: 1}},
			Upcast: upcastThrough(runtime.EventVersion{Type: "EmailSet", SchemaVersion: 1}, func(e oldEmailAdded) EmailSet {
				return EmailSet{Email: e.Email}
			}),
		}),
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "EmailReplaced", FromVersion: 1,
			Into: []runtime.EventVersion{{Type: "EmailSet", SchemaVersion: 1}},
			Upcast: upcastThrough(runtime.EventVersion{Type: "EmailSet", SchemaVersion: 1}, func(e oldEmailReplaced) EmailSet {
				return EmailSet{Email: e.New}
			}),
		}),
		// A retired type.
		runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
			Type: "ProfileViewed", FromVersion: 1,
			Upcast: func(json.RawMessage) ([]runtime.Upcast, error) { return nil, nil },
		}),
	))
}

// appendOld appends events of the first release's shapes to a member's
// stream, as that release stored them, bypassing the runtime.
func appendOld(t testing.TB, j journal.Journal, id string, events ...journal.Event) []journal.Record {
	t.Helper()
	for i := range events {
		events[i].ID = journal.NewEventID()
		events[i].Tags = []journal.Tag{memberTag(id)}
	}
	res, err := j.Append(context.Background(), events, journal.AppendOptions{})
	require.NoError(t, err)
	return res.Records
}

func oldEvent(typ string, version int, data string) journal.Event {
	return journal.Event{Type: typ, SchemaVersion: version, Data: json.RawMessage(data)}
}

// upcastEnv is an env with the projection store of its database.
type upcastEnv struct {
	*env
	// project runs the values projection until it applied the record at
	// last and returns its rows.
	project func(t *testing.T, rt *runtime.Runtime, last journal.Position) valueRows
}

func TestUpcastMemory(t *testing.T) {
	t.Parallel()
	e := memoryEnv()
	testUpcast(t, upcastEnv{env: e, project: func(t *testing.T, rt *runtime.Runtime, last journal.Position) valueRows {
		return runValuesProjection(t, rt, e.j, projection.NewMemoryStore(), last)
	}})
}

func TestUpcastPostgres(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	pool, schema := pgtest.Pool(t)
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(context.Background(), pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	snaps, err := postgres.NewSnapshotStore(pool, cfg)
	require.NoError(t, err)
	store, err := postgres.NewProjectionStore(pool, cfg)
	require.NoError(t, err)
	testUpcast(t, upcastEnv{env: &env{j: j, s: j, snaps: snaps}, project: func(t *testing.T, rt *runtime.Runtime, last journal.Position) valueRows {
		return runValuesProjection(t, rt, j, store, last)
	}})
}

// testUpcast reads a stream of old-shape events (a rename, a split, a
// merge, a retired type) through every read path: aggregate recovery,
// before and after a snapshot, State, a DCB fold, Decoding, a projection
// and CheckStored; the stored records keep their positions, versions and
// bytes, and the stream's hash chain verifies.
func testUpcast(t *testing.T, e upcastEnv) {
	ctx := t.Context()
	stream := journal.StreamID{Tag: memberTag("m1")}
	old := appendOld(t, e.j, "m1",
		oldEvent("MoneyDeposited", 1, `{"amount":3}`),
		oldEvent("AddressChanged", 1, `{"line":"1 Main St|Springfield"}`),
		oldEvent("EmailAdded", 1, `{"email":"a@example.com"}`),
		oldEvent("ProfileViewed", 1, `{}`),
		oldEvent("EmailReplaced", 1, `{"new":"b@example.com"}`),
	)
	want := Member{Cents: 300, Street: "1 Main St", City: "Springfield", Email: "b@example.com", Folds: 5}

	// Recovery: 5 stored events are 5 values (1, 2, 1, 0 and 1).
	rt1 := e.start(t, func(c *runtime.Config) { c.SnapshotPolicy = &snapshots.Policy{OnPassivation: true} })
	registerMember(t, rt1)
	got, err := runtime.ExecuteTyped[Member](ctx, rt1, member("m1"), GetMember{})
	require.NoError(t, err)
	require.Equal(t, want, got.State)
	require.Equal(t, uint64(5), got.Version, "the stream's version counts stored events, not values")
	got, err = runtime.ExecuteTyped[Member](ctx, rt1, member("m1"), DepositFunds{Cents: 50})
	require.NoError(t, err)
	want.Cents, want.Folds = 350, 6
	require.Equal(t, want, got.State)
	require.Equal(t, uint64(6), got.Version)
	require.NoError(t, rt1.Shutdown(ctx))
	infos, err := e.snaps.List(ctx, stream)
	require.NoError(t, err)
	require.Len(t, infos, 1, "a snapshot on passivation")
	require.Equal(t, uint64(6), infos[0].Version)

	// After a snapshot: mark it, append more old events, recover from the
	// mark and the upcast tail.
	marked := want
	marked.Folds = 1000
	data, err := runtime.SnapshotState(nil, marked)
	require.NoError(t, err)
	require.NoError(t, e.snaps.Save(ctx, snapshots.Snapshot{Stream: stream, Version: 6, SchemaVersion: 1, State: data, CreatedAt: time.Now().UTC()}))
	tail := appendOld(t, e.j, "m1",
		oldEvent("AddressChanged", 1, `{"line":"2 Elm St|Shelbyville"}`),
		oldEvent("ProfileViewed", 1, `{}`),
		oldEvent("MoneyDeposited", 1, `{"amount":1}`),
	)
	rt2 := e.start(t, func(c *runtime.Config) { c.NodeID = "node-2"; c.SnapshotPolicy = &snapshots.Policy{} })
	registerMember(t, rt2)
	got, err = runtime.ExecuteTyped[Member](ctx, rt2, member("m1"), GetMember{})
	require.NoError(t, err)
	want = Member{Cents: 450, Street: "2 Elm St", City: "Shelbyville", Email: "b@example.com", Folds: 1003}
	require.Equal(t, want, got.State, "the snapshot's mark and the tail's 3 values")
	require.Equal(t, uint64(9), got.Version)

	// State folds the same way, with no actor; a stream never snapshotted
	// folds from its first event.
	st, err := runtime.State[Member](ctx, rt2, member("m1"))
	require.NoError(t, err)
	require.Equal(t, want, st.State)
	require.Equal(t, uint64(9), st.Version)
	m2 := appendOld(t, e.j, "m2", oldEvent("AddressChanged", 1, `{"line":"3 Oak St|Ogdenville"}`), oldEvent("EmailReplaced", 1, `{"new":"c@example.com"}`))
	st, err = runtime.State[Member](ctx, rt2, member("m2"))
	require.NoError(t, err)
	require.Equal(t, Member{Street: "3 Oak St", City: "Ogdenville", Email: "c@example.com", Folds: 3}, st.State)
	require.Equal(t, uint64(2), st.Version)

	// A DCB fold over the new types finds the old names and sees only the
	// values its query names (not StreetChanged), in order.
	type audit struct{ ID string }
	var (
		mu   sync.Mutex
		seen []string
	)
	auditDCB := runtime.MustRegisterDCB(rt2, runtime.DCB[audit, []string]{
		Name: "Audit",
		Query: func(c audit) journal.Query {
			return journal.Query{Items: []journal.QueryItem{{Types: []string{"FundsDeposited", "CityChanged", "EmailSet"}, Tags: []journal.Tag{memberTag(c.ID)}}}}
		},
		Evolve: func(_ audit, s []string, ev runtime.DCBEvent) []string {
			return append(slices.Clone(s), fmt.Sprintf("%s@%d %v", ev.Record.Type, ev.Record.Version(memberTag("m1")), ev.Value))
		},
		Decide: func(_ audit, s []string) ([]any, error) {
			mu.Lock()
			defer mu.Unlock()
			seen = s
			return nil, nil
		},
	})
	_, err = auditDCB.Execute(ctx, audit{ID: "m1"})
	require.NoError(t, err)
	mu.Lock()
	require.Equal(t, []string{
		"MoneyDeposited@1 {300}",
		"AddressChanged@2 {Springfield}",
		"EmailAdded@3 {a@example.com}",
		"EmailReplaced@5 {b@example.com}",
		"FundsDeposited@6 {50}",
		"AddressChanged@7 {Shelbyville}",
		"MoneyDeposited@9 {100}",
	}, seen)
	mu.Unlock()

	// Decoding: a split gives two values at one position, a retired event
	// none; the one-value reads refuse both.
	var decoded []string
	for d, err := range rt2.Decoding(e.j.ReadStream(ctx, stream, 1, 0)) {
		require.NoError(t, err)
		decoded = append(decoded, fmt.Sprintf("%d.%d %s %v", d.Record.Version(stream.Tag), d.Index, d.Type, d.Value))
	}
	require.Equal(t, []string{
		"1.0 FundsDeposited {300}",
		"2.0 StreetChanged {1 Main St}", "2.1 CityChanged {Springfield}",
		"3.0 EmailSet {a@example.com}",
		"5.0 EmailSet {b@example.com}",
		"6.0 FundsDeposited {50}",
		"7.0 StreetChanged {2 Elm St}", "7.1 CityChanged {Shelbyville}",
		"9.0 FundsDeposited {100}",
	}, decoded)
	_, err = rt2.DecodeRecord(ctx, old[1])
	require.ErrorIs(t, err, runtime.ErrNotOneEvent)
	require.ErrorContains(t, err, "upcasts to 2 events [StreetChanged CityChanged]")
	_, err = rt2.Decode(old[3])
	require.ErrorIs(t, err, runtime.ErrNotOneEvent)
	v, err := runtime.DecodeAs[FundsDeposited](rt2, old[0])
	require.NoError(t, err)
	require.Equal(t, FundsDeposited{Cents: 300}, v)
	q := rt2.StoredQuery(journal.Query{Items: []journal.QueryItem{{Types: []string{"EmailSet"}}}})
	require.Equal(t, []string{"EmailSet", "EmailAdded", "EmailReplaced"}, q.Items[0].Types)
	var emails []string
	for d, err := range rt2.Decoding(e.j.Read(ctx, q, journal.ReadOptions{})) {
		require.NoError(t, err)
		emails = append(emails, d.Value.(EmailSet).Email)
	}
	require.Equal(t, []string{"a@example.com", "b@example.com", "c@example.com"}, emails)

	// A projection applies each value exactly once, also when its first
	// attempt at every batch fails after writing.
	last := m2[len(m2)-1].Position
	rows := e.project(t, rt2, last)
	require.Equal(t, 12, rows.count, "9 values of m1 and 3 of m2, each applied once")
	require.Equal(t, "StreetChanged", rows.values[fmt.Sprintf("%s/0", old[1].Position)])
	require.Equal(t, "CityChanged", rows.values[fmt.Sprintf("%s/1", old[1].Position)])
	require.NotContains(t, rows.values, fmt.Sprintf("%s/0", old[3].Position), "a retired event projects nothing")
	require.Len(t, rows.values, 12)

	// CheckStored decodes every stored event; the records are as stored and
	// the chain verifies.
	check, err := runtime.CheckStored(ctx, rt2)
	require.NoError(t, err)
	require.NoError(t, check.Err())
	require.Equal(t, uint64(11), check.Events)
	var kinds []string
	for _, tc := range check.Types {
		kinds = append(kinds, fmt.Sprintf("%s v%d: %d", tc.Type, tc.SchemaVersion, tc.Events))
	}
	require.Equal(t, []string{"AddressChanged v1: 3", "EmailAdded v1: 1", "EmailReplaced v1: 2", "FundsDeposited v2: 1", "MoneyDeposited v1: 2", "ProfileViewed v1: 2"}, kinds)
	for _, rec := range append(old, tail...) {
		stored, err := e.j.ReadEvent(ctx, rec.ID)
		require.NoError(t, err)
		require.Equal(t, rec.Type, stored.Type)
		require.Equal(t, rec.SchemaVersion, stored.SchemaVersion)
		require.Equal(t, rec.Position, stored.Position)
		require.JSONEq(t, string(rec.Data), string(stored.Data), "stored data is never rewritten")
	}
	n, err := journal.VerifyStream(ctx, e.j, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(9), n)
}

// valueRows is what the values projection wrote.
type valueRows struct {
	count  int               // values applied
	values map[string]string // "position/index" → type
}

// runValuesProjection runs, on store and j, a projection of every event that
// writes one row per value a record decodes to and counts the values; the
// first attempt at each batch fails after its writes. It stops once the
// record at last is applied.
func runValuesProjection[Tx any](t *testing.T, rt *runtime.Runtime, j journal.Journal, store projection.RowStore[Tx], last journal.Position) valueRows {
	t.Helper()
	const name = "member-values"
	rp := projection.RowProjection{
		Name: name, Version: 1,
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			n := 0
			if doc, ok, err := rows.Get(ctx, "count", "all"); err != nil {
				return err
			} else if ok {
				if err := json.Unmarshal(doc, &n); err != nil {
					return err
				}
			}
			for _, rec := range b.Records {
				values, err := rt.DecodeValues(ctx, rec)
				if err != nil {
					return err
				}
				for _, d := range values {
					doc, _ := json.Marshal(d.Type)
					if err := rows.Put(ctx, "values", fmt.Sprintf("%s/%d", d.Record.Position, d.Index), doc); err != nil {
						return err
					}
					n++
				}
			}
			doc, _ := json.Marshal(n)
			if err := rows.Put(ctx, "count", "all", doc); err != nil {
				return err
			}
			if b.Attempt == 1 {
				return errors.New("test: the first attempt fails after its writes")
			}
			return nil
		},
	}
	r, err := projection.NewRunner(j, store, projection.Bind(store, rp), projection.Options{Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitCtx, waitCancel := context.WithTimeout(t.Context(), time.Minute)
	defer waitCancel()
	err = r.WaitFor(waitCtx, last)
	cancel()
	<-done
	require.NoError(t, err)

	read := store.ReadRows(r.Key())
	var out valueRows
	doc, ok, err := read.Get(t.Context(), "count", "all")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, json.Unmarshal(doc, &out.count))
	out.values = map[string]string{}
	rows, err := read.List(t.Context(), "values", "", 1000)
	require.NoError(t, err)
	for _, row := range rows {
		var typ string
		require.NoError(t, json.Unmarshal(row.Doc, &typ))
		out.values[row.Key] = typ
	}
	return out
}

// What does not upcast fails the read naming the event, and CheckStored
// names its type and version: a version no upcaster reads, an upcaster
// that returns a type it did not declare, one that fails.
func TestUpcastFailures(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := memoryEnv()
	rt := e.start(t)
	registerMember(t, rt)
	require.NoError(t, runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
		Type: "NicknameSet", FromVersion: 1,
		Into: []runtime.EventVersion{{Type: "EmailSet", SchemaVersion: 1}},
		Upcast: func(data json.RawMessage) ([]runtime.Upcast, error) {
			return []runtime.Upcast{{Type: "CityChanged", SchemaVersion: 1, Data: data}}, nil
		},
	}))
	require.NoError(t, runtime.RegisterEventUpcaster(rt, runtime.EventUpcaster{
		Type: "PhoneSet", FromVersion: 1,
		Into:   []runtime.EventVersion{{Type: "EmailSet", SchemaVersion: 1}},
		Upcast: func(json.RawMessage) ([]runtime.Upcast, error) { return nil, errBadUpcast },
	}))
	recs := appendOld(t, e.j, "m9",
		oldEvent("AddressChanged", 3, `{}`),
		oldEvent("NicknameSet", 1, `{}`),
		oldEvent("PhoneSet", 1, `{}`),
		oldEvent("MoneyDeposited", 1, `{"amount":1}`),
	)
	_, err := rt.DecodeValues(ctx, recs[0])
	require.ErrorIs(t, err, runtime.ErrUnknownEvent)
	require.ErrorContains(t, err, recs[0].ID.String())
	_, err = rt.DecodeValues(ctx, recs[1])
	require.ErrorContains(t, err, "the upcaster of NicknameSet v1 returned CityChanged v1, not in its Into [EmailSet v1]")
	_, err = rt.DecodeValues(ctx, recs[2])
	require.ErrorIs(t, err, errBadUpcast)
	require.ErrorContains(t, err, recs[2].ID.String())

	_, err = runtime.ExecuteTyped[Member](ctx, rt, member("m9"), GetMember{})
	require.ErrorContains(t, err, recs[0].ID.String(), "recovery fails on the first event it cannot read")

	check, err := runtime.CheckStored(ctx, rt)
	require.NoError(t, err)
	require.Equal(t, uint64(3), check.Failed)
	for _, tc := range check.Types {
		if tc.Type == "MoneyDeposited" {
			require.Nil(t, tc.FirstFailure)
			continue
		}
		require.NotNil(t, tc.FirstFailure, tc.Type)
	}
	require.ErrorContains(t, check.Err(), fmt.Sprintf("AddressChanged v3: 1 failed, first event %s", recs[0].ID))
}
