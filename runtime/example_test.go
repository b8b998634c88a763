package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

// Commands, events and state of a small bank account.
type (
	OpenAccount struct{ Owner string }
	Deposit     struct{ Amount int }
	Withdraw    struct{ Amount int }

	AccountOpened struct {
		Owner string `json:"owner"`
	}
	MoneyDeposited struct {
		Amount int `json:"amount"`
	}
	MoneyWithdrawn struct {
		Amount int `json:"amount"`
	}

	Account struct {
		Owner   string `json:"owner"`
		Balance int    `json:"balance"`
	}
)

var ErrInsufficientFunds = errors.New("insufficient funds")

func decideAccount(s Account, cmd any) ([]any, error) {
	switch c := cmd.(type) {
	case OpenAccount:
		if s.Owner != "" {
			return nil, errors.New("account already open")
		}
		return []any{AccountOpened{Owner: c.Owner}}, nil
	case Deposit:
		return []any{MoneyDeposited{Amount: c.Amount}}, nil
	case Withdraw:
		if c.Amount > s.Balance {
			return nil, fmt.Errorf("%w: balance %d, withdrawal %d", ErrInsufficientFunds, s.Balance, c.Amount)
		}
		return []any{MoneyWithdrawn{Amount: c.Amount}}, nil
	}
	return nil, fmt.Errorf("unknown command %T", cmd)
}

func evolveAccount(s Account, ev any) Account {
	switch e := ev.(type) {
	case AccountOpened:
		s.Owner = e.Owner
	case MoneyDeposited:
		s.Balance += e.Amount
	case MoneyWithdrawn:
		s.Balance -= e.Amount
	}
	return s
}

func Example() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New(), NodeID: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()

	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	must(runtime.RegisterEvent[AccountOpened](rt, "AccountOpened", 1))
	must(runtime.RegisterEvent[MoneyDeposited](rt, "MoneyDeposited", 1))
	must(runtime.RegisterEvent[MoneyWithdrawn](rt, "MoneyWithdrawn", 1))
	must(runtime.RegisterAggregate(rt, runtime.Aggregate[Account]{
		Name:          "account",
		Initial:       func() Account { return Account{} },
		Decide:        decideAccount,
		Evolve:        evolveAccount,
		SchemaVersion: 1,
	}))

	acct := runtime.Target{Aggregate: "account", ID: "42"}
	res, err := runtime.ExecuteTyped[Account](ctx, rt, acct, OpenAccount{Owner: "Ada"})
	must(err)
	fmt.Println("opened by", res.State.Owner, "at version", res.Version, "on stream", res.Stream.Tag)

	res, err = runtime.ExecuteTyped[Account](ctx, rt, acct, Deposit{Amount: 100})
	must(err)
	fmt.Println("balance", res.State.Balance, "event", res.Records[0].Type)

	_, err = rt.Execute(ctx, acct, Withdraw{Amount: 500})
	fmt.Println("overdraw refused:", errors.Is(err, ErrInsufficientFunds))

	// The same idempotency key executes once.
	for range 2 {
		res, err = runtime.ExecuteTyped[Account](ctx, rt, acct, Withdraw{Amount: 30}, runtime.WithIdempotencyKey("atm-7"))
		must(err)
		fmt.Println("withdrawn, version", res.Version, "duplicate", res.Duplicate, "balance", res.State.Balance)
	}
	// Output:
	// opened by Ada at version 1 on stream account:42
	// balance 100 event MoneyDeposited
	// overdraw refused: true
	// withdrawn, version 3 duplicate false balance 70
	// withdrawn, version 3 duplicate true balance 70
}

// Reading without the stream's actor: the state folded from the journal, and
// the stream's events decoded into their registered Go types.
func ExampleState() {
	ctx := context.Background()
	j := memory.New()
	rt, err := runtime.New(ctx, runtime.Config{Journal: j, NodeID: "reader-example"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
	_ = runtime.RegisterEvent[AccountOpened](rt, "AccountOpened", 1)
	_ = runtime.RegisterEvent[MoneyDeposited](rt, "MoneyDeposited", 1)
	_ = runtime.RegisterEvent[MoneyWithdrawn](rt, "MoneyWithdrawn", 1)
	_ = runtime.RegisterAggregate(rt, runtime.Aggregate[Account]{
		Name: "account", Initial: func() Account { return Account{} },
		Decide: decideAccount, Evolve: evolveAccount, SchemaVersion: 1,
	})
	acct := runtime.Target{Aggregate: "account", ID: "7"}
	_, _ = rt.Execute(ctx, acct, OpenAccount{Owner: "Grace"})
	res, _ := rt.Execute(ctx, acct, Deposit{Amount: 40})

	s, err := runtime.State[Account](ctx, rt, acct, runtime.AtLeastVersion(res.Version))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.State.Owner, s.State.Balance, "at version", s.Version)

	for d, err := range rt.Decoding(j.ReadStream(ctx, acct.Stream(), 1, 0)) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %T %+v\n", d.Record.Version(acct.Stream().Tag), d.Value, d.Value)
	}
	// Output:
	// Grace 40 at version 2
	// 1 runtime_test.AccountOpened {Owner:Grace}
	// 2 runtime_test.MoneyDeposited {Amount:40}
}
