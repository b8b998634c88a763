package projection_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/projection"
)

// A read model of per-stream event counts, fed by a runner on the memory
// journal and store. On Postgres, use postgres.NewProjectionStore and write
// the read model with the pgx.Tx the handler receives.
func ExampleRunner() {
	ctx := context.Background()
	j := memory.New()
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

// A read model written once: the same RowProjection runs on the memory
// store here and on postgres.NewProjectionStore in production (rows in the
// checkpoint's transaction). Rebuild empties the rows with the checkpoint,
// so the replay does not count twice.
func ExampleRowProjection() {
	ctx := context.Background()
	j := memory.New()
	defer j.Close()

	type count struct{ N int }
	counts := projection.Collection[count]{Name: "counts"}
	def := projection.RowProjection{
		Name:    "counts",
		Version: 1,
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			for _, rec := range b.Records {
				for _, t := range rec.Tags {
					c, _, err := counts.Get(ctx, rows, string(t))
					if err != nil {
						return err
					}
					c.N++
					if err := counts.Put(ctx, rows, string(t), c); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	store := projection.NewMemoryStore()
	p := projection.Bind(store, def)
	// run runs a runner of p until the record at last is applied.
	run := func(last journal.Position) {
		r, err := projection.NewRunner(j, store, p, projection.Options{})
		if err != nil {
			panic(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan error, 1)
		go func() { done <- r.Run(runCtx) }()
		if err := r.WaitFor(ctx, last); err != nil {
			panic(err)
		}
		stop()
		if err := <-done; err != nil {
			panic(err)
		}
		page, err := counts.List(ctx, store.ReadRows(r.Key()), "", 10)
		if err != nil {
			panic(err)
		}
		var out []string
		for _, kv := range page {
			out = append(out, fmt.Sprintf("%s=%d", kv.Key, kv.Value.N))
		}
		fmt.Println(strings.Join(out, " "))
	}

	var last journal.Position
	for _, tag := range []journal.Tag{"account:1", "account:2", "account:1"} {
		res, err := j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1,
			Tags: []journal.Tag{tag}, Data: []byte(`{"amount":5}`)}}, journal.AppendOptions{})
		if err != nil {
			panic(err)
		}
		last = res.Last()
	}
	run(last)
	if err := projection.Rebuild(ctx, store, p); err != nil {
		panic(err)
	}
	run(last) // replays every event into the emptied rows
	// Output:
	// account:1=2 account:2=1
	// account:1=2 account:2=1
}
