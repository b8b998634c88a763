package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// The DCB done-when tests: course seats, unique usernames and wallet transfers
// through the runtime's stream actors, with wallet credits and debits executed
// as aggregate commands on the same tags.

// Wallet aggregate.
type (
	OpenWallet   struct{ ID string }
	CreditWallet struct{ Amount int64 }
	DebitWallet  struct{ Amount int64 }
	GetWallet    struct{}

	WalletOpened struct {
		ID string `json:"id"`
	}
	WalletCredited struct {
		Amount int64 `json:"amount"`
	}
	WalletDebited struct {
		Amount int64 `json:"amount"`
	}
	// WalletTransferred is appended by the Transfer DCB command on both wallets.
	WalletTransferred struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Amount int64  `json:"amount"`
	}
	Wallet struct {
		ID      string `json:"id"`
		Balance int64  `json:"balance"`
	}
)

func (e WalletTransferred) Tags() []journal.Tag {
	return []journal.Tag{walletTag(e.From), walletTag(e.To)}
}

func walletTag(id string) journal.Tag { return journal.NewTag("wallet", id) }
func wallet(id string) runtime.Target { return runtime.Target{Aggregate: "wallet", ID: id} }

var (
	errNoFunds         = errors.New("insufficient funds")
	errWalletClosed    = errors.New("wallet is not open")
	errNoSuchCourse    = errors.New("course does not exist")
	errCourseIsFull    = errors.New("course is full")
	errEnrolledAlready = errors.New("student already enrolled")
	errUsernameTaken   = errors.New("username is taken")
)

func evolveWallet(s Wallet, ev any) Wallet {
	switch e := ev.(type) {
	case WalletOpened:
		s.ID = e.ID
	case WalletCredited:
		s.Balance += e.Amount
	case WalletDebited:
		s.Balance -= e.Amount
	case WalletTransferred:
		if e.From == s.ID {
			s.Balance -= e.Amount
		}
		if e.To == s.ID {
			s.Balance += e.Amount
		}
	}
	return s
}

var walletAggregate = runtime.Aggregate[Wallet]{
	Name:    "wallet",
	Initial: func() Wallet { return Wallet{} },
	Decide: func(s Wallet, cmd any) ([]any, error) {
		switch c := cmd.(type) {
		case OpenWallet:
			if s.ID != "" {
				return nil, nil
			}
			return []any{WalletOpened{ID: c.ID}}, nil
		case CreditWallet:
			if s.ID == "" {
				return nil, errWalletClosed
			}
			return []any{WalletCredited{Amount: c.Amount}}, nil
		case DebitWallet:
			if s.Balance < c.Amount {
				return nil, fmt.Errorf("debit %d from %q (balance %d): %w", c.Amount, s.ID, s.Balance, errNoFunds)
			}
			return []any{WalletDebited{Amount: c.Amount}}, nil
		case GetWallet:
			return nil, nil
		}
		return nil, fmt.Errorf("wallet: unknown command %T", cmd)
	},
	Evolve: evolveWallet,
}

// Transfer is a DCB command over two wallets.
type Transfer struct {
	From, To string
	Amount   int64
}

type transferView struct {
	open    map[string]bool
	balance map[string]int64
}

// transferDCB decides from the wallets' aggregate states held by their
// actors; transferFoldDCB folds the wallets' events instead.
var transferDCB = withFromStates(transferFoldDCB)

func withFromStates(d runtime.DCB[Transfer, transferView]) runtime.DCB[Transfer, transferView] {
	d.Name = "TransferFromStates"
	d.FromStates = func(c Transfer, states map[journal.Tag]any) (transferView, bool) {
		v := transferView{open: map[string]bool{}, balance: map[string]int64{}}
		for _, id := range []string{c.From, c.To} {
			w, ok := states[walletTag(id)].(Wallet)
			if !ok {
				return v, false
			}
			v.open[id], v.balance[id] = w.ID != "", w.Balance
		}
		return v, true
	}
	return d
}

var transferFoldDCB = runtime.DCB[Transfer, transferView]{
	Name: "Transfer",
	Query: func(c Transfer) journal.Query {
		return journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{walletTag(c.From)}}, {Tags: []journal.Tag{walletTag(c.To)}}}}
	},
	Initial: func(Transfer) transferView {
		return transferView{open: map[string]bool{}, balance: map[string]int64{}}
	},
	Evolve: func(c Transfer, s transferView, e runtime.DCBEvent) transferView {
		for _, id := range []string{c.From, c.To} {
			if !e.Record.HasTag(walletTag(id)) {
				continue
			}
			w := evolveWallet(Wallet{ID: id, Balance: s.balance[id]}, e.Value)
			s.balance[id] = w.Balance
			if _, ok := e.Value.(WalletOpened); ok {
				s.open[id] = true
			}
		}
		return s
	},
	Decide: func(c Transfer, s transferView) ([]any, error) {
		if !s.open[c.From] || !s.open[c.To] {
			return nil, fmt.Errorf("transfer %s→%s: %w", c.From, c.To, errWalletClosed)
		}
		if s.balance[c.From] < c.Amount {
			return nil, fmt.Errorf("transfer %d from %s (balance %d): %w", c.Amount, c.From, s.balance[c.From], errNoFunds)
		}
		return []any{WalletTransferred{From: c.From, To: c.To, Amount: c.Amount}}, nil
	},
}

