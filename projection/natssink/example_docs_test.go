package natssink_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/projection/natssink"
)

// The code the docs' publishing section shows: events to NATS JetStream
// after they are stored, and a dead letter replayed once its cause is
// fixed. They need NATS and a database, so these examples are compiled but
// not run by go test.

// publishToNATS starts a publisher of every event to JetStream.
func publishToNATS(ctx context.Context, j journal.Journal, store *postgres.ProjectionStore) (*natssink.Sink, error) {
	nc, _ := nats.Connect("nats://127.0.0.1:4222")
	js, _ := jetstream.New(nc)
	// Once, at deployment (the sink creates no stream): a duplicate window longer than
	// a publisher outage (a crash until a standby has caught up).
	js.CreateStream(ctx, jetstream.StreamConfig{Name: "BANK_EVENTS", Subjects: []string{"bank.events.>"}, Duplicates: 10 * time.Minute})

	sink, _ := natssink.New(js, natssink.Config{SubjectPrefix: "bank.events"}) // or natssink.NewFromConn(nc, …)
	pub, _ := projection.NewPublisher(j, store, "events-to-nats", journal.Query{}, sink, projection.PublisherOptions{}, projection.Options{})
	go pub.Run(ctx)
	return sink, nil
}

// replayToNATS publishes the publisher's dead letters again.
func replayToNATS(ctx context.Context, store *postgres.ProjectionStore, sink *natssink.Sink) error {
	rep, err := projection.ReplayDeadLetters(ctx, store, projection.Key{Name: "events-to-nats", Version: 1},
		func(ctx context.Context, tx pgx.Tx, d projection.DeadLetter) error {
			return sink.Publish(ctx, d.Record)
		})
	// rep.Replayed were applied and removed; rep.Failed are kept, with the new error
	fmt.Println(rep.Replayed, rep.Failed)
	return err
}

// A publisher to JetStream, and a replay of its dead letters.
func ExampleNew() {
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
	sink, err := publishToNATS(ctx, j, store)
	if err != nil {
		log.Fatal(err)
	}
	if err := replayToNATS(ctx, store, sink); err != nil {
		log.Fatal(err)
	}
}
