package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// The customer aggregate: its events carry personal data of the customer.

type RegisterCustomer struct{ ID, Name, Email string }
type AddNote struct{ Note string }
type Poke struct{} // decides a Poked event: no personal data

type Poked struct {
	At int `json:"at"`
}

type CustomerRegistered struct {
	CustomerID string `json:"customerId"`
	Name       string `json:"name"`
	Email      string `json:"email"`
}

// NoteAdded's subject is the value of its stream's customer tag.
type NoteAdded struct {
	Note string `json:"note"`
}

type Customer struct {
	ID    string   `json:"id"`
	Name  string   `json:"name"`
	Email string   `json:"email"`
	Notes []string `json:"notes"`
}

func customerAggregate() runtime.Aggregate[Customer] {
	return runtime.Aggregate[Customer]{
		Name:    "customer",
		Initial: func() Customer { return Customer{} },
		Decide: func(s Customer, cmd any) ([]any, error) {
			switch c := cmd.(type) {
			case RegisterCustomer:
				return []any{CustomerRegistered{CustomerID: c.ID, Name: c.Name, Email: c.Email}}, nil
			case AddNote:
				return []any{NoteAdded{Note: c.Note}}, nil
			case Poke:
				return []any{Poked{At: len(s.Notes)}}, nil
			case Get:
				return nil, nil
			}
			return nil, errors.New("customer: unknown command")
		},
		Evolve: func(s Customer, ev any) Customer {
			switch e := ev.(type) {
			case CustomerRegistered:
				s.ID, s.Name, s.Email = e.CustomerID, e.Name, e.Email
			case NoteAdded:
				s.Notes = append(append([]string(nil), s.Notes...), e.Note)
			}
			return s
		},
	}
}

// Marked personal data: tests grep every output for these.
const (
	secretName  = "Ottilie Plaintext-Marker"
	secretEmail = "ottilie.marker@example.invalid"
	secretNote  = "note-marker-7f3a"
)

type erasureEnv struct {
	*env
	keys *erasure.MemoryKeyStore
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newErasureEnv() *erasureEnv {
	return &erasureEnv{env: memoryEnv(), keys: erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{}), logs: &syncBuffer{}}
}

