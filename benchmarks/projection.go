package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// The projection scenario measures the read side: how fast a projection
// catches up over a filled journal, and how far a live projection trails
// the hot write load.
//
//  1. Fill: -events deposits over 10,000 counter streams, appended through
//     the journal in appends of 1,000 events by 8 goroutines, each event
//     with a correlation ID and a creation time in its metadata, as the
//     runtime writes them.
//  2. Catch-up, -runs times each: a new projection reads the whole journal
//     from position zero. "checkpoint" applies nothing but its checkpoint
//     (the cost of the feed and the store); "read model" also folds each
//     batch into per-stream balances and upserts them in the checkpoint's
//     transaction (one unnest statement per batch), as the bank's read
//     model does. Reported: events/s from start until the checkpoint
//     reached the last event.
//  3. Live: a read-model projection that has caught up runs while the hot
//     scenario's actor workload (-writers writers on one stream, the
//     largest -writers given) writes for -duration. Each event's lag is the
//     time from its RecordedAt (stamped before its append commits) until
//     the batch that applied it committed.

const scenarioProjection = "projection"

// projectionResult is one catch-up measurement.
type projectionResult struct {
	Variant string
	Run     int
	Events  int
	Elapsed time.Duration
}

func (r projectionResult) perSec() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// runProjection runs the projection scenario and prints its report to stdout.
func runProjection(ctx context.Context, o options, stdout, stderr io.Writer) error {
	b, err := openBackend(ctx, o)
	if err != nil {
		return err
	}
	defer func() { _ = b.close(context.WithoutCancel(ctx)) }()
	loadBefore := loadAverage()
	fmt.Fprintf(stderr, "projection: journal %s; filling %d events\n", o.journalName(), o.Events)
	fillStart := time.Now()
	last, err := fill(ctx, b.Journal, o.Events, o.Progress, stderr)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	fillTime := time.Since(fillStart)
	if b.Pool != nil {
		// What autovacuum does soon after a bulk load: without statistics
		// the planner misjudges the feed's page query on a table that was
		// empty a minute ago (a bitmap scan and a sort of every remaining
		// row instead of a primary-key range scan).
		if _, err := b.Pool.Exec(ctx, "ANALYZE "+pgx.Identifier{b.Schema, "events"}.Sanitize()+", "+pgx.Identifier{b.Schema, "event_tags"}.Sanitize()); err != nil {
			return fmt.Errorf("analyze after the fill: %w", err)
		}
	}
	fmt.Fprintf(stderr, "filled %d events in %.1fs (%s events/s)\n", o.Events, fillTime.Seconds(), human(float64(o.Events)/fillTime.Seconds()))

	var results []projectionResult
	for r := 1; r <= o.Runs; r++ {
		for _, v := range []string{"checkpoint", "read model"} {
			res, err := catchUp(ctx, b, o, v, r, last)
			if err != nil {
				return fmt.Errorf("catch-up %s, run %d: %w", v, r, err)
			}
			fmt.Fprintf(stderr, "catch-up %s run %d: %d events in %.2fs: %s events/s\n", v, r, res.Events, res.Elapsed.Seconds(), human(res.perSec()))
			results = append(results, res)
		}
	}
	live, err := liveLag(ctx, b, o, stderr)
	if err != nil {
		return fmt.Errorf("live: %w", err)
	}

	fmt.Fprintf(stdout, "## Projection: %s journal, %d events, %d runs\n\n", o.journalName(), o.Events, o.Runs)
	fmt.Fprintf(stdout, "Command: `%s`\n\n", commandLine(o.args))
	fmt.Fprintln(stdout, "| catch-up | median events/s | runs |")
	fmt.Fprintln(stdout, "|---|---:|---|")
	for _, v := range []string{"checkpoint", "read model"} {
		var rates []float64
		var each []string
		for _, r := range results {
			if r.Variant == v {
				rates = append(rates, r.perSec())
				each = append(each, human(r.perSec()))
			}
		}
		slices.Sort(rates)
		fmt.Fprintf(stdout, "| %s | %s | %v |\n", v, human(rates[len(rates)/2]), each)
	}
	if loadBefore != "" {
		fmt.Fprintf(stdout, "\nLoad average (1, 5, 15 min) before: %s; after: %s (other processes compete for the same CPUs).\n", loadBefore, loadAverage())
	}
	fmt.Fprintf(stdout, "\n| live, hot/%d actor writes for %s | writes/s | events applied | lag p50 | lag p99 | lag max |\n", live.Writers, o.Duration)
	fmt.Fprintln(stdout, "|---|---:|---:|---:|---:|---:|")
	fmt.Fprintf(stdout, "| read model | %s | %d | %.1f ms | %.1f ms | %.1f ms |\n", human(live.WritesPerSec), live.Applied,
		ms(live.Lag.quantile(0.50)), ms(live.Lag.quantile(0.99)), ms(live.Lag.quantile(1)))
	return nil
}