// Courses and usernames have no aggregate: their tags' actors only keep
// versions and serve reservations.
type (
	DefineCourse struct {
		Course string
		Seats  int
	}
	Enrol struct{ Student, Course string }
	Claim struct{ User, Name string }

	CourseDefined struct {
		Course string `json:"course"`
		Seats  int    `json:"seats"`
	}
	StudentEnrolled struct {
		Course  string `json:"course"`
		Student string `json:"student"`
	}
	UsernameClaimed struct {
		Name string `json:"name"`
		User string `json:"user"`
	}
)

func (e CourseDefined) Tags() []journal.Tag { return []journal.Tag{journal.NewTag("course", e.Course)} }
func (e StudentEnrolled) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("course", e.Course), journal.NewTag("student", e.Student)}
}
func (e UsernameClaimed) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("username", e.Name), journal.NewTag("user", e.User)}
}

var defineCourseDCB = runtime.DCB[DefineCourse, bool]{
	Name: "DefineCourse",
	Query: func(c DefineCourse) journal.Query {
		return journal.Query{Items: []journal.QueryItem{{Types: []string{"CourseDefined"}, Tags: []journal.Tag{journal.NewTag("course", c.Course)}}}}
	},
	Evolve: func(DefineCourse, bool, runtime.DCBEvent) bool { return true },
	Decide: func(c DefineCourse, defined bool) ([]any, error) {
		if defined {
			return nil, nil
		}
		return []any{CourseDefined{Course: c.Course, Seats: c.Seats}}, nil
	},
}

type seats struct {
	defined         bool
	seats, enrolled int
	already         bool
}

var enrolDCB = runtime.DCB[Enrol, seats]{
	Name: "Enrol",
	Query: func(c Enrol) journal.Query {
		return journal.Query{Items: []journal.QueryItem{
			{Types: []string{"CourseDefined", "StudentEnrolled"}, Tags: []journal.Tag{journal.NewTag("course", c.Course)}},
			{Types: []string{"StudentEnrolled"}, Tags: []journal.Tag{journal.NewTag("student", c.Student)}},
		}}
	},
	Evolve: func(c Enrol, s seats, e runtime.DCBEvent) seats {
		switch ev := e.Value.(type) {
		case CourseDefined:
			s.defined, s.seats = true, ev.Seats
		case StudentEnrolled:
			if ev.Course == c.Course {
				s.enrolled++
				s.already = s.already || ev.Student == c.Student
			}
		}
		return s
	},
	Decide: func(c Enrol, s seats) ([]any, error) {
		switch {
		case !s.defined:
			return nil, errNoSuchCourse
		case s.already:
			return nil, errEnrolledAlready
		case s.enrolled >= s.seats:
			return nil, fmt.Errorf("enrol %s in %s: %w", c.Student, c.Course, errCourseIsFull)
		}
		return []any{StudentEnrolled{Course: c.Course, Student: c.Student}}, nil
	},
}

var claimDCB = runtime.DCB[Claim, bool]{
	Name: "ClaimUsername",
	Query: func(c Claim) journal.Query {
		return journal.Query{Items: []journal.QueryItem{{Types: []string{"UsernameClaimed"}, Tags: []journal.Tag{journal.NewTag("username", c.Name)}}}}
	},
	Tags:   func(c Claim) []journal.Tag { return []journal.Tag{journal.NewTag("user", c.User)} },
	Evolve: func(Claim, bool, runtime.DCBEvent) bool { return true },
	Decide: func(c Claim, taken bool) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("claim %q: %w", c.Name, errUsernameTaken)
		}
		return []any{UsernameClaimed{Name: c.Name, User: c.User}}, nil
	},
}

// dcbApp is a runtime with the wallet aggregate and the DCB commands registered.
type dcbApp struct {
	rt       *runtime.Runtime
	e        *env
	metrics  func() metricdata.ResourceMetrics
	transfer *runtime.DCBCommand[Transfer, transferView] // from the actors' states
	fold     *runtime.DCBCommand[Transfer, transferView] // from the events
	define   *runtime.DCBCommand[DefineCourse, bool]
	enrol    *runtime.DCBCommand[Enrol, seats]
	claim    *runtime.DCBCommand[Claim, bool]
}

