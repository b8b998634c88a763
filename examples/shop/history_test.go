package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/scribetest"
)

// TestShopHistory stores events as the shop's first release wrote them
// (StockAdded, since renamed Restocked; ProductAdded, since split into
// ProductListed and Restocked) and runs this build on them, on memory and
// on Postgres: State, a restock (recovery), an order decided from the
// products' states (a DCB command), the read check, and the hash chain.
func TestShopHistory(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testShopHistory(t, "", "") })
	t.Run("postgres", func(t *testing.T) {
		url, schema := scribetest.Schema(t)
		testShopHistory(t, url, schema)
	})
}

// appendFirstRelease appends events of the first release's shapes to the
// products' streams, as that release stored them, bypassing the runtime.
func appendFirstRelease(t *testing.T, j journal.Journal) {
	t.Helper()
	event := func(typ, sku string, units int) journal.Event {
		data, err := json.Marshal(productAddedV1{SKU: sku, Units: units})
		require.NoError(t, err)
		return journal.Event{ID: journal.NewEventID(), Type: typ, SchemaVersion: 1, Tags: []journal.Tag{journal.NewTag("product", sku)}, Data: data}
	}
	_, err := j.Append(context.Background(), []journal.Event{
		event("ProductAdded", "pen", 5),
		event("StockAdded", "pen", 2),
		event("ProductAdded", "ink", 1),
	}, journal.AppendOptions{})
	require.NoError(t, err)
}

// openKeepingJournal is open, also returning the journal the shop runs on,
// and running the read check of Runtime.Start before serving.
func openKeepingJournal(t *testing.T, url, schema string) (*Shop, journal.Journal, func()) {
	t.Helper()
	ctx := t.Context()
	var j journal.Journal
	svc, err := scribe.Open(ctx, scribe.Config{DatabaseURL: url, Schema: schema, NodeID: "shop-1", Runtime: func(c *runtime.Config) { j = c.Journal }})
	require.NoError(t, err)
	done := func() { _ = svc.Close(context.Background()) }
	t.Cleanup(done)
	shop, err := register(svc.Runtime)
	require.NoError(t, err)
	require.NoError(t, svc.Runtime.Start(ctx), "every stored version is readable")
	orders, err := svc.Project(ordersProjection(svc.Runtime))
	require.NoError(t, err)
	shop.orders, shop.ordersAt = orders.Rows(), orders.WaitFor
	return shop, j, done
}

func testShopHistory(t *testing.T, url, schema string) {
	ctx := t.Context()
	shop, j, done := openKeepingJournal(t, url, schema)
	appendFirstRelease(t, j)

	st, exists, err := shop.Stock(ctx, "pen")
	require.NoError(t, err)
	require.True(t, exists)
	require.Equal(t, Stock{SKU: "pen", Units: 7}, st, "ProductAdded's split and StockAdded's rename, folded")

	require.NoError(t, shop.Restock(ctx, "pen", 1))
	var types []string
	for rec, err := range j.ReadStream(ctx, journal.StreamID{Tag: journal.NewTag("product", "pen")}, 1, 0) {
		require.NoError(t, err)
		types = append(types, rec.Type)
	}
	require.Equal(t, []string{"ProductAdded", "StockAdded", "Restocked"}, types, "stored events keep their types")

	left, pos, err := shop.Place(ctx, "o1", Line{SKU: "pen", Units: 3}, Line{SKU: "ink", Units: 1})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"pen": 5, "ink": 0}, left)
	require.NoError(t, shop.ordersAt(ctx, pos))
	o, ok, err := shop.Order(ctx, "o1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 4, o.Units)

	check, err := runtime.CheckStored(ctx, shop.rt)
	require.NoError(t, err)
	require.NoError(t, check.Err())
	require.Equal(t, uint64(5), check.Events)
	for _, sku := range []string{"pen", "ink"} {
		_, err := journal.VerifyStream(ctx, j, journal.StreamID{Tag: journal.NewTag("product", sku)})
		require.NoError(t, err, "the chain of %s verifies", sku)
	}

	if url == "" {
		return // the memory journal ends with the shop
	}
	// A restart on the stored history: Start finds every stored version
	// readable, and the state is the same.
	done()
	shop, _, _ = openKeepingJournal(t, url, schema)
	st, _, err = shop.Stock(ctx, "pen")
	require.NoError(t, err)
	require.Equal(t, 5, st.Units)
}
