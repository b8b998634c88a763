package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// The statements of an erasure, in their order (erasure.Erase).
const (
	stepBegin    = "BeginErasure"
	stepRecord   = "Append"
	stepDestroy  = "DestroyKey"
	stepSnapshot = "Prune"
	stepComplete = "CompleteErasure"
)

var erasureSteps = []string{stepBegin, stepRecord, stepDestroy, stepSnapshot, stepComplete}

// errProcessCrashed is what every call of a crashed process returns.
var errProcessCrashed = errors.New("test: the process crashed here")

// crash makes a process die at one statement of an erasure: before it runs
// (the statement never reaches the store) or after it (the statement is
// done, the process never learns it). From then on every store call of the
// process fails, as if it were gone.
type crash struct {
	step  string // "" never crashes
	after bool

	mu   sync.Mutex
	dead bool
}

// run runs the statement step of the process.
func (c *crash) run(step string, f func() error) error {
	c.mu.Lock()
	if c.dead || (step == c.step && !c.after) {
		c.dead = true
		c.mu.Unlock()
		return errProcessCrashed
	}
	c.mu.Unlock()
	err := f()
	if step == c.step && c.after {
		c.mu.Lock()
		c.dead = true
		c.mu.Unlock()
		return errProcessCrashed
	}
	return err
}

// alive fails once the process crashed.
func (c *crash) alive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errProcessCrashed
	}
	return nil
}

// crashingKeys is a process's view of the shared key store.
type crashingKeys struct {
	ks erasure.KeyStore
	c  *crash
}

var _ erasure.KeyStore = crashingKeys{}

func do[T any](c *crash, step string, f func() (T, error)) (T, error) {
	var out T
	err := c.run(step, func() error {
		var err error
		out, err = f()
		return err
	})
	return out, err
}

func read[T any](c *crash, f func() (T, error)) (T, error) {
	if err := c.alive(); err != nil {
		var zero T
		return zero, err
	}
	return f()
}

func (k crashingKeys) DataKey(ctx context.Context, s string) (erasure.DataKey, error) {
	return read(k.c, func() (erasure.DataKey, error) { return k.ks.DataKey(ctx, s) })
}

func (k crashingKeys) Lookup(ctx context.Context, s []string) (erasure.Lookup, error) {
	return read(k.c, func() (erasure.Lookup, error) { return k.ks.Lookup(ctx, s) })
}

func (k crashingKeys) BeginErasure(ctx context.Context, s, by string) (erasure.Erasure, error) {
	return do(k.c, stepBegin, func() (erasure.Erasure, error) { return k.ks.BeginErasure(ctx, s, by) })
}

func (k crashingKeys) DestroyKey(ctx context.Context, s string) (erasure.Erasure, error) {
	return do(k.c, stepDestroy, func() (erasure.Erasure, error) { return k.ks.DestroyKey(ctx, s) })
}

func (k crashingKeys) CompleteErasure(ctx context.Context, s string) (erasure.Erasure, error) {
	return do(k.c, stepComplete, func() (erasure.Erasure, error) { return k.ks.CompleteErasure(ctx, s) })
}

func (k crashingKeys) Erasures(ctx context.Context, q erasure.ErasureQuery) ([]erasure.Erasure, error) {
	return read(k.c, func() ([]erasure.Erasure, error) { return k.ks.Erasures(ctx, q) })
}

func (k crashingKeys) ErasureHead(ctx context.Context) (uint64, error) {
	return read(k.c, func() (uint64, error) { return k.ks.ErasureHead(ctx) })
}

func (k crashingKeys) Subjects(ctx context.Context, after string, limit int) ([]erasure.Subject, error) {
	return read(k.c, func() ([]erasure.Subject, error) { return k.ks.Subjects(ctx, after, limit) })
}

func (k crashingKeys) BindStream(ctx context.Context, s string, st journal.StreamID) error {
	_, err := read(k.c, func() (struct{}, error) { return struct{}{}, k.ks.BindStream(ctx, s, st) })
	return err
}

func (k crashingKeys) Streams(ctx context.Context, s string) ([]journal.StreamID, error) {
	return read(k.c, func() ([]journal.StreamID, error) { return k.ks.Streams(ctx, s) })
}

func (k crashingKeys) StreamSubjects(ctx context.Context, st journal.StreamID) ([]string, error) {
	return read(k.c, func() ([]string, error) { return k.ks.StreamSubjects(ctx, st) })
}

