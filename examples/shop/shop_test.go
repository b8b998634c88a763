package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/scribetest"
)

// TestShop runs the same shop on memory and on Postgres: an order decided
// from two products' states, a refusal, an idempotent retry, the read model
// and State.
func TestShop(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testShop(t, "", "") })
	t.Run("postgres", func(t *testing.T) {
		url, schema := scribetest.Schema(t) // a fresh schema, dropped at the end
		testShop(t, url, schema)
	})
}

// The shop's rules, given/when/then, on a runtime in memory.
func TestShopRules(t *testing.T) {
	rt := scribetest.Memory(t)
	shop, err := register(rt)
	require.NoError(t, err)

	products := scribetest.Aggregate(t, rt, shop.product)
	products.Given("pen", Restocked{SKU: "pen", Units: 2}).
		When(Restock{SKU: "pen", Units: 3}).
		ThenEvents(Restocked{SKU: "pen", Units: 3}).
		ThenState(Stock{SKU: "pen", Units: 5})
	products.Given("ink").When(Restock{SKU: "ink", Units: 0}).ThenError(ErrInvalidUnits)

	orders := scribetest.DCB(t, rt, shop.place).
		Given(shop.product.Target("cap"), Restocked{SKU: "cap", Units: 1}).
		Given(shop.product.Target("nib"), Restocked{SKU: "nib", Units: 4})
	lines := []Line{{SKU: "cap", Units: 1}, {SKU: "nib", Units: 2}}
	orders.When(PlaceOrder{Order: "o1", Lines: lines}).ThenEvents(OrderPlaced{Order: "o1", Lines: lines})
	orders.When(PlaceOrder{Order: "o2", Lines: lines}).ThenError(ErrOutOfStock) // no cap left
	orders.When(PlaceOrder{Order: "o3", Lines: []Line{{SKU: "nib", Units: 2}}}, runtime.WithIdempotencyKey("o3")).
		ThenEvents(OrderPlaced{Order: "o3", Lines: []Line{{SKU: "nib", Units: 2}}})
}

func testShop(t *testing.T, url, schema string) {
	ctx := t.Context()
	shop, done, err := open(ctx, url, schema)
	require.NoError(t, err)
	defer done()
	require.NoError(t, shop.Restock(ctx, "pen", 3))
	require.NoError(t, shop.Restock(ctx, "ink", 1))

	left, pos, err := shop.Place(ctx, "o1", Line{SKU: "pen", Units: 2}, Line{SKU: "ink", Units: 1})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"pen": 1, "ink": 0}, left, "the states after the order, from the DCB result")
	again, _, err := shop.Place(ctx, "o1", Line{SKU: "pen", Units: 2}, Line{SKU: "ink", Units: 1})
	require.NoError(t, err)
	require.Equal(t, left, again, "a retry of the order takes nothing twice")
	_, _, err = shop.Place(ctx, "o2", Line{SKU: "pen", Units: 1}, Line{SKU: "ink", Units: 1})
	require.ErrorIs(t, err, ErrOutOfStock)

	require.NoError(t, shop.ordersAt(ctx, pos))
	o, ok, err := shop.Order(ctx, "o1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, o.Units)
	_, ok, err = shop.Order(ctx, "o2")
	require.NoError(t, err)
	require.False(t, ok, "a refused order is not in the read model")

	st, exists, err := shop.Stock(ctx, "pen")
	require.NoError(t, err)
	require.True(t, exists)
	require.Equal(t, 1, st.Units)
	_, exists, err = shop.Stock(ctx, "chalk")
	require.NoError(t, err)
	require.False(t, exists, "a product never stocked does not exist")
}
