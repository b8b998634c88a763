package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/scribe-es/scribe"
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
// empty): one call sets up the stores, the runtime and the read model.
// done stops it.
func open(ctx context.Context, url, schema string) (*Shop, func(), error) {
	svc, err := scribe.Open(ctx, scribe.Config{DatabaseURL: url, Schema: schema, NodeID: "shop-1"})
	if err != nil {
		return nil, nil, err
	}
	done := func() { _ = svc.Close(context.Background()) }
	shop, err := register(svc.Runtime)
	if err != nil {
		done()
		return nil, nil, err
	}
	if err := svc.Runtime.Start(ctx); err != nil { // records the types; refuses unreadable stored ones
		done()
		return nil, nil, err
	}
	orders, err := svc.Project(ordersProjection(svc.Runtime))
	if err != nil {
		done()
		return nil, nil, err
	}
	shop.orders, shop.ordersAt = orders.Rows(), orders.WaitFor
	return shop, done, nil
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