// crashingJournal crashes at the erasure record's append.
type crashingJournal struct {
	journal.Journal
	c *crash
}

func (j crashingJournal) Append(ctx context.Context, evs []journal.Event, o journal.AppendOptions) (journal.AppendResult, error) {
	return do(j.c, stepRecord, func() (journal.AppendResult, error) { return j.Journal.Append(ctx, evs, o) })
}

// crashingSnapshots crashes at the deletion of a snapshot.
type crashingSnapshots struct {
	snapshots.Store
	c *crash
}

func (s crashingSnapshots) Prune(ctx context.Context, st journal.StreamID, keep int) (int, error) {
	return do(s.c, stepSnapshot, func() (int, error) { return s.Store.Prune(ctx, st, keep) })
}

// crashStores are the stores the processes of a crash test share.
type crashStores struct {
	*env
	keys erasure.KeyStore
}

func memoryCrashStores(*testing.T) crashStores {
	return crashStores{env: memoryEnv(), keys: erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})}
}

func postgresCrashStores(t *testing.T) crashStores {
	e := postgresEnv(t)
	pool, schema := pgtest.Pool(t)
	cfg := postgres.KeyStoreConfig{Schema: schema}
	require.NoError(t, postgres.MigrateKeyStore(context.Background(), pool, cfg))
	ks, err := postgres.NewKeyStore(pool, cfg)
	require.NoError(t, err)
	return crashStores{env: e, keys: ks}
}

// startProcess starts a customer runtime on the stores; mutate adjusts its
// Config (its own views of the stores, its sweep interval).
func (s crashStores) startProcess(t *testing.T, node string, logs *syncBuffer, mutate func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	p := snapshots.Policy{Every: 1}
	rt := s.start(t, func(c *runtime.Config) {
		c.KeyStore = s.keys
		c.NodeID = node
		c.SnapshotPolicy = &p
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if mutate != nil {
			mutate(c)
		}
	})
	require.NoError(t, runtime.RegisterEvent[CustomerRegistered](rt, "CustomerRegistered", 1,
		runtime.WithPersonalData(runtime.PersonalData{Fields: []string{"name", "email"}, SubjectField: "customerId"})))
	require.NoError(t, runtime.RegisterEvent[NoteAdded](rt, "NoteAdded", 1,
		runtime.WithPersonalData(runtime.PersonalData{Fields: []string{"note"}, SubjectTagGroup: "customer"})))
	require.NoError(t, runtime.RegisterEvent[Poked](rt, "Poked", 1))
	require.NoError(t, runtime.RegisterAggregate(rt, customerAggregate()))
	return rt
}

// serves reports what rt serves of the customer: the name its actor holds
// and the name State reads.
func serves(ctx context.Context, rt *runtime.Runtime, id string) (actor, state string, err error) {
	got, err := runtime.ExecuteTyped[Customer](ctx, rt, customer(id), Get{})
	if err != nil {
		return "", "", err
	}
	st, err := runtime.State[Customer](ctx, rt, customer(id))
	if err != nil {
		return "", "", err
	}
	return got.State.Name, st.State.Name, nil
}

// erasureMonitor reads the key store's view of a subject continually and
// records every violation: a state going back, or "complete" reported
// while a step is missing (no erasure record in the journal, a key still
// given out, a sealed snapshot of the subject still stored).
type erasureMonitor struct {
	cancel     context.CancelFunc
	done       sync.WaitGroup
	mu         sync.Mutex
	violations []string
	seen       []erasure.ErasureState
	// observed is closed after the first observation: stop waits for it, so
	// a scenario that ends before the monitor's first read (a loaded
	// machine) still reports what the key store said.
	observed     chan struct{}
	observedOnce sync.Once
}

