package postgres_test

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
)

// The code the docs' reference and reading pages show for services that
// wire the pieces themselves instead of calling scribe.Open. They need a
// database, so these examples are compiled but not run by go test.

type (
	Account        struct{ Balance int64 }
	AccountCommand interface{ accountCommand() }
	Deposit        struct{ Amount int64 }
	MoneyDeposited struct {
		Amount int64 `json:"amount"`
	}
)

func (Deposit) accountCommand() {}

var accountAggregate = runtime.AggregateOf[Account, AccountCommand]{
	Name:    "account",
	Initial: func() Account { return Account{} },
	Decide: func(_ Account, c AccountCommand) ([]any, error) {
		if d, ok := c.(Deposit); ok {
			return []any{MoneyDeposited(d)}, nil
		}
		return nil, errors.New("no rule")
	},
	Evolve: func(a Account, ev any) Account {
		if e, ok := ev.(MoneyDeposited); ok {
			a.Balance += e.Amount
		}
		return a
	},
}

// serve wires a service on Postgres by hand: the store, then the runtime.
func serve(ctx context.Context, databaseURL string, tp trace.TracerProvider, log *slog.Logger) error {
	store, err := postgres.Open(ctx, databaseURL, postgres.Config{ // migrates; VerifyOnly: true only checks
		Schema: "shop", TracerProvider: tp, Logger: log})
	if err != nil {
		return err // a configuration error says what to fix (see "Configuration errors")
	}
	defer store.Close() // journal, then pool
	rt, err := runtime.New(ctx, runtime.Config{Journal: store.Journal, Snapshots: store.Snapshots,
		NodeID: os.Getenv("POD_NAME"), Logger: log}) // one ID per live process
	if err != nil {
		return err
	}
	defer rt.Shutdown(context.WithoutCancel(ctx))
	runtime.MustRegisterEvent[MoneyDeposited](rt, "MoneyDeposited", 1) // panics with the Register error
	accounts := runtime.MustRegisterAggregateOf(rt, accountAggregate)
	_, err = accounts.Execute(ctx, "42", Deposit{Amount: 100})
	return err
}

// Open sets up a Postgres store in one call; the runtime takes its
// journal and snapshot store.
func ExampleOpen() {
	if err := serve(context.Background(), os.Getenv("DATABASE_URL"), noop.NewTracerProvider(), slog.Default()); err != nil {
		log.Fatal(err)
	}
}

// readFromReplica sends reads to a streaming standby, appends to the
// primary.
func readFromReplica(ctx context.Context, pool, standbyPool *pgxpool.Pool, cfg postgres.Config, store *postgres.ProjectionStore, p projection.Projection[pgx.Tx], res runtime.Result[Account]) error {
	primary, _ := postgres.NewJournal(pool, cfg)                                  // appends, sessions, actors
	replica, _ := postgres.NewReplica(standbyPool, primary)                       // reads, subscriptions, projections
	runner, _ := projection.NewRunner(replica, store, p, projection.Options{})    // store on the primary
	rd, _ := replica.ReaderAt(ctx, res.Records[0].Position)                       // the replica once it has it, else the primary
	rt, _ := runtime.New(ctx, runtime.Config{Journal: primary, Replica: replica}) // State reads the replica
	_, _, _ = runner, rd, rt
	return nil
}

// A read replica serves reads, subscriptions, projections and State; the
// primary keeps appends, sessions and leases.
func ExampleNewReplica() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	standby, err := pgxpool.New(ctx, os.Getenv("STANDBY_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := postgres.NewProjectionStore(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	_ = readFromReplica(ctx, pool, standby, postgres.Config{}, store, projection.Projection[pgx.Tx]{Name: "p", Version: 1}, runtime.Result[Account]{Records: []journal.Record{{}}})
}
