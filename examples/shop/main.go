package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
)

func main() {
	db := flag.String("db", "", "Postgres URL (default: in memory)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	shop, done, err := open(ctx, *db, "shop")
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	if err := demo(ctx, shop); err != nil {
		log.Fatal(err)
	}
}

// open starts the shop on Postgres (url, in schema) or in memory (url
// empty): the only code that differs between the two. done stops it.
func open(ctx context.Context, url, schema string) (shop *Shop, done func(), err error) {
	cfg := runtime.Config{Journal: memory.New(), NodeID: "shop-1"}
	var store *postgres.Store
	if url != "" {
		if store, err = postgres.Open(ctx, url, postgres.WithSchema(schema)); err != nil {
			return nil, nil, err
		}
		cfg.Journal, cfg.Snapshots = store.Journal, store.Snapshots
	}
	rt, err := runtime.New(ctx, cfg)
	if err == nil {
		shop, err = register(rt)
	}
	var stopOrders func()
	if err == nil && store == nil {
		stopOrders, err = runOrders(ctx, shop, cfg.Journal, projection.NewMemoryStore())
	} else if err == nil {
		stopOrders, err = runOrders(ctx, shop, store.Journal, store.Projections)
	}
	if err != nil {
		if store != nil {
			store.Close()
		}
		return nil, nil, err
	}
	return shop, func() {
		stopOrders()
		_ = rt.Shutdown(context.Background())
		if store != nil {
			store.Close()
		}
	}, nil
}

// runOrders runs the orders read model on store (either store: the
// projection is written once) until the returned stop is called.
func runOrders[Tx any](ctx context.Context, s *Shop, src projection.Source, store projection.RowStore[Tx]) (func(), error) {
	r, err := projection.NewRunner(src, store, projection.Bind(store, ordersProjection(s.rt)), projection.Options{Owner: "shop-1"})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() { defer close(ended); _ = r.Run(ctx) }()
	s.orders, s.ordersAt = store.ReadRows(r.Key()), r.WaitFor
	return func() { cancel(); <-ended }, nil
}

func demo(ctx context.Context, shop *Shop) error {
	for _, r := range []struct {
		sku   string
		units int
	}{{"pen", 3}, {"ink", 1}} {
		if err := shop.Restock(ctx, r.sku, r.units); err != nil {
			return err
		}
	}
	left, pos, err := shop.Place(ctx, "o1", Line{SKU: "pen", Units: 2}, Line{SKU: "ink", Units: 1})
	if err != nil {
		return err
	}
	fmt.Printf("order o1 placed: %d pens and %d ink left\n", left["pen"], left["ink"])
	if _, _, err := shop.Place(ctx, "o2", Line{SKU: "ink", Units: 1}); err != nil {
		fmt.Println("order o2 refused:", err)
	}
	if err := shop.ordersAt(ctx, pos); err != nil {
		return err
	}
	o, _, err := shop.Order(ctx, "o1")
	if err != nil {
		return err
	}
	st, _, err := shop.Stock(ctx, "pen")
	if err != nil {
		return err
	}
	fmt.Printf("read model: order %s has %d units; State: %d pens in stock\n", o.Order, o.Units, st.Units)
	return nil
}