func monitorErasure(s crashStores, subject string) *erasureMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &erasureMonitor{cancel: cancel, observed: make(chan struct{})}
	stream := customer(subject).Stream()
	m.done.Go(func() {
		last := erasure.NotErased
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			subs, err := s.keys.Subjects(ctx, "", 0)
			if ctx.Err() != nil {
				return
			}
			var violation string
			state := erasure.NotErased
			if err != nil {
				violation = "Subjects: " + err.Error()
			}
			for _, sub := range subs {
				if sub.ID == subject {
					state = sub.Erasure
				}
			}
			if state < last {
				violation = fmt.Sprintf("the erasure went back from %s to %s", last, state)
			}
			if state == erasure.ErasureComplete && last != erasure.ErasureComplete {
				violation = missingStep(ctx, s, subject, stream)
			}
			m.mu.Lock()
			if violation != "" && ctx.Err() == nil {
				m.violations = append(m.violations, violation)
			}
			if state != last || len(m.seen) == 0 {
				m.seen = append(m.seen, state)
			}
			m.mu.Unlock()
			m.observedOnce.Do(func() { close(m.observed) })
			last = state
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return m
}

// missingStep names a step of subject's erasure that is not done; "" when
// all are.
func missingStep(ctx context.Context, s crashStores, subject string, stream journal.StreamID) string {
	if _, err := s.j.ReadEvent(ctx, erasure.RecordID(subject)); err != nil {
		return "complete, but the erasure record is not in the journal: " + err.Error()
	}
	l, err := s.keys.Lookup(ctx, []string{subject})
	if err != nil || l.Keys[subject].Valid() {
		return fmt.Sprintf("complete, but the key store still gives out the key (%v)", err)
	}
	snap, err := s.snaps.Load(ctx, stream, math.MaxUint64)
	if err == nil && erasure.IsSealedSnapshot(snap.State) {
		subs, _ := erasure.SnapshotSubjects(snap.State)
		if slices.Contains(subs, subject) {
			return "complete, but a snapshot sealed for the subject is still stored"
		}
	}
	return ""
}

// last is the state the monitor read last.
func (m *erasureMonitor) last() erasure.ErasureState {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.seen) == 0 {
		return erasure.NotErased
	}
	return m.seen[len(m.seen)-1]
}

func (m *erasureMonitor) stop() ([]string, []erasure.ErasureState) {
	<-m.observed
	m.cancel()
	m.done.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.violations, m.seen
}

// serveBound is how long after an erasure's first step a live runtime that
// read the subject's data may still serve it (ErasurePollInterval, 1 s, plus
// one poll's work).
const serveBound = 2 * time.Second

// TestEraseCrashMatrix interrupts an erasure at every statement, before
// and after it (the process's stores fail from there on, as if it died),
// on the memory and the Postgres stores. A live runtime B holds the
// customer's state and key; A erases and crashes; then C starts on the
// same stores (the restart). In every case: B serves none of the
// customer's personal data within 2 s of the crash (unless the crash came
// before the erasure's first statement, which leaves no trace); C's start
// sweep completes the erasure without a second request; the key store
// never reports the erasure complete while a step is missing, and its
// state never goes back.
func TestEraseCrashMatrix(t *testing.T) {
	t.Parallel()
	type point struct {
		step  string
		after bool
	}
	points := []point{{}} // no crash
	for _, s := range erasureSteps {
		points = append(points, point{s, false}, point{s, true})
	}
	for _, backend := range []struct {
		name   string
		stores func(*testing.T) crashStores
	}{{"Memory", memoryCrashStores}, {"Postgres", postgresCrashStores}} {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			if backend.name == "Postgres" {
				pgtest.URL(t)
			}
			for _, p := range points {
				name := "NoCrash"
				if p.step != "" {
					name = map[bool]string{false: "Before", true: "After"}[p.after] + p.step
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					testEraseCrash(t, backend.stores(t), &crash{step: p.step, after: p.after})
				})
			}
		})
	}
}

