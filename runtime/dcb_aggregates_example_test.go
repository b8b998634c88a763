package runtime_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

// A stock aggregate per product, and an order over two products decided by
// a DCB command from both products' aggregate states.
type (
	Restock struct {
		SKU   string
		Units int
	}

	Restocked struct {
		SKU   string `json:"sku"`
		Units int    `json:"units"`
	}
	OrderLine struct {
		SKU   string `json:"sku"`
		Units int    `json:"units"`
	}
	// OrderPlaced is appended by the order DCB command on every product it
	// takes units from.
	OrderPlaced struct {
		Order string      `json:"order"`
		Lines []OrderLine `json:"lines"`
	}
	Stock struct {
		SKU   string `json:"sku"`
		Units int    `json:"units"`
	}

	PlaceOrder struct {
		Order string
		Lines []OrderLine
	}
)

func (e OrderPlaced) Tags() []journal.Tag {
	tags := make([]journal.Tag, len(e.Lines))
	for i, l := range e.Lines {
		tags[i] = journal.NewTag("product", l.SKU)
	}
	return tags
}

var errOutOfStock = errors.New("out of stock")

// evolveStock is the product aggregate's fold, the only one written: the
// order command decides from its states.
func evolveStock(s Stock, ev any) Stock {
	switch e := ev.(type) {
	case Restocked:
		s.SKU, s.Units = e.SKU, s.Units+e.Units
	case OrderPlaced:
		for _, l := range e.Lines {
			if l.SKU == s.SKU {
				s.Units -= l.Units
			}
		}
	}
	return s
}

// A DCB command over two aggregates: Uses names the product aggregate,
// Decide reads each product's Stock through the typed handle, and the result
// holds both states after the order.
func ExampleUses() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New(), NodeID: "shop"})
	if err != nil {
		panic(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(runtime.RegisterEvent[Restocked](rt, "Restocked", 1))
	must(runtime.RegisterEvent[OrderPlaced](rt, "OrderPlaced", 1))
	must(runtime.RegisterAggregate(rt, runtime.Aggregate[Stock]{
		Name:    "product",
		Initial: func() Stock { return Stock{} },
		Decide: func(s Stock, cmd any) ([]any, error) {
			if c, ok := cmd.(Restock); ok {
				return []any{Restocked{SKU: c.SKU, Units: c.Units}}, nil
			}
			return nil, fmt.Errorf("unknown command %T", cmd)
		},
		Evolve: evolveStock,
	}))
	products, err := runtime.Uses[Stock](rt, "product")
	must(err)
	place, err := runtime.RegisterDCB(rt, runtime.DCB[PlaceOrder, runtime.DCBStates]{
		Name: "PlaceOrder",
		Uses: []runtime.AggregateUse{products},
		Query: func(o PlaceOrder) journal.Query {
			var skus []string
			for _, l := range o.Lines {
				skus = append(skus, l.SKU)
			}
			return journal.Query{Items: products.Items(skus...)}
		},
		Decide: func(o PlaceOrder, s runtime.DCBStates) ([]any, error) {
			for _, l := range o.Lines {
				if stock := products.Of(s, l.SKU); stock.Units < l.Units {
					return nil, fmt.Errorf("order %s: %d of %q left: %w", o.Order, stock.Units, l.SKU, errOutOfStock)
				}
			}
			return []any{OrderPlaced{Order: o.Order, Lines: o.Lines}}, nil
		},
	})
	must(err)

	for _, r := range []Restock{{SKU: "pen", Units: 3}, {SKU: "ink", Units: 1}} {
		_, err := rt.Execute(ctx, runtime.Target{Aggregate: "product", ID: r.SKU}, r)
		must(err)
	}
	res, err := place.Execute(ctx, PlaceOrder{Order: "o1", Lines: []OrderLine{{SKU: "pen", Units: 2}, {SKU: "ink", Units: 1}}})
	must(err)
	fmt.Println("pens left:", products.Of(res.States, "pen").Units, "ink left:", products.Of(res.States, "ink").Units)
	_, err = place.Execute(ctx, PlaceOrder{Order: "o2", Lines: []OrderLine{{SKU: "pen", Units: 1}, {SKU: "ink", Units: 1}}})
	fmt.Println(err, errors.Is(err, errOutOfStock))

	// A misspelt event type in a query is refused at registration.
	_, err = runtime.RegisterDCB(rt, runtime.DCB[PlaceOrder, int]{
		Name: "Typo",
		Query: func(o PlaceOrder) journal.Query {
			return journal.Query{Items: []journal.QueryItem{{Types: []string{"OrderPlacd"}, Tags: []journal.Tag{"product:pen"}}}}
		},
		Evolve: func(_ PlaceOrder, n int, _ runtime.DCBEvent) int { return n + 1 },
		Decide: func(PlaceOrder, int) ([]any, error) { return nil, nil },
	})
	fmt.Println(errors.Is(err, runtime.ErrRegistration))
	// Output:
	// pens left: 1 ink left: 0
	// order o2: 0 of "ink" left: out of stock true
	// true
}
