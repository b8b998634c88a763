// Command console measures the first paint of each page of the operator's
// console (scribe console) against a schema holding many events (default
// 1,000,000, written through the journal: 10,000 account streams, 8 event
// types, a correlation ID on every 1,000th event, one projection halfway
// behind). Each page is loaded -runs times in headless Chromium, pages
// alternating within a run; reported per page: the median first contentful
// paint (the browser's paint timing, from navigation start) and the median
// time the server took to answer the page (HTTP, measured beside it).
//
//	go run ./benchmarks/console -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -runs 5
//
// The schema is dropped at the end unless -keep; -schema reuses one that a
// previous -keep run filled.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/internal/console"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

func main() {
	db := flag.String("db", os.Getenv("SCRIBE_TEST_DATABASE_URL"), "Postgres URL")
	events := flag.Int("events", 1_000_000, "events to fill the schema with")
	runs := flag.Int("runs", 5, "loads of each page")
	schema := flag.String("schema", "", "reuse this filled schema (from a -keep run) instead of filling a new one")
	keep := flag.Bool("keep", false, "keep the schema at the end")
	shots := flag.String("screenshots", "", "save a PNG of each page (after the last run) in this directory")
	flag.Parse()
	if err := run(*db, *events, *runs, *schema, *keep, *shots); err != nil {
		fmt.Fprintln(os.Stderr, "console benchmark:", err)
		os.Exit(1)
	}
}

func run(url string, n, runs int, schema string, keep bool, shots string) error {
	if url == "" {
		return fmt.Errorf("give -db or SCRIBE_TEST_DATABASE_URL")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	fill := schema == ""
	if fill {
		schema = fmt.Sprintf("bench_console_%d", time.Now().UnixNano()%1_000_000_000)
	}
	cfg := postgres.Config{Schema: schema}
	if !keep && fill {
		defer func() {
			_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		}()
	}
	if err := postgres.Migrate(ctx, pool, cfg); err != nil {
		return err
	}
	j, err := postgres.NewJournal(pool, cfg)
	if err != nil {
		return err
	}
	defer j.Close()
	ps, err := postgres.NewProjectionStore(pool, cfg)
	if err != nil {
		return err
	}
	admin, err := pgadmin.New(pool, cfg)
	if err != nil {
		return err
	}
	var sample journal.Record
	if fill {
		if sample, err = fillSchema(ctx, j, ps, n); err != nil {
			return err
		}
		// A filled table in its steady state: autovacuum has set its
		// visibility map and statistics (the fill is one burst of inserts).
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{schema}.Sanitize()+".events"); err != nil {
			return err
		}
	} else {
		newest, err := admin.Newest(ctx, 1)
		if err != nil || len(newest) == 0 {
			return fmt.Errorf("schema %s holds no events (%v)", schema, err)
		}
		if sample, err = j.ReadEvent(ctx, newest[0].ID); err != nil {
			return err
		}
	}
	o, err := admin.Overview(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "schema %s: %d events, %d streams\n", schema, o.Events, o.Streams)

	c, err := console.New(console.Config{Journal: j, Admin: admin, Projections: ps, Schema: schema, Database: "bench"})
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Follow(fctx) }()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()

	path, err := exec.LookPath("chromium")
	if err != nil {
		return fmt.Errorf("no chromium: install the chromium package")
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		return err
	}

	tag := sample.Tags[0]
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"streams", "/streams?prefix=account:"},
		{"stream", "/streams/" + string(tag)},
		{"event", "/events/" + sample.ID.String()},
		{"correlation", "/correlations/corr-1"},
		{"types", "/types"},
		{"leases", "/leases"},
		{"projections", "/projections"},
		{"verify", "/verify"},
	}
	paint := map[string][]time.Duration{}
	serve := map[string][]time.Duration{}
	for r := 0; r < runs; r++ {
		for _, p := range pages {
			start := time.Now()
			res, err := http.Get(srv.URL + p.path)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%s answered %d", p.path, res.StatusCode)
			}
			serve[p.name] = append(serve[p.name], time.Since(start))
			if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
				return fmt.Errorf("%s: %w", p.path, err)
			}
			ms, err := chromedp.Run(bctx, chromedp.Poll[float64](
				`(() => { const e = performance.getEntriesByName("first-contentful-paint")[0]; return e ? e.startTime : 0; })()`))
			if err != nil {
				return fmt.Errorf("%s: reading the paint timing: %w", p.path, err)
			}
			paint[p.name] = append(paint[p.name], time.Duration(ms*float64(time.Millisecond)))
		}
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", r+1, runs)
	}
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			return err
		}
		// Live traffic for the pictures: about 200 events a second.
		wctx, stopWriting := context.WithCancel(ctx)
		defer stopWriting()
		go func() {
			for k := 0; wctx.Err() == nil; k++ {
				evs := make([]journal.Event, 20)
				for i := range evs {
					evs[i] = journal.Event{ID: journal.NewEventID(), Type: "MoneyDeposited", SchemaVersion: 1,
						Tags: []journal.Tag{journal.Tag(fmt.Sprintf("account:%d", (k*20+i)%10_000))}, Data: []byte(`{"amount":1}`)}
				}
				_, _ = j.Append(wctx, evs, journal.AppendOptions{})
				select {
				case <-wctx.Done():
				case <-time.After(time.Duration(50+k%100) * time.Millisecond):
				}
			}
		}()
		for _, p := range pages {
			if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
				return err
			}
			wait := 3 * time.Second
			if p.name == "overview" {
				wait = 45 * time.Second // let the live charts draw
			}
			time.Sleep(wait)
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(shots, p.name+".png"), png, 0o644); err != nil {
				return err
			}
		}
	}
	fmt.Printf("| page (%d events) | first contentful paint, median of %d | server answer, median | slowest paint |\n|---|---:|---:|---:|\n", o.Events, runs)
	for _, p := range pages {
		fmt.Printf("| %s | %s | %s | %s |\n", p.name, median(paint[p.name]), median(serve[p.name]), slices.Max(paint[p.name]).Round(time.Millisecond))
	}
	out, _ := json.Marshal(map[string]any{"events": o.Events, "paint": paint, "serve": serve})
	fmt.Fprintln(os.Stderr, string(out))
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