func startDCB(t testing.TB, e *env, mutate ...func(*runtime.Config)) *dcbApp {
	t.Helper()
	mp, collect := metricReader(t)
	rt := e.start(t, append([]func(*runtime.Config){func(c *runtime.Config) {
		c.NodeID = "dcb-" + t.Name()
		c.MeterProvider = mp
	}}, mutate...)...)
	for _, err := range []error{
		runtime.RegisterEvent[WalletOpened](rt, "WalletOpened", 1),
		runtime.RegisterEvent[WalletCredited](rt, "WalletCredited", 1),
		runtime.RegisterEvent[WalletDebited](rt, "WalletDebited", 1),
		runtime.RegisterEvent[WalletTransferred](rt, "WalletTransferred", 1),
		runtime.RegisterEvent[CourseDefined](rt, "CourseDefined", 1),
		runtime.RegisterEvent[StudentEnrolled](rt, "StudentEnrolled", 1),
		runtime.RegisterEvent[UsernameClaimed](rt, "UsernameClaimed", 1),
		runtime.RegisterAggregate(rt, walletAggregate),
	} {
		require.NoError(t, err)
	}
	app := &dcbApp{rt: rt, e: e, metrics: collect}
	var err error
	app.transfer, err = runtime.RegisterDCB(rt, transferDCB)
	require.NoError(t, err)
	app.fold, err = runtime.RegisterDCB(rt, transferFoldDCB)
	require.NoError(t, err)
	app.define, err = runtime.RegisterDCB(rt, defineCourseDCB)
	require.NoError(t, err)
	app.enrol, err = runtime.RegisterDCB(rt, enrolDCB)
	require.NoError(t, err)
	app.claim, err = runtime.RegisterDCB(rt, claimDCB)
	require.NoError(t, err)
	return app
}

func (a *dcbApp) conflicts(t *testing.T) int64 { return sumOf(t, a.metrics(), "scribe.dcb.conflicts") }

func (a *dcbApp) openWallets(t testing.TB, n int, balance int64) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprint(i)
		_, err := a.rt.Execute(ctx, wallet(id), OpenWallet{ID: id})
		require.NoError(t, err)
		_, err = a.rt.Execute(ctx, wallet(id), CreditWallet{Amount: balance})
		require.NoError(t, err)
	}
}

// foldWallet folds a wallet's stream from the journal, checking versions are
// gap-free and the balance never negative.
func (a *dcbApp) foldWallet(t *testing.T, id string) Wallet {
	t.Helper()
	var w Wallet
	var v uint64
	for r, err := range a.e.j.ReadStream(context.Background(), journal.Stream(walletTag(id)), 1, 0) {
		require.NoError(t, err)
		v++
		require.Equal(t, v, r.Version(walletTag(id)), "wallet %s has a version gap", id)
		var ev any
		switch r.Type {
		case "WalletOpened":
			var e WalletOpened
			require.NoError(t, json.Unmarshal(r.Data, &e))
			ev = e
		case "WalletCredited":
			var e WalletCredited
			require.NoError(t, json.Unmarshal(r.Data, &e))
			ev = e
		case "WalletDebited":
			var e WalletDebited
			require.NoError(t, json.Unmarshal(r.Data, &e))
			ev = e
		case "WalletTransferred":
			var e WalletTransferred
			require.NoError(t, json.Unmarshal(r.Data, &e))
			ev = e
		}
		w = evolveWallet(w, ev)
		require.GreaterOrEqual(t, w.Balance, int64(0), "wallet %s negative at version %d", id, v)
	}
	return w
}

// jobs runs f for job 0..n-1 on workers goroutines.
func jobs(workers, n int, f func(job int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := int(next.Add(1)) - 1; j < n; j = int(next.Add(1)) - 1 {
				f(j)
			}
		})
	}
	wg.Wait()
}

// dcbScale returns n, or a tenth of it under -short: the full counts take
// minutes with the race detector on two cores (see the package's DCB notes).
func dcbScale(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}