// fill appends n deposits over 10,000 counter streams and returns the last
// position.
func fill(ctx context.Context, j journal.Journal, n int, every time.Duration, progress io.Writer) (journal.Position, error) {
	const per, workers = 1000, 8
	var next, done atomic.Int64
	var mu sync.Mutex
	var last journal.Position
	data, _ := json.Marshal(deposited{Amount: 1})
	stop := make(chan struct{})
	if every > 0 {
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					fmt.Fprintf(progress, "  fill: %d of %d events\n", done.Load(), n)
				}
			}
		}()
	}
	defer close(stop)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				start := next.Add(per) - per
				if start >= int64(n) {
					return
				}
				events := make([]journal.Event, 0, per)
				corr := journal.NewEventID().String()
				for i := start; i < min(start+per, int64(n)); i++ {
					// Metadata as the runtime writes it for a command.
					events = append(events, journal.Event{ID: journal.NewEventID(), Type: depositedType, SchemaVersion: 1,
						Tags: []journal.Tag{counterTag(int(i % 10_000))}, Data: data,
						Metadata: journal.Metadata{CorrelationID: corr, CreatedAt: time.Now().UTC()}})
				}
				res, err := j.Append(ctx, events, journal.AppendOptions{})
				if err != nil {
					errs[w] = err
					return
				}
				done.Add(int64(len(events)))
				mu.Lock()
				if l := res.Last(); l.After(last) {
					last = l
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return last, errors.Join(errs...)
}

// balances folds a batch into per-stream sums.
func balances(recs []journal.Record) (tags []string, sums []int64, err error) {
	idx := map[journal.Tag]int{}
	for _, r := range recs {
		var d deposited
		if err := json.Unmarshal(r.Data, &d); err != nil {
			return nil, nil, err
		}
		for _, t := range r.Tags {
			i, ok := idx[t]
			if !ok {
				i = len(tags)
				idx[t] = i
				tags = append(tags, string(t))
				sums = append(sums, 0)
			}
			sums[i] += d.Amount
		}
	}
	return tags, sums, nil
}

