package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "partitionmove:", err)
		os.Exit(1)
	}
}

type options struct {
	db, db2                     string
	events, accounts, fillBatch int
	writers, runs               int
	baseline                    time.Duration
}

func parse() (options, error) {
	var o options
	flag.StringVar(&o.db, "db", os.Getenv("SCRIBE_TEST_DATABASE_URL"), "source Postgres URL (default $SCRIBE_TEST_DATABASE_URL)")
	flag.StringVar(&o.db2, "db2", "", "target Postgres URL (default: -db, another schema)")
	flag.IntVar(&o.events, "events", 200_000, "events of the moving partition")
	flag.IntVar(&o.accounts, "accounts", 2_000, "account streams of the moving partition")
	flag.IntVar(&o.fillBatch, "fill-batch", 500, "events per fill append")
	flag.IntVar(&o.writers, "writers", 8, "goroutines appending to the other partition")
	flag.IntVar(&o.runs, "runs", 3, "runs (each a fresh fill, a baseline and a move)")
	flag.DurationVar(&o.baseline, "baseline", 10*time.Second, "how long the no-move phase runs")
	flag.Parse()
	if o.db == "" {
		return o, errors.New("give -db or set SCRIBE_TEST_DATABASE_URL")
	}
	if o.db2 == "" {
		o.db2 = o.db
	}
	return o, nil
}

// sample is one append: when it started and how long it took.
type sample struct {
	at  time.Time
	lat time.Duration
}

// phase is what one measurement saw: the latencies, sorted, and the samples.
type phase struct {
	lat     []time.Duration
	samples []sample
}

// slowestIn returns the slowest append that overlapped [from, to], and how
// many did.
func (p phase) slowestIn(from, to time.Time) (time.Duration, int) {
	var top time.Duration
	n := 0
	for _, s := range p.samples {
		if s.at.Before(to) && s.at.Add(s.lat).After(from) {
			top = max(top, s.lat)
			n++
		}
	}
	return top, n
}

func (p phase) q(f float64) time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	return p.lat[min(len(p.lat)-1, int(f*float64(len(p.lat))))]
}

type runResult struct {
	baseline, move          phase
	took, fenceToSwitch, sw time.Duration
	// The slowest append to the other partition overlapping the fence
	// step and the switch step.
	inFence, inSwitch time.Duration
}

