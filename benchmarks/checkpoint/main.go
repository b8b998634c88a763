// Command checkpoint measures signed checkpoints (package evidence) on a
// Postgres journal holding many events (default 1,000,000, appended through
// the journal in batches of 1,000 over 10,000 account streams, as
// benchmarks/console fills its schema): the time to make, sign and write
// one, its file's size, the time to verify its signature and tree and to
// compare the journal with it, and the size and verification time of
// inclusion proofs.
//
//	go run ./benchmarks/checkpoint -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// The schema is dropped at the end unless -keep; -schema reuses one that a
// previous -keep run filled (then `scribe checkpoint` can be timed on it too).
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func main() {
	db := flag.String("db", os.Getenv("SCRIBE_TEST_DATABASE_URL"), "Postgres URL")
	events := flag.Int("events", 1_000_000, "events to fill the schema with")
	streams := flag.Int("streams", 10_000, "account streams the events are spread over")
	schema := flag.String("schema", "", "reuse this filled schema (from a -keep run) instead of filling a new one")
	keep := flag.Bool("keep", false, "keep the schema at the end")
	workers := flag.Int("workers", 4, "streams read at once")
	proofs := flag.Int("proofs", 1000, "inclusion proofs made and verified")
	flag.Parse()
	if err := run(*db, *events, *streams, *schema, *keep, *workers, *proofs); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint benchmark:", err)
		os.Exit(1)
	}
}

// source is the Postgres journal with a stream listing (pgadmin.Admin's
// ListStreams, as cmd/scribe gives evidence.Make).
type source struct {
	*postgres.Journal
	*pgadmin.Admin
}

func run(url string, n, streams int, schema string, keep bool, workers, proofs int) error {
	if url == "" {
		return fmt.Errorf("give -db or SCRIBE_TEST_DATABASE_URL")
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(max(workers+2, 4))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	fill := schema == ""
	if fill {
		schema = fmt.Sprintf("bench_checkpoint_%d", time.Now().UnixNano()%1_000_000_000)
		if !keep {
			defer func() {
				_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			}()
		}
	}
	pcfg := postgres.Config{Schema: schema}
	if err := postgres.Migrate(ctx, pool, pcfg); err != nil {
		return err
	}
	j, err := postgres.NewJournal(pool, pcfg)
	if err != nil {
		return err
	}
	admin, err := pgadmin.New(pool, pcfg)
	if err != nil {
		return err
	}
	defer j.Close()
	if fill {
		if err := fillSchema(ctx, j, n, streams); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{schema}.Sanitize()+".events"); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "schema %s\n", schema)

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	start := time.Now()
	c, err := evidence.Make(ctx, source{j, admin}, evidence.MakeOptions{Journal: schema, Workers: workers})
	if err != nil {
		return err
	}
	made := time.Since(start)
	if err := c.Sign(priv); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "checkpoint-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	start = time.Now()
	name, err := evidence.DirSink{Dir: dir}.Put(ctx, c)
	if err != nil {
		return err
	}
	written := time.Since(start)
	st, err := os.Stat(name)
	if err != nil {
		return err
	}

	start = time.Now()
	back, err := evidence.ReadFile(name)
	if err != nil {
		return err
	}
	if err := back.Verify(pub); err != nil {
		return err
	}
	verified := time.Since(start)
	start = time.Now()
	divs, err := evidence.Compare(ctx, source{j, admin}, back, evidence.CompareOptions{Workers: workers})
	if err != nil {
		return err
	}
	if len(divs) > 0 {
		return fmt.Errorf("the journal diverged from its own checkpoint: %v", divs[0].Error())
	}
	compared := time.Since(start)

	// Proofs of random events: built from the checkpoint in memory (as
	// `scribe proof` does after reading the event), verified offline.
	var sizes []int
	var proveTimes, verifyTimes []time.Duration
	for range proofs {
		s := &c.Streams[mrand.IntN(len(c.Streams))]
		leaf := s.Leaves[mrand.IntN(len(s.Leaves))]
		r, err := j.ReadEvent(ctx, leaf.ID)
		if err != nil {
			return err
		}
		t0 := time.Now()
		p, err := evidence.Prove(c, r, s.Tag)
		if err != nil {
			return err
		}
		proveTimes = append(proveTimes, time.Since(t0))
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		sizes = append(sizes, len(b))
		t0 = time.Now()
		var q evidence.Proof
		if err := json.Unmarshal(b, &q); err != nil {
			return err
		}
		if _, err := q.Verify(pub); err != nil {
			return err
		}
		verifyTimes = append(verifyTimes, time.Since(t0))
	}
	slices.Sort(sizes)
	slices.Sort(proveTimes)
	slices.Sort(verifyTimes)

	fmt.Printf("| measure | value |\n|---|---:|\n")
	fmt.Printf("| events (stream links) / streams | %d / %d |\n", c.Events, c.Statement.Streams)
	fmt.Printf("| make (read every chain, check every link, build the trees), %d workers | %s |\n", workers, made.Round(time.Millisecond))
	fmt.Printf("| sign + write the file (fsync) | %s |\n", written.Round(time.Millisecond))
	fmt.Printf("| file size | %d bytes (%.1f MB, %.1f bytes per event) |\n", st.Size(), float64(st.Size())/1e6, float64(st.Size())/float64(c.Events))
	fmt.Printf("| read + verify signature and tree | %s |\n", verified.Round(time.Millisecond))
	fmt.Printf("| compare the journal with it, %d workers | %s |\n", workers, compared.Round(time.Millisecond))
	if proofs > 0 {
		fmt.Printf("| proof size (JSON), median / max of %d | %d / %d bytes |\n", proofs, sizes[len(sizes)/2], sizes[len(sizes)-1])
		fmt.Printf("| proof build (from the checkpoint in memory), median | %s |\n", proveTimes[len(proveTimes)/2].Round(time.Microsecond))
		fmt.Printf("| proof verify (parse JSON, paths, signature), median | %s |\n", verifyTimes[len(verifyTimes)/2].Round(time.Microsecond))
	}
	return nil
}

// fillSchema appends n events through the journal in batches of 1,000, each
// on one of streams account streams.
func fillSchema(ctx context.Context, j *postgres.Journal, n, streams int) error {
	types := []string{"AccountOpened", "MoneyDeposited", "MoneyWithdrawn", "MoneyTransferred", "LimitChanged", "AccountFrozen", "AccountThawed", "StatementIssued"}
	const batch = 1000
	start := time.Now()
	shown := start
	for i := 0; i < n; i += batch {
		evs := make([]journal.Event, 0, batch)
		for k := i; k < min(n, i+batch); k++ {
			evs = append(evs, journal.Event{
				ID: journal.NewEventID(), Type: types[k%len(types)], SchemaVersion: 1,
				Tags: []journal.Tag{journal.Tag(fmt.Sprintf("account:%d", k%streams))},
				Data: []byte(fmt.Sprintf(`{"amount":%d,"note":"%s"}`, k, strings.Repeat("x", 40))),
			})
		}
		if _, err := j.Append(ctx, evs, journal.AppendOptions{}); err != nil {
			return err
		}
		if time.Since(shown) > 10*time.Second {
			shown = time.Now()
			done := i + len(evs)
			fmt.Fprintf(os.Stderr, "filling: %d/%d events (%.0f/s)\n", done, n, float64(done)/time.Since(start).Seconds())
		}
	}
	fmt.Fprintf(os.Stderr, "filled %d events in %s\n", n, time.Since(start).Round(time.Second))
	return nil
}
