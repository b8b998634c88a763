package projection_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// A read model of per-stream event counts, fed by a runner on the memory
// journal and store. On Postgres, use postgres.NewProjectionStore and write
// the read model with the pgx.Tx the handler receives.
func ExampleRunner() {
	ctx := context.Background()
	j := journal.NewMemory()
	defer j.Close()

	var mu sync.Mutex
	counts := map[journal.Tag]int{}
	r, err := projection.NewRunner(j, projection.NewMemoryStore(), projection.Projection[projection.NoTx]{
		Name:    "counts",
		Version: 1,
		Query:   journal.Query{Items: []journal.QueryItem{{Types: []string{"Deposited"}}}},
		Handle: func(ctx context.Context, _ projection.NoTx, b projection.Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, rec := range b.Records {
				for _, t := range rec.Tags {
					counts[t]++
				}
			}
			return nil
		},
	}, projection.Options{})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()

	var last journal.Position
	for _, tag := range []journal.Tag{"account:1", "account:2", "account:1"} {
		res, err := j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1,
			Tags: []journal.Tag{tag}, Data: []byte(`{"amount":5}`)}}, journal.AppendOptions{})
		if err != nil {
			panic(err)
		}
		last = res.Last()
	}
	if err := r.WaitFor(ctx, last); err != nil { // read your writes
		panic(err)
	}
	mu.Lock()
	fmt.Println(counts["account:1"], counts["account:2"])
	mu.Unlock()
	stop()
	fmt.Println(<-done, r.Progress().Events)
	// Output:
	// 2 1
	// <nil> 3
}