func runDCBDoneWhen(t *testing.T, newEnv func(t *testing.T) *env) {
	t.Run("CourseEnrolment", func(t *testing.T) { t.Parallel(); testCourseEnrolment(t, newEnv(t)) })
	t.Run("UniqueUsername", func(t *testing.T) { t.Parallel(); testUniqueUsername(t, newEnv(t)) })
	t.Run("Transfers", func(t *testing.T) { t.Parallel(); testTransfers(t, newEnv(t)) })
	t.Run("OppositeTransfers", func(t *testing.T) { t.Parallel(); testOppositeTransfers(t, newEnv(t)) })
	t.Run("BypassIsAConflict", func(t *testing.T) { t.Parallel(); testBypassIsAConflict(t, newEnv(t)) })
	t.Run("TagQueries", func(t *testing.T) { t.Parallel(); testTagQueries(t, newEnv(t)) })
	t.Run("Idempotency", func(t *testing.T) { t.Parallel(); testDCBIdempotency(t, newEnv(t)) })
	t.Run("UntaggedEvents", func(t *testing.T) { t.Parallel(); testDCBUntaggedEvents(t, newEnv(t)) })
	t.Run("RevokedLeases", func(t *testing.T) { t.Parallel(); testRevokedLeases(t, newEnv(t)) })
}

// UsernameAudited is an untagged event: found by its type, chained in its
// type's untagged chain, and owned by no actor.
type UsernameAudited struct {
	Name string `json:"name"`
}

// testDCBUntaggedEvents: a DCB command appends an untagged event beside its
// tagged one (the decision needs no stream of it); concurrent commands chain
// the untagged events without gaps, and type queries find them.
func testDCBUntaggedEvents(t *testing.T, e *env) {
	a := startDCB(t, e)
	require.NoError(t, runtime.RegisterEvent[UsernameAudited](a.rt, "UsernameAudited", 1))
	audited := claimDCB
	audited.Name = "ClaimAudited"
	audited.Decide = func(c Claim, taken bool) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("claim %q: %w", c.Name, errUsernameTaken)
		}
		return []any{UsernameClaimed{Name: c.Name, User: c.User}, UsernameAudited{Name: c.Name}}, nil
	}
	cmd, err := runtime.RegisterDCB(a.rt, audited)
	require.NoError(t, err)
	ctx := context.Background()
	const names = 40
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			res, err := cmd.Execute(ctx, Claim{User: fmt.Sprint("u", i), Name: fmt.Sprint("n", i)})
			if !assertNoError(t, err) {
				return
			}
			if len(res.Records) != 2 || len(res.Records[1].Tags) != 0 || res.Records[1].Links[0].Tag != journal.UntaggedChain("UsernameAudited") {
				t.Errorf("claim %d: want a tagged and an untagged record, got %+v", i, res.Records)
			}
		})
	}
	wg.Wait()
	chain := journal.Stream(journal.UntaggedChain("UsernameAudited"))
	n, err := journal.VerifyStream(ctx, e.j, chain)
	require.NoError(t, err)
	require.EqualValues(t, names, n, "every untagged event is in its chain once")
	var found int
	for rec, err := range e.j.Read(ctx, journal.Query{Items: []journal.QueryItem{{Types: []string{"UsernameAudited"}}}}, journal.ReadOptions{}) {
		require.NoError(t, err)
		v, err := a.rt.Decode(rec)
		require.NoError(t, err)
		require.IsType(t, UsernameAudited{}, v)
		found++
	}
	require.Equal(t, names, found, "untagged events are found by type")
	// A second claim of a name is still decided from its tag's stream.
	_, err = cmd.Execute(ctx, Claim{User: "other", Name: "n0"})
	require.ErrorIs(t, err, errUsernameTaken)
	require.Zero(t, a.conflicts(t))
}

// assertNoError reports err from any goroutine and says whether it was nil.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func TestDCBMemory(t *testing.T) {
	t.Parallel()
	runDCBDoneWhen(t, func(*testing.T) *env { return memoryEnv() })
}

func TestDCBPostgres(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	runDCBDoneWhen(t, postgresEnv)
}

func testCourseEnrolment(t *testing.T, e *env) {
	a := startDCB(t, e)
	ctx := context.Background()
	const courses, seatsPer, students = 5, 10, 200
	for c := range courses {
		_, err := a.define.Execute(ctx, DefineCourse{Course: fmt.Sprint(c), Seats: seatsPer})
		require.NoError(t, err)
	}
	attempts := rand.Perm(students * courses) // every student tries every course
	var ok, full atomic.Int64
	jobs(32, len(attempts), func(i int) {
		at := attempts[i]
		res, err := a.enrol.Execute(ctx, Enrol{Student: fmt.Sprint(at / courses), Course: fmt.Sprint(at % courses)})
		switch {
		case err == nil && len(res.Records) == 1:
			ok.Add(1)
		case errors.Is(err, errCourseIsFull):
			full.Add(1)
		default:
			t.Errorf("attempt %d: %d records, %v", at, len(res.Records), err)
		}
	})
	require.EqualValues(t, courses*seatsPer, ok.Load())
	require.EqualValues(t, students*courses-courses*seatsPer, full.Load())
	require.Zero(t, a.conflicts(t))
	require.EqualValues(t, students*courses+courses, sumOf(t, a.metrics(), "scribe.dcb.commands"), "one execution per attempt: no retries")
	for c := range courses {
		n, err := a.rt.TagEventCount(ctx, journal.Stream(journal.NewTag("course", fmt.Sprint(c))))
		require.NoError(t, err)
		require.EqualValues(t, 1+seatsPer, n)
	}
}