func testEraseCrash(t *testing.T, s crashStores, c *crash) {
	ctx := context.Background()
	logs := &syncBuffer{}
	const subject = "c-1"
	stream := customer(subject).Stream()
	never := func(cfg *runtime.Config) { cfg.ErasureSweepInterval = time.Hour } // only their start sweeps

	// B, a live runtime, holds the customer's actor, key and snapshot.
	b := s.startProcess(t, "node-b", logs, never)
	_, err := b.Execute(ctx, customer(subject), RegisterCustomer{ID: subject, Name: secretName, Email: secretEmail})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		snap, err := s.snaps.Load(ctx, stream, math.MaxUint64)
		return err == nil && erasure.IsSealedSnapshot(snap.State)
	}, 10*time.Second, 2*time.Millisecond, "B's sealed snapshot")
	actorName, stateName, err := serves(ctx, b, subject)
	require.NoError(t, err)
	require.Equal(t, secretName, actorName)
	require.Equal(t, secretName, stateName)

	// A erases through its own views of the stores, and dies at c.
	a := s.startProcess(t, "node-a", logs, func(cfg *runtime.Config) {
		never(cfg)
		cfg.KeyStore = crashingKeys{ks: s.keys, c: c}
		cfg.Journal = crashingJournal{Journal: s.j, c: c}
		cfg.Sessions = s.s
		cfg.Snapshots = crashingSnapshots{Store: s.snaps, c: c}
	})
	mon := monitorErasure(s, subject)
	crashed := time.Now() // the bound counts from before the erasure's first statement
	_, err = a.Erase(ctx, subject, "dpo-ticket-1")
	if c.step == "" {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, errProcessCrashed)
	}
	require.NoError(t, a.Shutdown(ctx)) // the process is gone: B must not depend on it

	subjectState := func() erasure.ErasureState {
		subs, err := s.keys.Subjects(ctx, "", 0)
		require.NoError(t, err)
		for _, sub := range subs {
			if sub.ID == subject {
				return sub.Erasure
			}
		}
		return erasure.NotErased
	}

	if c.step == stepBegin && !c.after {
		// Nothing of the erasure is visible, now or after a restart.
		require.Equal(t, erasure.NotErased, subjectState())
		restarted := s.startProcess(t, "node-c", logs, nil)
		actorName, stateName, err := serves(ctx, b, subject)
		require.NoError(t, err)
		require.Equal(t, secretName, actorName)
		require.Equal(t, secretName, stateName)
		st, err := runtime.State[Customer](ctx, restarted, customer(subject))
		require.NoError(t, err)
		require.Equal(t, secretName, st.State.Name)
		_, err = s.keys.DataKey(ctx, subject)
		require.NoError(t, err)
		violations, seen := mon.stop()
		require.Empty(t, violations)
		require.Equal(t, []erasure.ErasureState{erasure.NotErased}, seen)
		requireNoSecrets(t, logs.String())
		return
	}

	if c.step != "" && !(c.step == stepComplete && c.after) {
		require.NotEqual(t, erasure.ErasureComplete, subjectState(), "a step is missing: the erasure must show as pending")
	}

	// B stops serving the data within serveBound of the crash, though A
	// never finished and (for some crash points) no record exists.
	var lastActor, lastState string
	for {
		actorName, stateName, err := serves(ctx, b, subject)
		require.NoError(t, err)
		lastActor, lastState = actorName, stateName
		if actorName == "" && stateName == "" {
			break
		}
		require.Less(t, time.Since(crashed), serveBound, "B still serves the erased customer's name %s after the crash (actor %t, state %t)",
			time.Since(crashed), lastActor != "", lastState != "")
	}
	t.Logf("B stopped serving %s after the crash", time.Since(crashed).Round(time.Millisecond))

	// The restart: C's start sweep completes the erasure, no second request.
	restarted := s.startProcess(t, "node-c", logs, nil)
	require.Eventually(t, func() bool { return subjectState() == erasure.ErasureComplete }, 10*time.Second, 2*time.Millisecond,
		"the restarted process must complete the erasure")
	require.Eventually(t, func() bool { return mon.last() == erasure.ErasureComplete }, 10*time.Second, 2*time.Millisecond,
		"the monitor sees the completion too")
	violations, seen := mon.stop()
	require.Empty(t, violations)
	require.Equal(t, erasure.ErasureComplete, seen[len(seen)-1])
	require.Empty(t, missingStep(ctx, s, subject, stream))

	// Exactly one erasure record; the key refused; nothing served anywhere.
	n := 0
	for r, err := range s.j.Read(ctx, erasure.RecordQuery(), journal.ReadOptions{}) {
		require.NoError(t, err)
		d, ok, err := erasure.ParseRecord(&r)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, subject, d.Subject)
		require.Equal(t, "dpo-ticket-1", d.By)
		n++
	}
	require.Equal(t, 1, n)
	_, err = s.keys.DataKey(ctx, subject)
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	actorName, stateName, err = serves(ctx, b, subject)
	require.NoError(t, err)
	require.Empty(t, actorName)
	require.Empty(t, stateName)
	st, err := runtime.State[Customer](ctx, restarted, customer(subject))
	require.NoError(t, err)
	require.Empty(t, st.State.Name)
	require.Empty(t, st.State.Email)
	requireNoSecrets(t, logs.String())
}
