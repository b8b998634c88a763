package runtime_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

type (
	// ScheduleWorkshop and BookSeat are DCB commands.
	ScheduleWorkshop struct {
		Workshop string
		Seats    int
	}
	BookSeat struct{ Workshop, Attendee string }

	WorkshopScheduled struct {
		Workshop string `json:"workshop"`
		Seats    int    `json:"seats"`
	}
	SeatBooked struct {
		Workshop string `json:"workshop"`
		Attendee string `json:"attendee"`
	}
)

// Tags put a scheduled workshop on its workshop's tag, and a booking on both
// the workshop's and the attendee's.
func (e WorkshopScheduled) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("workshop", e.Workshop)}
}

func (e SeatBooked) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("workshop", e.Workshop), journal.NewTag("attendee", e.Attendee)}
}

var errSoldOut = errors.New("workshop is sold out")

// A seat limit across two tags: a booking decides from the workshop's events
// and the attendee's, and the tags' stream actors serialize every booking that
// touches them, so the limit holds without any retry loop.
func ExampleRegisterDCB() {
	ctx := context.Background()
	j := memory.New()
	rt, err := runtime.New(ctx, runtime.Config{Journal: j, NodeID: "example"})
	if err != nil {
		panic(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(runtime.RegisterEvent[WorkshopScheduled](rt, "WorkshopScheduled", 1))
	must(runtime.RegisterEvent[SeatBooked](rt, "SeatBooked", 1))

	schedule, err := runtime.RegisterDCB(rt, runtime.DCB[ScheduleWorkshop, bool]{
		Name: "ScheduleWorkshop",
		Query: func(c ScheduleWorkshop) journal.Query {
			return journal.Query{Items: []journal.QueryItem{{Types: []string{"WorkshopScheduled"}, Tags: []journal.Tag{journal.NewTag("workshop", c.Workshop)}}}}
		},
		Evolve: func(ScheduleWorkshop, bool, runtime.DCBEvent) bool { return true },
		Decide: func(c ScheduleWorkshop, scheduled bool) ([]any, error) {
			if scheduled {
				return nil, nil
			}
			return []any{WorkshopScheduled{Workshop: c.Workshop, Seats: c.Seats}}, nil
		},
	})
	must(err)

	type seatCount struct{ seats, booked int }
	book, err := runtime.RegisterDCB(rt, runtime.DCB[BookSeat, seatCount]{
		Name: "BookSeat",
		Query: func(c BookSeat) journal.Query {
			return journal.Query{Items: []journal.QueryItem{{
				Types: []string{"WorkshopScheduled", "SeatBooked"},
				Tags:  []journal.Tag{journal.NewTag("workshop", c.Workshop)},
			}}}
		},
		Tags: func(c BookSeat) []journal.Tag { return []journal.Tag{journal.NewTag("attendee", c.Attendee)} },
		Evolve: func(_ BookSeat, s seatCount, e runtime.DCBEvent) seatCount {
			switch ev := e.Value.(type) {
			case WorkshopScheduled:
				s.seats = ev.Seats
			case SeatBooked:
				s.booked++
			}
			return s
		},
		Decide: func(c BookSeat, s seatCount) ([]any, error) {
			if s.booked >= s.seats {
				return nil, fmt.Errorf("%s cannot book %s: %w", c.Attendee, c.Workshop, errSoldOut)
			}
			return []any{SeatBooked{Workshop: c.Workshop, Attendee: c.Attendee}}, nil
		},
	})
	must(err)

	_, err = schedule.Execute(ctx, ScheduleWorkshop{Workshop: "gophers", Seats: 2})
	must(err)
	for _, who := range []string{"ada", "grace", "linus"} {
		if _, err := book.Execute(ctx, BookSeat{Workshop: "gophers", Attendee: who}, runtime.WithIdempotencyKey("book-"+who)); err != nil {
			fmt.Println(err, errors.Is(err, errSoldOut))
			continue
		}
		fmt.Println(who, "booked")
	}
	n, err := rt.TagEventCount(ctx, journal.Stream("workshop:gophers"))
	must(err)
	fmt.Println("events on workshop:gophers:", n)
	// Output:
	// ada booked
	// grace booked
	// linus cannot book gophers: workshop is sold out true
	// events on workshop:gophers: 3
}
