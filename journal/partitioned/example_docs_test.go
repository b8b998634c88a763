package partitioned_test

import (
	"context"
	"log"
	"os"

	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/snapshots/routed"
)

// routeTwoDatabases is the scaling page's runtime over two databases:
// partition "acme" lives on the US server, every other partition on the
// EU server.
func routeTwoDatabases(ctx context.Context, euURL, usURL, pod string) (*runtime.Runtime, error) {
	eu, _ := postgres.Open(ctx, euURL, postgres.Config{})
	us, _ := postgres.Open(ctx, usURL, postgres.Config{})
	r, err := partitioned.New(partitioned.Config{
		Members: []partitioned.Member{
			{Name: "eu", Journal: eu.Journal},
			{Name: "us", Journal: us.Journal},
		},
		Partitions: map[string]string{"default": "eu", "acme": "us"},
		Default:    "eu", // partitions not in the map; "" makes them an error
	})
	if err != nil {
		return nil, err // names the member or partition that is wrong
	}
	// Each stream's snapshots in its partition's database, by member name.
	snaps, err := routed.New(r, map[string]snapshots.Store{"eu": eu.Snapshots, "us": us.Snapshots})
	if err != nil {
		return nil, err
	}
	rt, err := runtime.New(ctx, runtime.Config{Journal: r, Snapshots: snaps, NodeID: pod})
	// runtime.Target{Partition: "acme", Aggregate: "account", ID: "42"} lives on "us".
	return rt, err
}

// One runtime serving partitions from two databases. (It needs both, so it
// is compiled but not run by go test.)
func ExampleRouter() {
	ctx := context.Background()
	rt, err := routeTwoDatabases(ctx, os.Getenv("EU_URL"), os.Getenv("US_URL"), os.Getenv("POD_NAME"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
}