func (e *erasureEnv) startCustomers(t *testing.T, node string) *runtime.Runtime {
	t.Helper()
	p := snapshots.Policy{Every: 1, OnPassivation: true}
	rt := e.start(t, func(c *runtime.Config) {
		c.KeyStore = e.keys
		c.NodeID = node
		c.SnapshotPolicy = &p
		c.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	require.NoError(t, runtime.RegisterEvent[CustomerRegistered](rt, "CustomerRegistered", 1,
		runtime.WithPersonalData(runtime.PersonalData{Fields: []string{"name", "email"}, SubjectField: "customerId"})))
	require.NoError(t, runtime.RegisterEvent[NoteAdded](rt, "NoteAdded", 1,
		runtime.WithPersonalData(runtime.PersonalData{Fields: []string{"note"}, SubjectTagGroup: "customer"})))
	require.NoError(t, runtime.RegisterEvent[Poked](rt, "Poked", 1))
	require.NoError(t, runtime.RegisterAggregate(rt, customerAggregate()))
	return rt
}

func customer(id string) runtime.Target { return runtime.Target{Aggregate: "customer", ID: id} }

func TestPersonalDataRegistration(t *testing.T) {
	t.Parallel()
	rt := memoryEnv().start(t)
	err := runtime.RegisterEvent[CustomerRegistered](rt, "CustomerRegistered", 1,
		runtime.WithPersonalData(runtime.PersonalData{Fields: []string{"name"}, SubjectField: "customerId"}))
	require.ErrorIs(t, err, runtime.ErrRegistration)
	require.Contains(t, err.Error(), "Config.KeyStore is nil")

	ks := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	rt = memoryEnv().start(t, func(c *runtime.Config) { c.KeyStore = ks })
	for _, p := range []runtime.PersonalData{
		{SubjectField: "customerId"},
		{Fields: []string{"name"}},
		{Fields: []string{"name"}, SubjectField: "customerId", SubjectTagGroup: "customer"},
		{Fields: []string{"nmae"}, SubjectField: "customerId"},
		{Fields: []string{"name"}, SubjectField: "customer_id"},
		{Fields: []string{"customerId"}, SubjectField: "customerId"},
	} {
		err := runtime.RegisterEvent[CustomerRegistered](rt, "CustomerRegistered", 1, runtime.WithPersonalData(p))
		require.ErrorIs(t, err, runtime.ErrRegistration, "%+v", p)
	}
	_, err = rt.Erase(context.Background(), "x", "op")
	require.NoError(t, err, "a runtime with a key store erases")
	_, err = memoryEnv().start(t).Erase(context.Background(), "x", "op")
	require.ErrorIs(t, err, runtime.ErrNoKeyStore)
}

func TestErasureShredsAndFoldsZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newErasureEnv()
	rt := e.startCustomers(t, "node-1")

	res, err := runtime.ExecuteTyped[Customer](ctx, rt, customer("c-1"), RegisterCustomer{ID: "c-1", Name: secretName, Email: secretEmail})
	require.NoError(t, err)
	require.Equal(t, secretName, res.State.Name)
	_, err = rt.Execute(ctx, customer("c-1"), AddNote{Note: secretNote})
	require.NoError(t, err)
	_, err = rt.Execute(ctx, customer("c-2"), RegisterCustomer{ID: "c-2", Name: "Other Person", Email: "other@example.invalid"})
	require.NoError(t, err)

	// The journal holds ciphertext only; decoding opens it.
	stream := customer("c-1").Stream()
	var recs []journal.Record
	for r, err := range e.j.ReadStream(ctx, stream, 1, 0) {
		require.NoError(t, err)
		recs = append(recs, r)
		for _, s := range []string{secretName, secretEmail, secretNote} {
			require.NotContains(t, string(r.Data), s)
		}
		require.Contains(t, string(r.Data), `"$personal"`)
	}
	require.Len(t, recs, 2)
	d, err := rt.DecodeRecord(ctx, recs[0])
	require.NoError(t, err)
	require.Equal(t, CustomerRegistered{CustomerID: "c-1", Name: secretName, Email: secretEmail}, d.Value)
	require.Empty(t, d.Erased)
	bound, err := e.keys.Streams(ctx, "c-1")
	require.NoError(t, err)
	require.Equal(t, []journal.StreamID{stream}, bound)
	require.Eventually(t, func() bool {
		s, err := e.snaps.Load(ctx, stream, math.MaxUint64)
		return err == nil && s.Version == 2
	}, 10*time.Second, 2*time.Millisecond, "the policy snapshots every event (after the append, asynchronously)")

	er, err := rt.Erase(ctx, "c-1", "dpo@example")
	require.NoError(t, err)
	require.False(t, er.Repeat)

	// Snapshots of the bound stream are gone, and none comes back.
	_, err = e.snaps.Load(ctx, stream, math.MaxUint64)
	require.ErrorIs(t, err, snapshots.ErrNotFound)

	// The chain still verifies; the events still decode, with zero fields.
	n, err := journal.VerifyStream(ctx, e.j, stream)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	d, err = rt.DecodeRecord(ctx, recs[0])
	require.NoError(t, err)
	require.Equal(t, CustomerRegistered{CustomerID: "c-1"}, d.Value)
	require.ElementsMatch(t, []string{"name", "email"}, d.Erased)
	v, erased, err := runtime.DecodeAsRecord[NoteAdded](ctx, rt, recs[1])
	require.NoError(t, err)
	require.Equal(t, NoteAdded{}, v)
	require.Equal(t, []string{"note"}, erased)

	// The actor was evicted: its state is rebuilt with zero fields.
	got, err := runtime.ExecuteTyped[Customer](ctx, rt, customer("c-1"), Get{})
	require.NoError(t, err)
	require.Equal(t, Customer{ID: "c-1", Notes: []string{""}}, got.State)
	st, err := runtime.State[Customer](ctx, rt, customer("c-1"))
	require.NoError(t, err)
	require.Equal(t, uint64(2), st.Version)
	require.Empty(t, st.State.Name)

	// New personal data for the erased subject is refused.
	_, err = rt.Execute(ctx, customer("c-1"), AddNote{Note: "again"})
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	require.Contains(t, err.Error(), "new subject ID")

	// Idempotent: a repeat reports the original erasure, appends nothing new.
	again, err := rt.Erase(ctx, "c-1", "someone-else")
	require.NoError(t, err)
	require.True(t, again.Repeat)
	require.Equal(t, "dpo@example", again.By)
	count := 0
	for r, err := range e.j.Read(ctx, erasure.RecordQuery(), journal.ReadOptions{}) {
		require.NoError(t, err)
		count++
		rd, ok, err := erasure.ParseRecord(&r)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "c-1", rd.Subject)
		require.Empty(t, r.Tags)
	}
	require.Equal(t, 1, count)

	// Another subject is intact.
	other, err := runtime.State[Customer](ctx, rt, customer("c-2"))
	require.NoError(t, err)
	require.Equal(t, "Other Person", other.State.Name)

	// No log line ever carried the personal data.
	requireNoSecrets(t, e.logs.String())
}

