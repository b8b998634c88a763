package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

// The code the docs' concepts and reading pages show, compiled and run: a
// typed aggregate, a DCB command over aggregate states, reads without the
// stream's actor.

// AccountCommand is the account aggregate's command type: only its
// commands implement it, so the compiler refuses any other.
type AccountCommand interface{ accountCommand() }

func (OpenAccount) accountCommand() {}
func (Deposit) accountCommand()     {}
func (Withdraw) accountCommand()    {}

// decide is the account's Decide, typed: it cannot be given another
// aggregate's command.
func decide(s Account, cmd AccountCommand) ([]any, error) {
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
	return nil, fmt.Errorf("no rule for %T", cmd)
}

// SKUs lists the products an order takes units of.
func (o PlaceOrder) SKUs() []string {
	skus := make([]string, len(o.Lines))
	for i, l := range o.Lines {
		skus[i] = l.SKU
	}
	return skus
}

// depositTyped is the concepts page's aggregate: a runtime, an event, a
// typed aggregate and one command.
func depositTyped(ctx context.Context) error {
	rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New(), NodeID: os.Getenv("POD_NAME")})
	if err != nil {
		return err
	}
	defer rt.Shutdown(context.WithoutCancel(ctx))
	runtime.MustRegisterEvent[MoneyDeposited](rt, "MoneyDeposited", 1)
	accounts := runtime.MustRegisterAggregateOf(rt, runtime.AggregateOf[Account, AccountCommand]{
		Name: "account", Initial: func() Account { return Account{} },
		Decide: decide, Evolve: evolveAccount, SchemaVersion: 1,
	})
	res, err := accounts.Execute(ctx, "42", Deposit{Amount: 100}, runtime.WithIdempotencyKey("atm-7"))
	if err != nil {
		return err // decide's own error, as it returned it
	}
	// res.State.Balance, res.Version, res.Records (durable when Execute returns)
	fmt.Println("balance", res.State.Balance, "at version", res.Version, res.Records[0].Type)
	return nil
}

// A typed aggregate: accounts.Execute takes only an AccountCommand.
func ExampleAggregateOf() {
	if err := depositTyped(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// balance 100 at version 1 MoneyDeposited
}

// placeOrder is the concepts page's DCB command over aggregate states.
func placeOrder(ctx context.Context, rt *runtime.Runtime, order PlaceOrder) (int, error) {
	products, err := runtime.Uses[Stock](rt, "product") // ErrRegistration if Stock is not its state type
	if err != nil {
		return 0, err
	}
	place, err := runtime.RegisterDCB(rt, runtime.DCB[PlaceOrder, runtime.DCBStates]{
		Name:  "PlaceOrder",
		Uses:  []runtime.AggregateUse{products},
		Query: func(o PlaceOrder) journal.Query { return journal.Query{Items: products.Items(o.SKUs()...)} },
		Decide: func(o PlaceOrder, s runtime.DCBStates) ([]any, error) {
			for _, l := range o.Lines {
				if products.Of(s, l.SKU).Units < l.Units { // products.Of returns a Stock
					return nil, errOutOfStock
				}
			}
			return []any{OrderPlaced{Order: o.Order, Lines: o.Lines}}, nil
		},
	})
	if err != nil {
		return 0, err
	}
	res, err := place.Execute(ctx, order)
	if err != nil {
		return 0, err
	}
	pensLeft := products.Of(res.States, "pen").Units
	return pensLeft, nil
}

// A DCB command deciding from two products' aggregate states.
func ExampleUses_placeOrder() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New(), NodeID: "docs-shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
	runtime.MustRegisterEvent[Restocked](rt, "Restocked", 1)
	runtime.MustRegisterEvent[OrderPlaced](rt, "OrderPlaced", 1)
	runtime.MustRegisterAggregate(rt, runtime.Aggregate[Stock]{
		Name:    "product",
		Initial: func() Stock { return Stock{} },
		Decide: func(s Stock, cmd any) ([]any, error) {
			if c, ok := cmd.(Restock); ok {
				return []any{Restocked{SKU: c.SKU, Units: c.Units}}, nil
			}
			return nil, fmt.Errorf("no rule for %T", cmd)
		},
		Evolve: evolveStock,
	})
	for _, r := range []Restock{{SKU: "pen", Units: 3}, {SKU: "ink", Units: 1}} {
		if _, err := rt.Execute(ctx, runtime.Target{Aggregate: "product", ID: r.SKU}, r); err != nil {
			log.Fatal(err)
		}
	}
	left, err := placeOrder(ctx, rt, PlaceOrder{Order: "o1", Lines: []OrderLine{{SKU: "pen", Units: 2}, {SKU: "ink", Units: 1}}})
	fmt.Println("pens left:", left, err)
	// Output:
	// pens left: 1 <nil>
}

// readAccount is the reading page's code: a state read without the
// stream's actor (reading one's own write), and a stream's events decoded.
func readAccount(ctx context.Context, rt *runtime.Runtime, j journal.Journal, accounts *runtime.Commands[Account, AccountCommand]) error {
	res, err := accounts.Execute(ctx, "42", Deposit{Amount: 5})
	if err != nil {
		return err
	}
	acc, err := accounts.State(ctx, "42", runtime.AtLeastVersion(res.Version)) // polls until the stream has that version, or ctx ends
	if err != nil {
		return err
	}
	fmt.Println("balance", acc.State.Balance, "exists", acc.Exists)

	rec := res.Records[0]
	for d, err := range rt.Decoding(j.ReadStream(ctx, journal.Stream("account:42"), 1, 0)) {
		if err != nil {
			return err // a read error, or a record this deployment cannot decode (named in the error)
		}
		switch e := d.Value.(type) {
		case MoneyDeposited:
			fmt.Println(d.Record.Version("account:42"), "deposited", e.Amount)
		}
	}
	dep, err := runtime.DecodeAs[MoneyDeposited](rt, rec) // when only one type can come back
	if err != nil {
		return err
	}
	fmt.Println("decoded", dep.Amount)
	return nil
}

// Reads need no actor and no lease: the state folded from the store, and
// a stream's events decoded into their registered types.
func ExampleCommands_State() {
	ctx := context.Background()
	j := memory.New()
	rt, err := runtime.New(ctx, runtime.Config{Journal: j, NodeID: "docs-reader"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
	runtime.MustRegisterEvent[MoneyDeposited](rt, "MoneyDeposited", 1)
	accounts := runtime.MustRegisterAggregateOf(rt, runtime.AggregateOf[Account, AccountCommand]{
		Name: "account", Initial: func() Account { return Account{} },
		Decide: decide, Evolve: evolveAccount,
	})
	if _, err := accounts.Execute(ctx, "42", Deposit{Amount: 100}); err != nil {
		log.Fatal(err)
	}
	if err := readAccount(ctx, rt, j, accounts); err != nil {
		log.Fatal(err)
	}
	// Output:
	// balance 105 exists true
	// 1 deposited 100
	// 2 deposited 5
	// decoded 5
}