func testUniqueUsername(t *testing.T, e *env) {
	a := startDCB(t, e)
	ctx := context.Background()
	const users, names = 16, 50
	var ok, taken atomic.Int64
	var wg sync.WaitGroup
	for u := range users {
		wg.Go(func() {
			for _, n := range rand.Perm(names) {
				_, err := a.claim.Execute(ctx, Claim{User: fmt.Sprint(u), Name: fmt.Sprint("name-", n)})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, errUsernameTaken):
					taken.Add(1)
				default:
					t.Errorf("user %d, name %d: %v", u, n, err)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, names, ok.Load())
	require.EqualValues(t, users*names-names, taken.Load())
	tags, err := a.rt.TagsOfGroup(ctx, "", "username")
	require.NoError(t, err)
	require.Len(t, tags, names)
	for _, s := range tags {
		require.EqualValues(t, 1, s.Version, "%s claimed more than once", s.Stream)
	}
	require.Zero(t, a.conflicts(t))
}

func testTransfers(t *testing.T, e *env) {
	a := startDCB(t, e)
	ctx := context.Background()
	const wallets, initial = 10, 1000
	transfers := 20000 // the count; see dcbScale
	transfers = dcbScale(transfers)
	a.openWallets(t, wallets, initial)
	var moved, refused, credited, debited atomic.Int64
	start := time.Now()
	jobs(32, transfers, func(i int) {
		from := rand.IntN(wallets)
		to := (from + 1 + rand.IntN(wallets-1)) % wallets
		// Half decide from the actors' states, half fold the events.
		cmd := a.transfer
		if i%2 == 1 {
			cmd = a.fold
		}
		_, err := cmd.Execute(ctx, Transfer{From: fmt.Sprint(from), To: fmt.Sprint(to), Amount: 1 + rand.Int64N(300)})
		switch {
		case err == nil:
			moved.Add(1)
		case errors.Is(err, errNoFunds):
			refused.Add(1)
		default:
			t.Errorf("transfer %d: %v", i, err)
		}
		// Every fourth job also runs an aggregate command on a wallet.
		if i%4 == 0 {
			w, amount := wallet(fmt.Sprint(rand.IntN(wallets))), 1+rand.Int64N(200)
			if i%8 == 0 {
				_, err := a.rt.Execute(ctx, w, CreditWallet{Amount: amount})
				require.NoError(t, err)
				credited.Add(amount)
			} else if _, err := a.rt.Execute(ctx, w, DebitWallet{Amount: amount}); err == nil {
				debited.Add(amount)
			} else {
				require.ErrorIs(t, err, errNoFunds)
			}
		}
	})
	t.Logf("%d transfers (%d refused) and %d aggregate commands in %s", moved.Load(), refused.Load(), transfers/4, time.Since(start).Round(time.Millisecond))
	require.EqualValues(t, transfers, moved.Load()+refused.Load())
	require.Zero(t, a.conflicts(t))

	var total int64
	for i := range wallets {
		id := fmt.Sprint(i)
		folded := a.foldWallet(t, id)
		res, err := runtime.ExecuteTyped[Wallet](ctx, a.rt, wallet(id), GetWallet{})
		require.NoError(t, err)
		require.Equal(t, folded, res.State, "wallet %s: the actor's state differs from the fold of its events", id)
		total += folded.Balance
	}
	require.Equal(t, int64(wallets*initial)+credited.Load()-debited.Load(), total, "money not conserved")
}

func testOppositeTransfers(t *testing.T, e *env) {
	a := startDCB(t, e)
	ctx := context.Background()
	const wallets = 10
	pairs := dcbScale(10000)
	a.openWallets(t, wallets, 1_000_000)
	var done atomic.Int64
	jobs(16, pairs, func(i int) {
		x := rand.IntN(wallets)
		y := (x + 1 + rand.IntN(wallets-1)) % wallets
		var wg sync.WaitGroup
		for _, d := range [][2]int{{x, y}, {y, x}} {
			wg.Go(func() {
				_, err := a.fold.Execute(ctx, Transfer{From: fmt.Sprint(d[0]), To: fmt.Sprint(d[1]), Amount: 1})
				if err != nil {
					t.Errorf("pair %d %v: %v", i, d, err)
					return
				}
				done.Add(1)
			})
		}
		wg.Wait()
	})
	require.EqualValues(t, 2*pairs, done.Load())
	var total int64
	for i := range wallets {
		total += a.foldWallet(t, fmt.Sprint(i)).Balance
	}
	require.EqualValues(t, wallets*1_000_000, total)
}

func testBypassIsAConflict(t *testing.T, e *env) {
	a := startDCB(t, e)
	ctx := context.Background()
	a.openWallets(t, 2, 100)
	_, err := a.transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 10})
	require.NoError(t, err)

	// Someone appends to wallet 0 behind its actor's back.
	bypass := journal.Event{ID: journal.NewEventID(), Type: "WalletCredited", SchemaVersion: 1,
		Tags: []journal.Tag{walletTag("0")}, Data: json.RawMessage(`{"amount":500}`)}
	_, err = e.j.Append(ctx, []journal.Event{bypass}, journal.AppendOptions{})
	require.NoError(t, err)

	_, err = a.transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 20})
	require.ErrorIs(t, err, runtime.ErrConflict)
	require.True(t, errors.Is(err, journal.ErrAppendConditionFailed) || errors.Is(err, journal.ErrVersionMismatch), "%v", err)
	var ce *runtime.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []journal.StreamID{journal.Stream(walletTag("0")), journal.Stream(walletTag("1"))}, ce.Streams)
	require.EqualValues(t, 1, a.conflicts(t))

	// The actor recovered the true state: 100 - 10 + 500.
	res, err := runtime.ExecuteTyped[Wallet](ctx, a.rt, wallet("0"), GetWallet{})
	require.NoError(t, err)
	require.EqualValues(t, 590, res.State.Balance)
	require.Equal(t, a.foldWallet(t, "0"), res.State)
	// A command folding the events conflicts on a bypass just the same.
	bypass.ID = journal.NewEventID()
	bypass.Data = json.RawMessage(`{"amount":10}`)
	_, err = e.j.Append(ctx, []journal.Event{bypass}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = a.fold.Execute(ctx, Transfer{From: "0", To: "1", Amount: 20})
	require.ErrorIs(t, err, runtime.ErrConflict)
	require.EqualValues(t, 2, a.conflicts(t))

	// And DCB commands see the true state: the whole balance can move.
	_, err = a.fold.Execute(ctx, Transfer{From: "0", To: "1", Amount: 600})
	require.NoError(t, err)
	res, err = runtime.ExecuteTyped[Wallet](ctx, a.rt, wallet("1"), DebitWallet{Amount: 710})
	require.NoError(t, err)
	require.Zero(t, res.State.Balance)
	res, err = runtime.ExecuteTyped[Wallet](ctx, a.rt, wallet("0"), GetWallet{})
	require.NoError(t, err)
	require.Zero(t, res.State.Balance)
	require.EqualValues(t, 2, a.conflicts(t))
}

