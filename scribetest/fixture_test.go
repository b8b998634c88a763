package scribetest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/scribetest"
)

// A small bank: accounts with typed commands and a DCB transfer.

type Account struct {
	ID, Owner string
	Balance   int64
}

type AccountCommand interface{ accountCommand() }

type Open struct{ ID, Owner string }
type Deposit struct{ Amount int64 }
type Withdraw struct{ Amount int64 }

func (Open) accountCommand()     {}
func (Deposit) accountCommand()  {}
func (Withdraw) accountCommand() {}

type Opened struct{ ID, Owner string }
type Deposited struct{ Amount int64 }
type Withdrawn struct{ Amount int64 }

type Moved struct {
	From, To string
	Amount   int64
}

func (m Moved) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("account", m.From), journal.NewTag("account", m.To)}
}

type Transfer struct {
	From, To string
	Amount   int64
}

var errNoFunds = errors.New("insufficient funds")

func evolve(s Account, ev any) Account {
	switch e := ev.(type) {
	case Opened:
		s.ID, s.Owner = e.ID, e.Owner
	case Deposited:
		s.Balance += e.Amount
	case Withdrawn:
		s.Balance -= e.Amount
	case Moved:
		if e.From == s.ID {
			s.Balance -= e.Amount
		}
		if e.To == s.ID {
			s.Balance += e.Amount
		}
	}
	return s
}

// setup registers the domain on rt.
func setup(t testing.TB, rt *runtime.Runtime) (*runtime.Commands[Account, AccountCommand], *runtime.DCBCommand[Transfer, runtime.DCBStates]) {
	t.Helper()
	runtime.MustRegisterEvent[Opened](rt, "Opened", 1)
	runtime.MustRegisterEvent[Deposited](rt, "Deposited", 1)
	runtime.MustRegisterEvent[Withdrawn](rt, "Withdrawn", 1)
	runtime.MustRegisterEvent[Moved](rt, "Moved", 1)
	accounts := runtime.MustRegisterAggregateOf(rt, runtime.AggregateOf[Account, AccountCommand]{
		Name:    "account",
		Initial: func() Account { return Account{} },
		Decide: func(s Account, c AccountCommand) ([]any, error) {
			switch c := c.(type) {
			case Open:
				return []any{Opened{ID: c.ID, Owner: c.Owner}}, nil
			case Deposit:
				return []any{Deposited{Amount: c.Amount}}, nil
			case Withdraw:
				if c.Amount > s.Balance {
					return nil, errNoFunds
				}
				return []any{Withdrawn{Amount: c.Amount}}, nil
			}
			return nil, fmt.Errorf("unknown command %T", c)
		},
		Evolve: evolve,
	})
	uses, err := runtime.Uses[Account](rt, "account")
	if err != nil {
		t.Fatal(err)
	}
	transfer := runtime.MustRegisterDCB(rt, runtime.DCB[Transfer, runtime.DCBStates]{
		Name:  "Transfer",
		Uses:  []runtime.AggregateUse{uses},
		Query: func(c Transfer) journal.Query { return journal.Query{Items: uses.Items(c.From, c.To)} },
		Decide: func(c Transfer, st runtime.DCBStates) ([]any, error) {
			if uses.Of(st, c.From).Balance < c.Amount {
				return nil, errNoFunds
			}
			return []any{Moved{From: c.From, To: c.To, Amount: c.Amount}}, nil
		},
	})
	return accounts, transfer
}

func stores(t *testing.T, run func(t *testing.T, rt *runtime.Runtime)) {
	t.Run("Memory", func(t *testing.T) { t.Parallel(); run(t, scribetest.Memory(t)) })
	t.Run("Postgres", func(t *testing.T) { t.Parallel(); run(t, scribetest.PostgresRuntime(t)) })
}

func TestAggregateFixture(t *testing.T) {
	stores(t, func(t *testing.T, rt *runtime.Runtime) {
		accounts, _ := setup(t, rt)
		f := scribetest.Aggregate(t, rt, accounts)
		f.Given("1", Opened{ID: "1", Owner: "ada"}, Deposited{Amount: 100}).
			When(Withdraw{Amount: 30}).
			ThenEvents(Withdrawn{Amount: 30}).
			ThenState(Account{ID: "1", Owner: "ada", Balance: 70})
		f.Given("2", Opened{ID: "2", Owner: "bob"}).
			When(Withdraw{Amount: 1}).
			ThenError(errNoFunds)
		f.Given("3").When(Open{ID: "3", Owner: "cy"}).ThenEvents(Opened{ID: "3", Owner: "cy"})
	})
}