// quietLogger drops the runners' state lines (they would interleave with
// the progress output).
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newProjectionRunner returns a projection named name. With readModel it
// keeps the counters' balances: in the table rm_<name> (Postgres) or in a
// map (memory); without, it applies nothing but its checkpoint.
func newProjectionRunner(b *backend, name string, readModel bool, o projection.Options) (run func(context.Context) error, wait func(context.Context, journal.Position) error, err error) {
	if b.Pool == nil {
		var mu sync.Mutex
		model := map[string]int64{}
		r, err := projection.NewRunner(b.Journal, projection.NewMemoryStore(), projection.Projection[projection.NoTx]{Name: name, Version: 1,
			Handle: func(_ context.Context, _ projection.NoTx, batch projection.Batch) error {
				if !readModel {
					return nil
				}
				tags, sums, err := balances(batch.Records)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				for i, t := range tags {
					model[t] += sums[i]
				}
				return nil
			}}, o)
		if err != nil {
			return nil, nil, err
		}
		return r.Run, r.WaitFor, nil
	}
	cfg := postgres.Config{Schema: b.Schema}
	store, err := postgres.NewProjectionStore(b.Pool, cfg)
	if err != nil {
		return nil, nil, err
	}
	table := pgx.Identifier{b.Schema, "rm_" + name}.Sanitize()
	if readModel {
		if _, err := b.Pool.Exec(context.Background(), `CREATE TABLE `+table+` (tag text PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
			return nil, nil, err
		}
	}
	r, err := projection.NewRunner(b.Journal, store, projection.Projection[pgx.Tx]{Name: name, Version: 1,
		Handle: func(ctx context.Context, tx pgx.Tx, batch projection.Batch) error {
			if !readModel {
				return nil
			}
			tags, sums, err := balances(batch.Records)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO `+table+` AS m (tag, balance) SELECT * FROM unnest($1::text[], $2::bigint[])
				ON CONFLICT (tag) DO UPDATE SET balance = m.balance + EXCLUDED.balance`, tags, sums)
			return err
		}}, o)
	if err != nil {
		return nil, nil, err
	}
	return r.Run, r.WaitFor, nil
}

// catchUp measures one projection reading the whole journal.
func catchUp(ctx context.Context, b *backend, o options, variant string, run int, last journal.Position) (projectionResult, error) {
	name := fmt.Sprintf("catchup-%d-%s", run, strings.ReplaceAll(variant, " ", "-"))
	po := projection.Options{BatchSize: o.ProjBatch, NoTakeOver: true, Logger: quietLogger()}
	runFn, wait, err := newProjectionRunner(b, name, variant == "read model", po)
	if err != nil {
		return projectionResult{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- runFn(rctx) }()
	if err := wait(ctx, last); err != nil {
		return projectionResult{}, err
	}
	elapsed := time.Since(start)
	cancel()
	<-errc
	return projectionResult{Variant: variant, Run: run, Events: o.Events, Elapsed: elapsed}, nil
}

// liveResult is the live measurement.
type liveResult struct {
	Writers      int
	WritesPerSec float64
	Applied      int64
	Lag          *histogram
}

// liveLag runs a caught-up read-model projection under the hot actor load.
func liveLag(ctx context.Context, b *backend, o options, progress io.Writer) (liveResult, error) {
	res := liveResult{Writers: o.Writers[len(o.Writers)-1], Lag: &histogram{}}
	var mu sync.Mutex
	measuring := atomic.Bool{}
	po := projection.Options{BatchSize: o.ProjBatch, NoTakeOver: true, Logger: quietLogger(), Committed: func(batch projection.Batch) {
		if !measuring.Load() {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, r := range batch.Records {
			res.Lag.record(now.Sub(r.RecordedAt))
		}
		res.Applied += int64(len(batch.Records))
	}}
	runFn, wait, err := newProjectionRunner(b, "live", true, po)
	if err != nil {
		return res, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runFn(rctx) }()
	head, err := b.Journal.Head(ctx)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "live: catching up to %s first\n", head)
	if err := wait(ctx, head); err != nil {
		return res, err
	}
	c := cell{Scenario: scenarioHot, Journal: o.journalName(), Mode: modeActor, Writers: res.Writers, Streams: 1, Run: 1}
	m, err := newActorMode(ctx, c, b)
	if err != nil {
		return res, err
	}
	measuring.Store(true)
	w := measure(ctx, c, m, 0, o.Duration, o.Progress, progress)
	end, err := b.Journal.Head(ctx)
	if err == nil {
		err = wait(ctx, end)
	}
	measuring.Store(false)
	res.WritesPerSec = w.CommandsPerSec()
	cancel()
	<-errc
	if cerr := m.close(context.WithoutCancel(ctx)); err == nil {
		err = cerr
	}
	return res, err
}