func testTagQueries(t *testing.T, e *env) {
	a := startDCB(t, e)
	ctx := context.Background()
	a.openWallets(t, 3, 50)
	first, err := a.transfer.Execute(ctx, Transfer{From: "0", To: "2", Amount: 5})
	require.NoError(t, err)
	second, err := a.transfer.Execute(ctx, Transfer{From: "1", To: "2", Amount: 5})
	require.NoError(t, err)

	w2 := journal.Stream(walletTag("2"))
	s, err := a.rt.TagSummary(ctx, w2)
	require.NoError(t, err)
	require.EqualValues(t, 4, s.Version)
	require.Equal(t, second.Records[0].Position, s.LastPosition)
	n, err := a.rt.TagEventCount(ctx, w2)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	ok, err := a.rt.TagExists(ctx, w2)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.rt.TagExists(ctx, journal.Stream(walletTag("nope")))
	require.NoError(t, err)
	require.False(t, ok)

	group, err := a.rt.TagsOfGroup(ctx, "", "wallet")
	require.NoError(t, err)
	require.Len(t, group, 3)
	require.Equal(t, []uint64{3, 3, 4}, []uint64{group[0].Version, group[1].Version, group[2].Version})

	var since []journal.Record
	for r, err := range a.rt.TagEventsSince(ctx, w2, first.Records[0].Position, 0) {
		require.NoError(t, err)
		since = append(since, r)
	}
	require.Len(t, since, 1)
	require.Equal(t, second.Records[0].ID, since[0].ID)
	var limited int
	for _, err := range a.rt.TagEventsSince(ctx, w2, journal.Position{}, 2) {
		require.NoError(t, err)
		limited++
	}
	require.Equal(t, 2, limited)
}

