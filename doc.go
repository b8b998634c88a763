// Package scribe wires a service in one call: Open takes an optional
// database URL (empty means in memory) and returns a running Service with
// its journal, snapshots, erasure key store and projection store set up;
// read models registered with Project run supervised beside it, count in
// its readiness and stop with its Close.
//
//	svc, err := scribe.Open(ctx, scribe.Config{DatabaseURL: os.Getenv("DATABASE_URL"), Schema: "shop", NodeID: "shop-1"})
//	if err != nil { return err } // says what to fix
//	defer svc.Close(context.Background())
//	runtime.MustRegisterEvent[Restocked](svc.Runtime, "Restocked", 1)
//	products := runtime.MustRegisterAggregateOf(svc.Runtime, productAggregate)
//	orders, err := svc.Project(ordersProjection)
//
// The pieces it assembles (runtime.New, postgres.Open, projection.NewRunner)
// stay available for services that need another arrangement.
package scribe