func TestDCBFixture(t *testing.T) {
	stores(t, func(t *testing.T, rt *runtime.Runtime) {
		accounts, transfer := setup(t, rt)
		f := scribetest.DCB(t, rt, transfer)
		f.Given(runtime.Target{Aggregate: "account", ID: "a"}, Opened{ID: "a", Owner: "ada"}, Deposited{Amount: 50}).
			Given(runtime.Target{Aggregate: "account", ID: "b"}, Opened{ID: "b", Owner: "bob"})
		f.When(Transfer{From: "a", To: "b", Amount: 20}).ThenEvents(Moved{From: "a", To: "b", Amount: 20})
		f.When(Transfer{From: "b", To: "a", Amount: 21}).ThenError(errNoFunds) // b holds the 20 moved to it
		f.When(Transfer{From: "b", To: "a", Amount: 20}).ThenEvents(Moved{From: "b", To: "a", Amount: 20})
		// The accounts' streams hold the transfers.
		for id, want := range map[string]int64{"a": 50, "b": 0} {
			st, err := accounts.State(t.Context(), id)
			if err != nil || st.State.Balance != want {
				t.Errorf("account %s: balance %d (%v), want %d", id, st.State.Balance, err, want)
			}
		}
	})
}

// recorder is a testing.TB that records failures instead of failing: the
// checks must report a wrong expectation.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

// Every check fails on a wrong expectation, saying what was expected and
// what happened.
func TestChecksReportWrongExpectations(t *testing.T) {
	rt := scribetest.Memory(t)
	accounts, transfer := setup(t, rt)
	cases := []struct {
		name  string
		check func(tb testing.TB)
		want  string
	}{
		{"other event", func(tb testing.TB) {
			scribetest.Aggregate(tb, rt, accounts).Given("x1", Deposited{Amount: 5}).When(Withdraw{Amount: 2}).ThenEvents(Withdrawn{Amount: 3})
		}, "appended other events"},
		{"events but rejected", func(tb testing.TB) {
			scribetest.Aggregate(tb, rt, accounts).Given("x2").When(Withdraw{Amount: 2}).ThenEvents(Withdrawn{Amount: 2})
		}, "got error: insufficient funds"},
		{"error but succeeded", func(tb testing.TB) {
			scribetest.Aggregate(tb, rt, accounts).Given("x3", Deposited{Amount: 5}).When(Withdraw{Amount: 2}).ThenError(errNoFunds)
		}, "got success with events scribetest_test.Withdrawn{Amount:2}"},
		{"other error", func(tb testing.TB) {
			scribetest.Aggregate(tb, rt, accounts).Given("x4").When(Withdraw{Amount: 2}).ThenError(errors.New("other"))
		}, "want an error matching other"},
		{"other state", func(tb testing.TB) {
			scribetest.Aggregate(tb, rt, accounts).Given("x5", Deposited{Amount: 5}).When(Deposit{Amount: 1}).ThenState(Account{Balance: 7})
		}, "state after the command"},
		{"dcb other event", func(tb testing.TB) {
			scribetest.DCB(tb, rt, transfer).Given(accounts.Target("y1"), Deposited{Amount: 5}).When(Transfer{From: "y1", To: "y2", Amount: 5}).ThenEvents()
		}, "appended other events"},
		{"dcb error but succeeded", func(tb testing.TB) {
			scribetest.DCB(tb, rt, transfer).Given(accounts.Target("z1"), Deposited{Amount: 5}).When(Transfer{From: "z1", To: "z2", Amount: 5}).ThenError(errNoFunds)
		}, "got success with events"},
	}
	for _, c := range cases {
		r := &recorder{TB: t}
		c.check(r)
		if got := r.failures(); !strings.Contains(got, c.want) {
			t.Errorf("%s: the check must fail with %q; it reported %q", c.name, c.want, got)
		}
	}
}

// The untyped path refuses a command that is not the aggregate's type.
func TestUntypedPathRefusesAnotherCommandType(t *testing.T) {
	rt := scribetest.Memory(t)
	accounts, _ := setup(t, rt)
	_, err := rt.Execute(t.Context(), accounts.Target("1"), Transfer{From: "1", To: "2"})
	if !errors.Is(err, runtime.ErrUnknownCommand) {
		t.Fatalf("want ErrUnknownCommand, got %v", err)
	}
}
