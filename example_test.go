package scribe_test

import (
	"context"
	"fmt"
	"log"

	"github.com/scribe-es/scribe"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
)

// The ticket office: a concert's seats, typed commands, a read model, wired
// in one call. An empty DatabaseURL runs in memory; a Postgres URL runs the
// same code on Postgres.
type (
	Concert        struct{ Sold, Seats int }
	ConcertCommand interface{ concertCommand() }
	Schedule       struct{ Seats int }
	Sell           struct{ Seats int }
	Scheduled      struct{ Seats int }
	Sold           struct{ Seats int }
	SalesView      struct{ Sold int }
)

func (Schedule) concertCommand() {}
func (Sell) concertCommand()     {}

var sales = projection.Collection[SalesView]{Name: "sales"}

func Example() {
	ctx := context.Background()
	svc, err := scribe.Open(ctx, scribe.Config{DatabaseURL: "", NodeID: "office-1"})
	if err != nil {
		log.Fatal(err) // says what to fix
	}
	defer svc.Close(context.Background())

	runtime.MustRegisterEvent[Scheduled](svc.Runtime, "Scheduled", 1)
	runtime.MustRegisterEvent[Sold](svc.Runtime, "Sold", 1)
	concerts := runtime.MustRegisterAggregateOf(svc.Runtime, runtime.AggregateOf[Concert, ConcertCommand]{
		Name:    "concert",
		Initial: func() Concert { return Concert{} },
		Decide: func(c Concert, cmd ConcertCommand) ([]any, error) {
			switch cmd := cmd.(type) {
			case Schedule:
				return []any{Scheduled{Seats: cmd.Seats}}, nil
			case Sell:
				if c.Sold+cmd.Seats > c.Seats {
					return nil, fmt.Errorf("%d seats left", c.Seats-c.Sold)
				}
				return []any{Sold{Seats: cmd.Seats}}, nil
			}
			return nil, fmt.Errorf("no rule for %T", cmd)
		},
		Evolve: func(c Concert, ev any) Concert {
			switch ev := ev.(type) {
			case Scheduled:
				c.Seats = ev.Seats
			case Sold:
				c.Sold += ev.Seats
			}
			return c
		},
	})
	view, err := svc.Project(projection.RowProjection{
		Name: "sales", Version: 1,
		Query: journal.Query{Items: []journal.QueryItem{{Types: []string{"Sold"}}}},
		Handle: func(ctx context.Context, rows projection.Rows, b projection.Batch) error {
			for _, rec := range b.Records {
				ev, err := runtime.DecodeAs[Sold](svc.Runtime, rec)
				if err != nil {
					return err
				}
				v, _, err := sales.Get(ctx, rows, string(rec.Tags[0]))
				if err != nil {
					return err
				}
				v.Sold += ev.Seats
				if err := sales.Put(ctx, rows, string(rec.Tags[0]), v); err != nil {
					return err
				}
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	if _, err := concerts.Execute(ctx, "gig", Schedule{Seats: 3}); err != nil {
		log.Fatal(err)
	}
	res, err := concerts.Execute(ctx, "gig", Sell{Seats: 2})
	if err != nil {
		log.Fatal(err)
	}
	_, err = concerts.Execute(ctx, "gig", Sell{Seats: 2})
	fmt.Println("refused:", err)

	if err := view.WaitFor(ctx, res.Records[0].Position); err != nil {
		log.Fatal(err)
	}
	v, _, _ := sales.Get(ctx, view.Rows(), "concert:gig")
	fmt.Println("sold:", res.State.Sold, "read model:", v.Sold)
	// Output:
	// refused: 1 seats left
	// sold: 2 read model: 2
}
