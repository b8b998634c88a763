package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// Append events to an aggregate stream (the tag "account:42") with an expected
// version, then read the stream back.
func Example_readStream() {
	ctx := context.Background()
	j := memory.New()
	defer j.Close()

	account := journal.Tag("account:42")
	_, err := j.Append(ctx, []journal.Event{
		{ID: journal.NewEventID(), Type: "AccountOpened", Tags: []journal.Tag{account}, Data: json.RawMessage(`{"owner": "Ada"}`)},
		{ID: journal.NewEventID(), Type: "MoneyDeposited", Tags: []journal.Tag{account}, Data: json.RawMessage(`{"amount": 100}`)},
	}, journal.AppendOptions{Expect: map[journal.Tag]uint64{account: 0}}) // the stream must be new
	if err != nil {
		fmt.Println(err)
		return
	}

	// A writer that decided on a stale version is refused.
	_, err = j.Append(ctx, []journal.Event{
		{ID: journal.NewEventID(), Type: "MoneyWithdrawn", Tags: []journal.Tag{account}, Data: json.RawMessage(`{"amount": 500}`)},
	}, journal.AppendOptions{Expect: map[journal.Tag]uint64{account: 1}})
	fmt.Println("stale writer refused:", errors.Is(err, journal.ErrVersionMismatch))

	for r, err := range j.ReadStream(ctx, journal.Stream(account), 1, 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("v%d %s %s at %s\n", r.Version(account), r.Type, r.Data, r.Position)
	}
	n, err := journal.VerifyStream(ctx, j, journal.Stream(account))
	fmt.Println("hash chain verified:", n, err)
	// Output:
	// stale writer refused: true
	// v1 AccountOpened {"owner":"Ada"} at 1.1
	// v2 MoneyDeposited {"amount":100} at 1.2
	// hash chain verified: 2 <nil>
}

// A Dynamic Consistency Boundary: decide from the events that match a query,
// then append on condition that no new event matched it since the read.
func ExampleAppendCondition() {
	ctx := context.Background()
	j := memory.New()
	defer j.Close()

	// "Usernames are unique": the boundary is every event tagged with the name.
	claim := func(user, name string) error {
		q := journal.TagQuery(journal.NewTag("username", name))
		var last journal.Position
		taken := false
		for r, err := range j.Read(ctx, q, journal.ReadOptions{}) {
			if err != nil {
				return err
			}
			taken, last = true, r.Position
		}
		if taken {
			return fmt.Errorf("username %q is taken", name)
		}
		_, err := j.Append(ctx, []journal.Event{{
			ID:   journal.NewEventID(),
			Type: "UsernameClaimed",
			Tags: []journal.Tag{journal.NewTag("username", name), journal.NewTag("user", user)},
			Data: json.RawMessage(fmt.Sprintf(`{"user":%q}`, user)),
		}}, journal.AppendOptions{Condition: &journal.AppendCondition{FailIfEventsMatch: q, After: last}})
		return err
	}

	fmt.Println(claim("u1", "ada"))
	fmt.Println(claim("u2", "ada"))

	// Two writers that read the same (empty) state: the second append fails.
	q := journal.TagQuery("username:bob")
	cond := &journal.AppendCondition{FailIfEventsMatch: q}
	appendClaim := func(user string) error {
		_, err := j.Append(ctx, []journal.Event{{
			ID: journal.NewEventID(), Type: "UsernameClaimed",
			Tags: []journal.Tag{"username:bob", journal.NewTag("user", user)}, Data: json.RawMessage(`{}`),
		}}, journal.AppendOptions{Condition: cond})
		return err
	}
	fmt.Println(appendClaim("u3"))
	fmt.Println(errors.Is(appendClaim("u4"), journal.ErrAppendConditionFailed))
	// Output:
	// <nil>
	// username "ada" is taken
	// <nil>
	// true
}

// Positions render as "commit.seq" for HTTP and CLI use and parse back.
func ExampleParsePosition() {
	p := journal.Position{Commit: 812, Seq: 4031}
	s := p.String()
	q, err := journal.ParsePosition(s)
	fmt.Println(s, q == p, err)

	_, err = journal.ParsePosition("812")
	fmt.Println(err != nil)

	zero, _ := journal.ParsePosition("")
	fmt.Println(zero.IsZero(), zero.Before(p))
	// Output:
	// 812.4031 true <nil>
	// true
	// true true
}

// Events without tags are found by their type, and each is chained in its
// partition's untagged chain for that type, which verifies like a stream.
func ExampleUntaggedChain() {
	ctx := context.Background()
	j := memory.New()
	defer j.Close()

	for _, rate := range []string{`{"eur":1.08}`, `{"eur":1.09}`} {
		_, err := j.Append(ctx, []journal.Event{
			{ID: journal.NewEventID(), Type: "RatesPublished", Data: json.RawMessage(rate)},
		}, journal.AppendOptions{})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	byType := journal.Query{Items: []journal.QueryItem{{Types: []string{"RatesPublished"}}}}
	for r, err := range j.Read(ctx, byType, journal.ReadOptions{}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s %s tags=%d chain=%s v%d\n", r.Type, r.Data, len(r.Tags), r.Links[0].Tag, r.Links[0].Version)
	}
	chain := journal.Stream(journal.UntaggedChain("RatesPublished"))
	n, err := journal.VerifyStream(ctx, j, chain)
	fmt.Println("untagged chain verified:", n, err)
	// Output:
	// RatesPublished {"eur":1.08} tags=0 chain=$untagged:RatesPublished v1
	// RatesPublished {"eur":1.09} tags=0 chain=$untagged:RatesPublished v2
	// untagged chain verified: 2 <nil>
}