func testDCBIdempotency(t *testing.T, e *env) {
	a := startDCB(t, e)
	ctx := context.Background()
	_, err := a.define.Execute(ctx, DefineCourse{Course: "c", Seats: 1})
	require.NoError(t, err)
	first, err := a.enrol.Execute(ctx, Enrol{Student: "s1", Course: "c"}, runtime.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	again, err := a.enrol.Execute(ctx, Enrol{Student: "s1", Course: "c"}, runtime.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Records[0].ID, again.Records[0].ID)
	// The same key with another command is refused, as on an aggregate.
	_, err = a.enrol.Execute(ctx, Enrol{Student: "s9", Course: "c"}, runtime.WithIdempotencyKey("k-1"))
	require.ErrorIs(t, err, runtime.ErrIdempotencyKeyReused)
	var kr *runtime.KeyReusedError
	require.ErrorAs(t, err, &kr)
	require.Equal(t, "k-1", kr.Key)
	require.Contains(t, err.Error(), `by DCB command "Enrol"`)
	_, err = a.enrol.Execute(ctx, Enrol{Student: "s2", Course: "c"}, runtime.WithIdempotencyKey("k-2"))
	require.ErrorIs(t, err, errCourseIsFull)
	n, err := a.rt.TagEventCount(ctx, journal.Stream(journal.NewTag("course", "c")))
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	require.NoError(t, a.rt.Shutdown(ctx))
	_, err = a.enrol.Execute(ctx, Enrol{Student: "s3", Course: "c"})
	require.ErrorIs(t, err, runtime.ErrShutdown)

	// A restarted runtime still knows the key.
	b := startDCB(t, e)
	again, err = b.enrol.Execute(ctx, Enrol{Student: "s1", Course: "c"}, runtime.WithIdempotencyKey("k-1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Records[0].ID, again.Records[0].ID)
	_, err = b.enrol.Execute(ctx, Enrol{Student: "s9", Course: "c"}, runtime.WithIdempotencyKey("k-1"))
	require.ErrorIs(t, err, runtime.ErrIdempotencyKeyReused, "also after a restart")
}

// Hold occupies its gate stream's actor until Release is closed.
type Hold struct {
	Started chan<- struct{}
	Release <-chan struct{}
}

// Touch is a DCB command over one gate tag that appends nothing.
type Touch struct{ Gate string }

func TestDCBReservationQueuesBehindCommandsAndTimesOut(t *testing.T) {
	t.Parallel()
	e := memoryEnv()
	rt := e.start(t, func(c *runtime.Config) { c.ReservationTimeout = 200 * time.Millisecond })
	touch := registerTouch(t, rt)
	ctx := context.Background()

	// A busy tag beyond the reservation timeout: the error names it.
	release, done := hold(t, rt, "g")
	_, err := touch.Execute(ctx, Touch{Gate: "g"})
	require.ErrorIs(t, err, runtime.ErrReservationTimeout)
	var te *runtime.ReservationTimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, journal.Stream("gate:g"), te.Stream)
	release()
	require.NoError(t, <-done)

	// A busy tag within the timeout: the command queues and then succeeds.
	release, done = hold(t, rt, "g")
	result := make(chan error, 1)
	go func() {
		_, err := touch.Execute(ctx, Touch{Gate: "g"})
		result <- err
	}()
	require.Eventually(t, func() bool { return rt.Pending(runtime.Target{Aggregate: "gate", ID: "g"}) > 0 }, 5*time.Second, time.Millisecond)
	release()
	require.NoError(t, <-done)
	require.NoError(t, <-result)
}

func TestDCBFaultyDefinitions(t *testing.T) {
	t.Parallel()
	e := memoryEnv()
	a := startDCB(t, e)
	ctx := context.Background()
	a.openWallets(t, 2, 10)

	_, err := runtime.RegisterDCB(a.rt, runtime.DCB[Transfer, int]{Name: "NoFuncs"})
	require.ErrorIs(t, err, runtime.ErrRegistration)
	_, err = runtime.RegisterDCB(a.rt, runtime.DCB[Transfer, int]{})
	require.ErrorIs(t, err, runtime.ErrRegistration)

	panicky := transferFoldDCB
	panicky.Name = "Panicky"
	panicky.Decide = func(Transfer, transferView) ([]any, error) { panic("boom") }
	cmd, err := runtime.RegisterDCB(a.rt, panicky)
	require.NoError(t, err)
	_, err = cmd.Execute(ctx, Transfer{From: "0", To: "1", Amount: 1})
	require.ErrorIs(t, err, runtime.ErrPanic)
	require.ErrorContains(t, err, "boom")
	var pe *runtime.PanicError
	require.ErrorAs(t, err, &pe, "the one panic error type, for aggregates and DCB commands alike")
	require.Equal(t, "Panicky", pe.Command)
	require.Equal(t, "decide", pe.Phase)
	require.NotEmpty(t, pe.Stack)

	unregistered := transferFoldDCB
	unregistered.Name = "Unregistered"
	unregistered.Decide = func(Transfer, transferView) ([]any, error) { return []any{struct{ X int }{1}}, nil }
	cmd, err = runtime.RegisterDCB(a.rt, unregistered)
	require.NoError(t, err)
	_, err = cmd.Execute(ctx, Transfer{From: "0", To: "1", Amount: 1})
	require.ErrorIs(t, err, runtime.ErrUnknownEvent)

	untagged := transferFoldDCB
	untagged.Name = "Untagged"
	untagged.Query = func(c Transfer) journal.Query {
		return journal.Query{Items: []journal.QueryItem{{Types: []string{"WalletOpened"}}}}
	}
	cmd, err = runtime.RegisterDCB(a.rt, untagged)
	require.NoError(t, err)
	_, err = cmd.Execute(ctx, Transfer{From: "0", To: "1", Amount: 1})
	require.ErrorIs(t, err, runtime.ErrInvalidCommand)

	// The wallets were never left reserved: a valid transfer still succeeds.
	_, err = a.transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 10})
	require.NoError(t, err)
}

