package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// The code the docs' projections pages show for a runner a service starts
// itself (scribe.Service.Project does it for a RowProjection). They need a
// database, so these examples are compiled but not run by go test.

// amountOf reads a deposit's amount (a service decodes its events with
// runtime.DecodeAs).
func amountOf(rec journal.Record) int64 {
	var v struct{ Amount int64 }
	_ = json.Unmarshal(rec.Data, &v)
	return v.Amount
}

// balancesOnPostgres is a rows read model, written once for both stores,
// run on the Postgres store.
func balancesOnPostgres(ctx context.Context, j journal.Journal, pool *pgxpool.Pool, pos journal.Position) error {
	type balance struct{ Amount int64 }
	var balances = projection.Collection[balance]{Name: "balances"}

	def := projection.RowProjection{
		Name: "balances", Version: 1,
		Query: journal.Query{Items: []journal.QueryItem{{Types: []string{"MoneyDeposited"}}}},
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			for _, rec := range b.Records {
				id := string(rec.Tags[0])
				v, _, err := balances.Get(ctx, rows, id)
				if err != nil {
					return err
				}
				v.Amount += amountOf(rec) // the service decodes the event
				if err := balances.Put(ctx, rows, id, v); err != nil {
					return err
				}
			}
			return nil // the rows commit with the checkpoint, or not at all
		},
	}
	store, _ := postgres.NewProjectionStore(pool, postgres.Config{}) // or projection.NewMemoryStore()
	p := projection.Bind(store, def)
	r, _ := projection.NewRunner(j, store, p, projection.Options{})
	go r.Run(ctx)                                                   // stands by while another process holds the projection
	err := r.WaitFor(ctx, pos)                                      // read your writes: until the record at pos is applied
	page, _ := balances.List(ctx, store.ReadRows(r.Key()), "", 100) // readers
	err = projection.Rebuild(ctx, store, p)                         // empties the rows with the checkpoint; replays
	fmt.Println(len(page))
	return err
}

// A RowProjection bound to the Postgres store: its rows commit with its
// checkpoint.
func ExampleBind() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	j, err := postgres.NewJournal(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := balancesOnPostgres(ctx, j, pool, journal.Position{}); err != nil {
		log.Fatal(err)
	}
}

// slicedBalances runs one projection on many runners, each owning a share
// of the accounts.
func slicedBalances(ctx context.Context, j journal.Journal, store *postgres.ProjectionStore) error {
	sl := projection.Slicing{Group: "account", Count: 64} // Count divides 1024; default 64
	p := projection.Projection[pgx.Tx]{Name: "balances", Version: 1, Slicing: &sl,
		Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
			for i, rec := range b.Records {
				for _, acct := range sl.TagsIn(rec, b.Slices[i]) { // the accounts this delivery is for
					if _, err := tx.Exec(ctx, "UPDATE balances SET events = events + 1 WHERE account = $1", string(acct)); err != nil {
						return err
					}
				}
			}
			return nil
		}}
	r, err := projection.NewRunner(j, store, p, projection.Options{}) // start it in every process
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// A sliced projection: start the same runner in every process.
func ExampleSlicing() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	j, err := postgres.NewJournal(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	store, err := postgres.NewProjectionStore(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := slicedBalances(ctx, j, store); err != nil {
		log.Fatal(err)
	}
}
