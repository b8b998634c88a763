package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
)

// The domain: products with stock, and orders over several products.
type (
	// ProductCommand is a command of the product aggregate: the compiler
	// refuses any other type where one is expected.
	ProductCommand interface{ productCommand() }
	// Restock adds units of a product.
	Restock struct {
		SKU   string
		Units int
	}
	// PlaceOrder takes units of several products at once (a DCB command).
	PlaceOrder struct {
		Order string
		Lines []Line
	}
	Line struct {
		SKU   string `json:"sku"`
		Units int    `json:"units"`
	}
	// ProductListed says a product was listed: what the first release's
	// ProductAdded is read as, with a Restocked (history.go). This build
	// reads it and lists a product by its first Restocked.
	ProductListed struct {
		SKU string `json:"sku"`
	}
	Restocked struct {
		SKU   string `json:"sku"`
		Units int    `json:"units"`
	}
	// OrderPlaced carries every product's tag it takes units from.
	OrderPlaced struct {
		Order string `json:"order"`
		Lines []Line `json:"lines"`
	}
	// Stock is the product aggregate's state.
	Stock struct {
		SKU   string `json:"sku"`
		Units int    `json:"units"`
	}
	// OrderView is a row of the orders read model.
	OrderView struct {
		Order string `json:"order"`
		Lines []Line `json:"lines"`
		Units int    `json:"units"`
	}
)

func (Restock) productCommand() {}

// Tags puts an order on every product it touches.
func (e OrderPlaced) Tags() []journal.Tag {
	tags := make([]journal.Tag, len(e.Lines))
	for i, l := range e.Lines {
		tags[i] = journal.NewTag("product", l.SKU)
	}
	return tags
}

// ErrOutOfStock rejects an order a product cannot serve; ErrInvalidUnits a
// restock of no units or fewer.
var (
	ErrOutOfStock   = errors.New("out of stock")
	ErrInvalidUnits = errors.New("units must be positive")
)

func evolve(s Stock, ev any) Stock {
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

// Shop is the service: the runtime, the order command and the read model.
type Shop struct {
	rt       *runtime.Runtime
	product  *runtime.Commands[Stock, ProductCommand]
	products runtime.AggregateState[Stock]
	place    *runtime.DCBCommand[PlaceOrder, runtime.DCBStates]
	orders   projection.RowReader
	// ordersAt waits until the read model applied the event at a position.
	ordersAt func(context.Context, journal.Position) error
}

// ordersView is the read model's one collection.
var ordersView = projection.Collection[OrderView]{Name: "orders"}

// ordersProjection is the orders read model, written once for every store;
// events are decoded by the runtime (upcasts and erasure included).
func ordersProjection(rt *runtime.Runtime) projection.RowProjection {
	return projection.RowProjection{
		Name: "orders", Version: 1,
		Query: journal.Query{Items: []journal.QueryItem{{Types: []string{"OrderPlaced"}}}},
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			for _, rec := range b.Records {
				o, err := runtime.DecodeAs[OrderPlaced](rt, rec)
				if err != nil {
					return err
				}
				v := OrderView{Order: o.Order, Lines: o.Lines}
				for _, l := range o.Lines {
					v.Units += l.Units
				}
				if err := ordersView.Put(ctx, rows, o.Order, v); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// register declares the events (with those of the shop's history), the
// product aggregate and the order command.
func register(rt *runtime.Runtime) (*Shop, error) {
	if err := registerHistory(rt); err != nil {
		return nil, err
	}
	runtime.MustRegisterEvent[Restocked](rt, "Restocked", 1)
	runtime.MustRegisterEvent[OrderPlaced](rt, "OrderPlaced", 1)
	product := runtime.MustRegisterAggregateOf(rt, runtime.AggregateOf[Stock, ProductCommand]{
		Name:    "product",
		Initial: func() Stock { return Stock{} },
		Decide: func(s Stock, cmd ProductCommand) ([]any, error) {
			switch c := cmd.(type) {
			case Restock:
				if c.Units <= 0 {
					return nil, fmt.Errorf("restock of %s: %d units: %w", c.SKU, c.Units, ErrInvalidUnits)
				}
				return []any{Restocked{SKU: c.SKU, Units: c.Units}}, nil
			}
			return nil, fmt.Errorf("shop: no rule for %T", cmd)
		},
		Evolve: evolve,
	})
	products, err := runtime.Uses[Stock](rt, "product")
	if err != nil {
		return nil, err
	}
	place := runtime.MustRegisterDCB(rt, runtime.DCB[PlaceOrder, runtime.DCBStates]{
		Name: "PlaceOrder",
		Uses: []runtime.AggregateUse{products},
		Query: func(o PlaceOrder) journal.Query {
			skus := make([]string, len(o.Lines))
			for i, l := range o.Lines {
				skus[i] = l.SKU
			}
			return journal.Query{Items: products.Items(skus...)}
		},
		Decide: func(o PlaceOrder, s runtime.DCBStates) ([]any, error) {
			for _, l := range o.Lines {
				if left := products.Of(s, l.SKU).Units; left < l.Units {
					return nil, fmt.Errorf("order %s: %d of %s left, %d asked: %w", o.Order, left, l.SKU, l.Units, ErrOutOfStock)
				}
			}
			return []any{OrderPlaced{Order: o.Order, Lines: o.Lines}}, nil
		},
	})
	return &Shop{rt: rt, product: product, products: products, place: place}, nil
}

// Restock adds units to a product.
func (s *Shop) Restock(ctx context.Context, sku string, units int) error {
	_, err := s.product.Execute(ctx, sku, Restock{SKU: sku, Units: units})
	return err
}

// Place places an order and returns the products' stock after it.
func (s *Shop) Place(ctx context.Context, order string, lines ...Line) (map[string]int, journal.Position, error) {
	res, err := s.place.Execute(ctx, PlaceOrder{Order: order, Lines: lines}, runtime.WithIdempotencyKey("order-"+order))
	if err != nil {
		return nil, journal.Position{}, err
	}
	left := map[string]int{}
	for _, l := range lines {
		if res.Duplicate { // a retry: the order was placed before
			st, _, err := s.Stock(ctx, l.SKU)
			if err != nil {
				return nil, journal.Position{}, err
			}
			left[l.SKU] = st.Units
			continue
		}
		left[l.SKU] = s.products.Of(res.States, l.SKU).Units
	}
	return left, res.Records[len(res.Records)-1].Position, nil
}

// Stock reads a product's stock without its actor (any node).
func (s *Shop) Stock(ctx context.Context, sku string) (Stock, bool, error) {
	st, err := s.product.State(ctx, sku)
	return st.State, st.Exists, err
}

// Order reads an order from the read model.
func (s *Shop) Order(ctx context.Context, id string) (OrderView, bool, error) {
	return ordersView.Get(ctx, s.orders, id)
}