func TestErasureReachesOtherRuntimesThroughTheFeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newErasureEnv()
	a := e.startCustomers(t, "node-a")
	b := e.startCustomers(t, "node-b")

	_, err := a.Execute(ctx, customer("c-9"), RegisterCustomer{ID: "c-9", Name: secretName, Email: secretEmail})
	require.NoError(t, err)
	// b caches c-9's key by decoding one of its events.
	var first journal.Record
	for r, err := range e.j.ReadStream(ctx, customer("c-9").Stream(), 1, 1) {
		require.NoError(t, err)
		first = r
	}
	d, err := b.DecodeRecord(ctx, first)
	require.NoError(t, err)
	require.Equal(t, secretName, d.Value.(CustomerRegistered).Name)

	// The erasure goes straight to the key store and the journal (as the
	// CLI does), not through a runtime.
	_, err = erasure.Erase(ctx, erasure.EraseParams{Journal: e.j, KeyStore: e.keys, Snapshots: e.snaps, Subject: "c-9", By: "cli"})
	require.NoError(t, err)

	// Both runtimes learn of it through the feed and drop their cached key
	// (each seals on a stream of its own: a holds c-9's lease).
	for i, rt := range []*runtime.Runtime{a, b} {
		require.Eventually(t, func() bool {
			d, err := rt.DecodeRecord(ctx, first)
			return err == nil && len(d.Erased) == 2
		}, 10*time.Second, 5*time.Millisecond)
		_, err = rt.Execute(ctx, customer(fmt.Sprintf("c-9-%d", i)), RegisterCustomer{ID: "c-9", Name: "n"})
		require.ErrorIs(t, err, erasure.ErrSubjectErased)
	}
	got, err := runtime.ExecuteTyped[Customer](ctx, a, customer("c-9"), Get{})
	require.NoError(t, err)
	require.Empty(t, got.State.Name, "a's actor must have been evicted and rebuilt")
	requireNoSecrets(t, e.logs.String())
}

func TestPersonalDataNeverInErrorsOrLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newErasureEnv()
	rt := e.startCustomers(t, "node-1")
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	_, err := rt.Execute(ctx, customer("c-3"), RegisterCustomer{ID: "c-3", Name: secretName, Email: secretEmail})
	require.NoError(t, err)
	// A missing subject, an erased subject, a corrupt envelope: all fail
	// without echoing the data.
	_, err = rt.Execute(ctx, customer("c-4"), RegisterCustomer{ID: "", Name: secretName, Email: secretEmail})
	require.Error(t, err)
	note(err)
	for r, err := range e.j.ReadStream(ctx, customer("c-3").Stream(), 1, 0) {
		require.NoError(t, err)
		r.Type = "NoteAdded" // the AAD binds the type: opening must fail
		_, err = rt.DecodeRecord(ctx, r)
		require.ErrorIs(t, err, erasure.ErrCorrupt)
		note(err)
	}
	_, err = rt.Erase(ctx, "c-3", "op")
	require.NoError(t, err)
	_, err = rt.Execute(ctx, customer("c-3"), RegisterCustomer{ID: "c-3", Name: secretName, Email: secretEmail})
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	note(err)
	require.Len(t, errs, 3)
	requireNoSecrets(t, strings.Join(errs, "\n"))
	requireNoSecrets(t, e.logs.String())
}

func requireNoSecrets(t *testing.T, out string) {
	t.Helper()
	for _, s := range []string{secretName, secretEmail, secretNote} {
		require.NotContains(t, out, s)
	}
}

// After an erasure a stream bound to the erased subject is snapshotted
// again (its state was rebuilt without the subject's data): by the runtime
// that evicted its actors, and by a runtime started after the erasure.
func TestSnapshotsAfterErasure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newErasureEnv()
	rt := e.startCustomers(t, "node-1")
	stream := customer("c-5").Stream()
	_, err := rt.Execute(ctx, customer("c-5"), RegisterCustomer{ID: "c-5", Name: secretName, Email: secretEmail})
	require.NoError(t, err)
	// Snapshots are saved after the append, asynchronously.
	loadAt := func(v uint64) snapshots.Snapshot {
		t.Helper()
		var snap snapshots.Snapshot
		require.Eventually(t, func() bool {
			s, err := e.snaps.Load(ctx, stream, math.MaxUint64)
			snap = s
			return err == nil && s.Version == v
		}, 10*time.Second, 2*time.Millisecond, "a snapshot at version %d", v)
		return snap
	}
	snap := loadAt(1)
	require.True(t, erasure.IsSealedSnapshot(snap.State))
	require.NotContains(t, string(snap.State), secretName)

	_, err = rt.Erase(ctx, "c-5", "op")
	require.NoError(t, err)
	_, err = rt.Execute(ctx, customer("c-5"), Poke{})
	require.NoError(t, err)
	snap = loadAt(2) // the rebuilt state is snapshotted again
	require.False(t, erasure.IsSealedSnapshot(snap.State), "no live subject is left to seal it for")
	requireNoSecrets(t, string(snap.State))
	require.NoError(t, rt.Shutdown(ctx))

	// A runtime started after the erasure holds nothing from before it.
	rt2 := e.startCustomers(t, "node-2")
	_, err = e.snaps.Prune(ctx, stream, 0)
	require.NoError(t, err)
	_, err = rt2.Execute(ctx, customer("c-5"), Poke{})
	require.NoError(t, err)
	snap = loadAt(3)
	requireNoSecrets(t, string(snap.State))
}