func run() error {
	o, err := parse()
	if err != nil {
		return err
	}
	ctx := context.Background()
	src, err := pgxpool.New(ctx, o.db)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := pgxpool.New(ctx, o.db2)
	if err != nil {
		return err
	}
	defer dst.Close()
	var results []runResult
	for i := range o.runs {
		r, err := oneRun(ctx, o, src, dst, i)
		if err != nil {
			return err
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "run %d: baseline p99 %s (%d appends), during the move p99 %s (%d appends); move %s, fence to switch %s, switch %s; slowest append in the fence step %s, in the switch step %s\n",
			i+1, r.baseline.q(0.99), len(r.baseline.lat), r.move.q(0.99), len(r.move.lat), r.took, r.fenceToSwitch, r.sw, r.inFence, r.inSwitch)
	}
	fmt.Printf("| appends to another partition | runs | appends (median) | p50 | p99 | p99.9 | slowest | p99 per run |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, ph := range []struct {
		name string
		get  func(runResult) phase
	}{{"no move", func(r runResult) phase { return r.baseline }}, {fmt.Sprintf("during a move of %d events", o.events), func(r runResult) phase { return r.move }}} {
		var n, p50, p99, p999, top []float64
		var per []string
		for _, r := range results {
			p := ph.get(r)
			n = append(n, float64(len(p.lat)))
			p50, p99, p999 = append(p50, ms(p.q(0.5))), append(p99, ms(p.q(0.99))), append(p999, ms(p.q(0.999)))
			top = append(top, ms(p.q(1)))
			per = append(per, fmt.Sprintf("%.1f", ms(p.q(0.99))))
		}
		fmt.Printf("| %s | %d | %.0f | %.2f ms | %.2f ms | %.2f ms | %.1f ms | %s |\n", ph.name, len(results), median(n), median(p50), median(p99), median(p999), median(top), strings.Join(per, " · "))
	}
	var took, f2s, sw, inF, inS []float64
	for _, r := range results {
		took, f2s, sw = append(took, ms(r.took)), append(f2s, ms(r.fenceToSwitch)), append(sw, ms(r.sw))
		inF, inS = append(inF, ms(r.inFence)), append(inS, ms(r.inSwitch))
	}
	fmt.Printf("\nmove of %d events (median of %d): %.0f ms in all, %.0f ms fence to switch, %.1f ms the switch step; "+
		"slowest append to the other partition overlapping the fence step %.1f ms, the switch step %.1f ms\n",
		o.events, len(results), median(took), median(f2s), median(sw), median(inF), median(inS))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

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

// schema migrates a fresh schema and returns its name and a function
// dropping it.
func schema(ctx context.Context, pool *pgxpool.Pool, name string) (postgres.Config, func(), error) {
	cfg := postgres.Config{Schema: fmt.Sprintf("bench_move_%s_%d", name, time.Now().UnixNano())}
	if err := postgres.Migrate(ctx, pool, cfg); err != nil {
		return cfg, nil, err
	}
	return cfg, func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA `+pgx.Identifier{cfg.Schema}.Sanitize()+` CASCADE`)
	}, nil
}

func oneRun(ctx context.Context, o options, src, dst *pgxpool.Pool, i int) (runResult, error) {
	var r runResult
	scfg, dropS, err := schema(ctx, src, "src")
	if err != nil {
		return r, err
	}
	defer dropS()
	dcfg, dropD, err := schema(ctx, dst, "dst")
	if err != nil {
		return r, err
	}
	defer dropD()
	j, err := postgres.NewJournal(src, scfg)
	if err != nil {
		return r, err
	}
	defer j.Close()
	start := time.Now()
	if err := fill(ctx, j, o); err != nil {
		return r, err
	}
	if _, err := src.Exec(ctx, `ANALYZE `+pgx.Identifier{scfg.Schema}.Sanitize()+`.events`); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "run %d: filled %d events in %s\n", i+1, o.events, time.Since(start).Round(time.Millisecond))

	if r.baseline, err = measure(ctx, j, o, func(context.Context) error {
		time.Sleep(o.baseline) // the no-move phase lasts this long
		return nil
	}); err != nil {
		return r, err
	}
	var precopied, fenced, switched, verified time.Time
	var steps []string
	r.move, err = measure(ctx, j, o, func(ctx context.Context) error {
		t0 := time.Now()
		last := t0
		_, err := pgadmin.MovePartition(ctx, pgadmin.PartitionMove{Partition: "big", Source: src, SourceSchema: scfg.Schema,
			Target: dst, TargetSchema: dcfg.Schema, To: "target",
			Progress: func(p pgadmin.MoveProgress) {
				if p.Step != pgadmin.MovePrecopy && p.Step != pgadmin.MoveCopy || p.Copied == p.Total {
					steps = append(steps, fmt.Sprintf("%s %s", p.Step, time.Since(last).Round(time.Millisecond)))
					last = time.Now()
				}
				switch p.Step {
				case pgadmin.MovePrecopy:
					precopied = time.Now()
				case pgadmin.MoveFence:
					fenced = time.Now()
				case pgadmin.MoveVerify:
					verified = time.Now()
				case pgadmin.MoveSwitch:
					switched = time.Now()
				}
			}})
		r.took = time.Since(t0)
		return err
	})
	r.fenceToSwitch, r.sw = switched.Sub(fenced), switched.Sub(verified)
	r.inFence, _ = r.move.slowestIn(precopied, fenced)
	r.inSwitch, _ = r.move.slowestIn(verified, switched)
	fmt.Fprintf(os.Stderr, "run %d: steps %s\n", i+1, strings.Join(steps, ", "))
	return r, err
}

// fill appends o.events events to partition "big", o.fillBatch per
// append, each tagged with one of o.accounts accounts, from 4 goroutines
// with disjoint accounts.
func fill(ctx context.Context, j *postgres.Journal, o options) error {
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := w * o.fillBatch; done < o.events; done += workers * o.fillBatch {
				batch := make([]journal.Event, 0, o.fillBatch)
				for k := range min(o.fillBatch, o.events-done) {
					acct := (w + workers*k) % o.accounts
					batch = append(batch, journal.Event{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1,
						Tags: []journal.Tag{journal.NewTag("account", fmt.Sprint(acct))}, Data: []byte(`{"amount":10,"note":"padding to about one hundred bytes of payload per event"}`),
						Metadata: journal.Metadata{Partition: "big"}})
				}
				if _, err := j.Append(ctx, batch, journal.AppendOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// measure runs o.writers appenders to partition "other" while during runs,
// and returns their latencies, sorted.
func measure(ctx context.Context, j *postgres.Journal, o options, during func(context.Context) error) (phase, error) {
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	lat := make([][]sample, o.writers)
	errs := make(chan error, o.writers)
	for w := range o.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := journal.NewTag("writer", fmt.Sprint(w))
			for wctx.Err() == nil {
				t0 := time.Now()
				_, err := j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "Written", SchemaVersion: 1, Tags: []journal.Tag{tag},
					Data: []byte(`{"n":1}`), Metadata: journal.Metadata{Partition: "other"}}}, journal.AppendOptions{})
				if err != nil {
					errs <- err
					return
				}
				lat[w] = append(lat[w], sample{at: t0, lat: time.Since(t0)})
			}
		}()
	}
	err := during(ctx)
	stop()
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	var p phase
	for _, l := range lat {
		p.samples = append(p.samples, l...)
		for _, s := range l {
			p.lat = append(p.lat, s.lat)
		}
	}
	slices.Sort(p.lat)
	return p, err
}
