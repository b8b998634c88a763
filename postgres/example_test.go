package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// Example shows the whole setup: migrate once, open the journal, append with
// an expected version, read the stream back. (It needs a database, so it is
// compiled but not run by go test.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	cfg := postgres.Config{Schema: "scribe"}
	if err := postgres.Migrate(ctx, pool, cfg); err != nil { // idempotent, safe to run concurrently
		log.Fatal(err)
	}
	j, err := postgres.NewJournal(pool, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()

	stream := journal.Stream("account:42")
	_, err = j.Append(ctx, []journal.Event{{
		ID:   journal.NewEventID(),
		Type: "AccountOpened",
		Tags: []journal.Tag{stream.Tag},
		Data: json.RawMessage(`{"owner":"Ada"}`),
	}}, journal.AppendOptions{Expect: map[journal.Tag]uint64{stream.Tag: 0}})
	if err != nil {
		log.Fatal(err)
	}
	for r, err := range j.ReadStream(ctx, stream, 1, 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Version(stream.Tag), r.Type, r.Position)
	}
}