// fillSchema appends n events through the journal in batches of 1,000, each
// event on one of 10,000 account streams, and leaves one projection halfway.
func fillSchema(ctx context.Context, j *postgres.Journal, ps *postgres.ProjectionStore, n int) (journal.Record, error) {
	types := []string{"AccountOpened", "MoneyDeposited", "MoneyWithdrawn", "MoneyTransferred", "LimitChanged", "AccountFrozen", "AccountThawed", "StatementIssued"}
	const batch = 1000
	start := time.Now()
	shown := start
	var last journal.Record
	var half journal.Position
	for i := 0; i < n; i += batch {
		evs := make([]journal.Event, 0, batch)
		for k := i; k < min(n, i+batch); k++ {
			md := journal.Metadata{}
			if k%1000 == 0 {
				md.CorrelationID = fmt.Sprintf("corr-%d", k/100_000)
			}
			evs = append(evs, journal.Event{
				ID: journal.NewEventID(), Type: types[k%len(types)], SchemaVersion: 1,
				Tags: []journal.Tag{journal.Tag(fmt.Sprintf("account:%d", k%10_000))},
				Data: []byte(fmt.Sprintf(`{"amount":%d,"note":"%s"}`, k, strings.Repeat("x", 40))), Metadata: md,
			})
		}
		res, err := j.Append(ctx, evs, journal.AppendOptions{})
		if err != nil {
			return journal.Record{}, err
		}
		last = res.Records[len(res.Records)-1]
		if half.IsZero() && i >= n/2 {
			half = last.Position
		}
		if time.Since(shown) > 5*time.Second {
			shown = time.Now()
			done := i + len(evs)
			fmt.Fprintf(os.Stderr, "filling: %d/%d events (%.0f/s)\n", done, n, float64(done)/time.Since(start).Seconds())
		}
	}
	k := projection.Key{Name: "balances", Version: 1}
	if _, err := ps.Join(ctx, k, projection.Layout{}, "bench", time.Minute); err != nil {
		return journal.Record{}, err
	}
	leases, err := ps.Claim(ctx, k, "bench", time.Minute, []int{0})
	if err != nil {
		return journal.Record{}, err
	}
	if !half.IsZero() && len(leases) == 1 {
		if err := ps.Commit(ctx, leases, []journal.Record{{Position: half}}, []int{0}, func(context.Context, pgx.Tx) error { return nil }); err != nil {
			return journal.Record{}, err
		}
	}
	fmt.Fprintf(os.Stderr, "filled %d events in %s\n", n, time.Since(start).Round(time.Second))
	return last, nil
}
