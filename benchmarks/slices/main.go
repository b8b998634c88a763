package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "slices:", err)
		os.Exit(1)
	}
}

type options struct {
	db                      string
	events, accounts, count int
	batch, rounds           int
	sleep                   time.Duration
	runners                 []int
	keep                    bool
}

func parse() (options, error) {
	var o options
	var runners string
	flag.StringVar(&o.db, "db", os.Getenv("SCRIBE_TEST_DATABASE_URL"), "Postgres URL (default $SCRIBE_TEST_DATABASE_URL)")
	flag.IntVar(&o.events, "events", 200_000, "events in the journal")
	flag.IntVar(&o.accounts, "accounts", 10_000, "account streams")
	flag.IntVar(&o.count, "slices", 64, "slices of the projection (a divisor of 1024)")
	flag.IntVar(&o.batch, "batch", 64, "records per batch (projection.Options.BatchSize)")
	flag.IntVar(&o.rounds, "rounds", 2, "measurements per runner count")
	flag.DurationVar(&o.sleep, "sleep", time.Millisecond, "time the handler spends per batch outside the database")
	flag.StringVar(&runners, "runners", "1,2,4", "runner counts to compare")
	flag.BoolVar(&o.keep, "keep", false, "keep the schema")
	flag.Parse()
	if o.db == "" {
		return o, errors.New("give -db or set SCRIBE_TEST_DATABASE_URL")
	}
	for _, s := range strings.Split(runners, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-runners %q: want positive counts separated by commas", runners)
		}
		o.runners = append(o.runners, n)
	}
	return o, nil
}

func run() error {
	o, err := parse()
	if err != nil {
		return err
	}
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, o.db)
	if err != nil {
		return err
	}
	defer admin.Close()
	schema := fmt.Sprintf("bench_slices_%d", time.Now().UnixNano())
	cfg := postgres.Config{Schema: schema}
	if err := postgres.Migrate(ctx, admin, cfg); err != nil {
		return err
	}
	if !o.keep {
		defer admin.Exec(context.WithoutCancel(ctx), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) //nolint:errcheck // best effort
	}
	start := time.Now()
	if err := fill(ctx, admin, schema, o); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "filled %d events over %d accounts in %s\n", o.events, o.accounts, time.Since(start).Round(time.Millisecond))

	results := map[int][]float64{}
	version := 0
	for round := range o.rounds {
		order := slices.Clone(o.runners)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			version++
			el, err := catchUp(ctx, o, cfg, version, n)
			if err != nil {
				return err
			}
			rate := float64(o.events) / el.Seconds()
			results[n] = append(results[n], rate)
			fmt.Fprintf(os.Stderr, "round %d, %d runners: %d events in %s, %.0f events/s\n", round+1, n, o.events, el.Round(time.Millisecond), rate)
		}
	}
	base := median(results[o.runners[0]])
	fmt.Printf("| runners | events/s (median of %d) | speedup vs %d runner(s) | per round |\n|---:|---:|---:|---|\n", o.rounds, o.runners[0])
	for _, n := range o.runners {
		per := make([]string, len(results[n]))
		for i, r := range results[n] {
			per[i] = fmt.Sprintf("%.0f", r)
		}
		fmt.Printf("| %d | %.0f | %.2f× | %s |\n", n, median(results[n]), median(results[n])/base, strings.Join(per, " · "))
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fill writes o.events deposits straight into the journal's tables, four
// per transaction ID, each with one account tag, and a read model table.
func fill(ctx context.Context, pool *pgxpool.Pool, schema string, o options) error {
	s := pgx.Identifier{schema}.Sanitize()
	_, err := pool.Exec(ctx, fmt.Sprintf(`
		INSERT INTO %[1]s.events (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes, data, metadata, recorded_at)
		SELECT 1000 + i / 4, i + 1, gen_random_uuid(), 'default', 'Deposited', 1, ARRAY['account:' || (i %% %[3]d)], ARRAY[i / %[3]d + 1]::bigint[],
			decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex'), convert_to('{"amount":10}', 'UTF8'), convert_to('{}', 'UTF8'), now()
		FROM generate_series(0, %[2]d - 1) AS i;
		INSERT INTO %[1]s.event_tags (partition, tag, version, commit_xid, seq, type)
		SELECT 'default', tags[1], versions[1], commit_xid, seq, type FROM %[1]s.events;
		ANALYZE %[1]s.events; ANALYZE %[1]s.event_tags;
		CREATE TABLE %[1]s.bench_counts (version int, account text, n bigint NOT NULL, PRIMARY KEY (version, account))`, s, o.events, o.accounts))
	return err
}

// catchUp runs n runners of a new sliced projection version until its slices
// have applied every event, and returns the time it took.
func catchUp(ctx context.Context, o options, cfg postgres.Config, version, n int) (time.Duration, error) {
	sl := projection.Slicing{Group: "account", Count: o.count}
	counts := pgx.Identifier{cfg.Schema, "bench_counts"}.Sanitize()
	k := projection.Key{Name: "bench", Version: version}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var stores []*postgres.ProjectionStore
	start := time.Now()
	for i := range n {
		pool, err := pgxpool.New(ctx, o.db) // a pool per runner, as separate processes would have
		if err != nil {
			return 0, err
		}
		defer pool.Close()
		j, err := postgres.NewJournal(pool, cfg)
		if err != nil {
			return 0, err
		}
		defer j.Close()
		store, err := postgres.NewProjectionStore(pool, cfg)
		if err != nil {
			return 0, err
		}
		stores = append(stores, store)
		p := projection.Projection[pgx.Tx]{Name: k.Name, Version: k.Version, Slicing: &sl,
			Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
				time.Sleep(o.sleep) // the remote call, outside the database
				accts := make([]string, len(b.Records))
				for i, r := range b.Records {
					accts[i] = string(r.Tags[0])
				}
				_, err := tx.Exec(ctx, `INSERT INTO `+counts+` (version, account, n) SELECT $1, a, count(*) FROM unnest($2::text[]) AS a GROUP BY a
					ON CONFLICT (version, account) DO UPDATE SET n = `+counts+`.n + EXCLUDED.n`, k.Version, accts)
				return err
			}}
		r, err := projection.NewRunner(j, store, p, projection.Options{Owner: fmt.Sprintf("runner-%d", i), BatchSize: o.batch, LeaseTTL: 2 * time.Second, NoTakeOver: true})
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(rctx); err != nil {
				errs <- err
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-errs:
			return 0, err
		case <-tick.C:
		}
		sts, _, err := stores[0].Slices(ctx, k)
		if err != nil {
			return 0, err
		}
		var total uint64
		for _, st := range sts {
			total += st.Events
		}
		if total >= uint64(o.events) {
			el := time.Since(start)
			per := map[string]uint64{}
			for _, st := range sts {
				per[st.Owner] += st.Events
			}
			fmt.Fprintf(os.Stderr, "  events by the slices' final owners: %v\n", per)
			return el, nil
		}
	}
}