// leaseRecorder records every lease its Sessions grant, so that a test can
// revoke them as a partition move's fence does.
type leaseRecorder struct {
	journal.Sessions
	mu     sync.Mutex
	leases []journal.Lease
}

func (r *leaseRecorder) Acquire(ctx context.Context, node journal.NodeSession, stream journal.StreamID, wait time.Duration) (journal.Lease, error) {
	l, err := r.Sessions.Acquire(ctx, node, stream, wait)
	if err == nil {
		r.mu.Lock()
		r.leases = append(r.leases, l)
		r.mu.Unlock()
	}
	return l, err
}

// revoke releases every lease granted so far behind the holders' backs and
// returns how many there were.
func (r *leaseRecorder) revoke(t *testing.T) int {
	r.mu.Lock()
	leases := r.leases
	r.leases = nil
	r.mu.Unlock()
	for _, l := range leases {
		_ = r.Sessions.Release(context.Background(), l)
	}
	return len(leases)
}

// testRevokedLeases: every lease of the live actors is revoked behind their
// backs (what a partition move's fence does); every command made afterwards,
// aggregate or DCB over two tags, succeeds at its first call: the actors
// acquire their streams again instead of granting or appending with the
// revoked lease. Three rounds: revoked, served, revoked again.
func testRevokedLeases(t *testing.T, e *env) {
	rec := &leaseRecorder{Sessions: e.s}
	withRec := *e
	withRec.s = rec
	a := startDCB(t, &withRec)
	ctx := context.Background()
	const wallets, initial = 6, 1000
	a.openWallets(t, wallets, initial)
	var credited, debited atomic.Int64
	for round := range 3 {
		revoked := rec.revoke(t)
		require.Positive(t, revoked, "round %d: no lease to revoke", round)
		var ok, refused atomic.Int64
		jobs(8, 120, func(i int) {
			from := rand.IntN(wallets)
			to := (from + 1 + rand.IntN(wallets-1)) % wallets
			var err error
			switch i % 3 {
			case 0:
				_, err = a.transfer.Execute(ctx, Transfer{From: fmt.Sprint(from), To: fmt.Sprint(to), Amount: 1 + rand.Int64N(50)})
			case 1:
				_, err = a.fold.Execute(ctx, Transfer{From: fmt.Sprint(from), To: fmt.Sprint(to), Amount: 1 + rand.Int64N(50)})
			default:
				amount := 1 + rand.Int64N(50)
				if i%2 == 0 {
					if _, err = a.rt.Execute(ctx, wallet(fmt.Sprint(from)), CreditWallet{Amount: amount}); err == nil {
						credited.Add(amount)
					}
				} else if _, err = a.rt.Execute(ctx, wallet(fmt.Sprint(from)), DebitWallet{Amount: amount}); err == nil {
					debited.Add(amount)
				}
			}
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, errNoFunds):
				refused.Add(1)
			default:
				t.Errorf("round %d, command %d after the leases were revoked: %v", round, i, err)
			}
		})
		t.Logf("round %d: %d leases revoked, then %d commands succeeded and %d were refused for funds", round, revoked, ok.Load(), refused.Load())
		require.Positive(t, len(rec.leases), "round %d: the actors did not acquire their streams again", round)
	}
	require.Zero(t, a.conflicts(t))
	var total int64
	for i := range wallets {
		id := fmt.Sprint(i)
		folded := a.foldWallet(t, id)
		res, err := runtime.ExecuteTyped[Wallet](ctx, a.rt, wallet(id), GetWallet{})
		require.NoError(t, err)
		require.Equal(t, folded, res.State, "wallet %s: the actor's state differs from the fold of its events", id)
		total += folded.Balance
	}
	require.Equal(t, int64(wallets*initial)+credited.Load()-debited.Load(), total, "money not conserved")
}
