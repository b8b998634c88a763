// Command overload measures what impatient clients get from one hot stream:
// N clients (default 2,000) each execute a command with a short timeout
// (default 50 ms), retrying at once after a timeout, against ONE stream of a
// Scribe runtime, on the memory journal and on Postgres (-db). With
// -deadline=false the timeout is not the command's deadline: the client
// cancels its context when it gives up, as an HTTP client that sends no
// deadline does (the server sees its connection close), so the runtime knows
// only its own 30 s default deadline. -variants measures several
// configurations side by side, alternating within each run: "off" disables
// queue-delay shedding, a duration (such as 5ms) sets its target. Beside it, an
// unloaded cell (16 patient clients) gives the rate to compare with, and a
// pending-queue cell parks 100,000 callers on one stream whose append is held
// and measures the memory they cost.
//
// Reported per backend: acknowledged commands per second (goodput) and as a
// share of the unloaded rate; commands applied (the stream's events: every
// applied command appends one) and how many of them were for callers who had
// already given up (applied − acknowledged); p50/p99 latency of acknowledged
// commands; and the process's RSS growth during the cell (sampled VmRSS peak
// minus VmRSS before, Linux). Figures are medians over -runs runs.
//
//	go run ./benchmarks/overload -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -runs 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

type options struct {
	db        string
	clients   int
	timeout   time.Duration
	duration  time.Duration
	unloaded  time.Duration
	runs      int
	pending   int
	backoff   time.Duration
	backends  string
	skipQueue bool
	deadline  bool
	variants  []variant
}

// variant is one runtime configuration measured side by side with others.
type variant struct {
	name   string
	mutate func(*runtime.Config)
}

func parseVariants(list string) ([]variant, error) {
	var vs []variant
	for _, v := range strings.Split(list, ",") {
		switch v = strings.TrimSpace(v); v {
		case "off":
			vs = append(vs, variant{name: "queue-delay shedding off", mutate: func(c *runtime.Config) { c.DisableQueueDelayShedding = true }})
		case "default":
			vs = append(vs, variant{name: "queue-delay shedding (defaults)", mutate: func(*runtime.Config) {}})
		default:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("-variants: %q is neither \"off\", \"default\" nor a positive target such as 5ms", v)
			}
			vs = append(vs, variant{name: "queue-delay target " + v, mutate: func(c *runtime.Config) { c.QueueDelayTarget = d }})
		}
	}
	return vs, nil
}

func main() {
	var o options
	fs := flag.NewFlagSet("overload", flag.ExitOnError)
	fs.StringVar(&o.db, "db", os.Getenv("SCRIBE_DATABASE_URL"), "Postgres URL (default $SCRIBE_DATABASE_URL); empty measures the memory journal only")
	fs.IntVar(&o.clients, "clients", 2000, "impatient clients on the one stream")
	fs.DurationVar(&o.timeout, "timeout", 50*time.Millisecond, "each attempt's timeout")
	fs.DurationVar(&o.duration, "duration", 15*time.Second, "length of an overload cell")
	fs.DurationVar(&o.unloaded, "unloaded", 5*time.Second, "length of an unloaded cell")
	fs.IntVar(&o.runs, "runs", 3, "runs per cell (medians are reported)")
	fs.IntVar(&o.pending, "pending", 100_000, "callers parked on a held stream in the pending-queue cell (0 skips it)")
	fs.DurationVar(&o.backoff, "backoff", 50*time.Millisecond, "pause after an error that came back before the timeout (an immediate overloaded): a client that honours a short Retry-After instead of spinning")
	fs.StringVar(&o.backends, "backends", "memory,postgres", "backends to measure (postgres needs -db)")
	fs.BoolVar(&o.deadline, "deadline", true, "give each attempt its timeout as the command's deadline; false: cancel it when the client gives up (a client that sends no deadline)")
	variants := fs.String("variants", "default", "configurations measured side by side: off (no queue-delay shedding), default, or a queue-delay target such as 10ms")
	_ = fs.Parse(os.Args[1:])
	var err error
	if o.variants, err = parseVariants(*variants); err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(1)
	}
}

// cell is one measured run.
type cell struct {
	acked, timedOut, rejected, applied int64
	seconds                            float64
	p50, p99                           time.Duration
	rssMB                              float64
}

func (c cell) goodput() float64 { return float64(c.acked) / c.seconds }
func (c cell) gonePct() float64 {
	if c.applied == 0 {
		return 0
	}
	return 100 * float64(c.applied-c.acked) / float64(c.applied)
}

type counterState struct{ N int64 }
type deposit struct{ Amount int64 }
type deposited struct {
	Amount int64  `json:"amount"`
	Note   string `json:"note"`
}

// newRuntime starts a runtime with the counter aggregate on j.
func newRuntime(ctx context.Context, j journal.Journal, node string, mutate func(*runtime.Config)) (*runtime.Runtime, error) {
	cfg := runtime.Config{Journal: j, NodeID: node}
	mutate(&cfg)
	rt, err := runtime.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	err = errors.Join(
		runtime.RegisterEvent[deposited](rt, "Deposited", 1),
		runtime.RegisterAggregate(rt, runtime.Aggregate[counterState]{
			Name:    "counter",
			Initial: func() counterState { return counterState{} },
			Decide: func(s counterState, c any) ([]any, error) {
				return []any{deposited{Amount: c.(deposit).Amount, Note: "overload benchmark payload padding"}}, nil
			},
			Evolve: func(s counterState, e any) counterState { s.N += e.(deposited).Amount; return s },
		}))
	if err != nil {
		_ = rt.Shutdown(ctx)
		return nil, err
	}
	return rt, nil
}

type backend struct {
	name  string
	open  func(ctx context.Context) (journal.Journal, func(), error)
	extra []string
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	var backends []backend
	for _, b := range strings.Split(o.backends, ",") {
		switch b {
		case "memory":
			backends = append(backends, backend{name: "memory", open: func(context.Context) (journal.Journal, func(), error) {
				return memory.New(), func() {}, nil
			}})
		case "postgres":
			if o.db == "" {
				fmt.Fprintln(stderr, "note: postgres skipped: give -db")
				continue
			}
			backends = append(backends, backend{name: "postgres", open: func(ctx context.Context) (journal.Journal, func(), error) {
				return openPostgres(ctx, o.db)
			}})
		default:
			return fmt.Errorf("-backends: unknown backend %q; use memory and/or postgres", b)
		}
	}
	// First, in a fresh process: RSS is measured against the start.
	if o.pending > 0 {
		fmt.Fprintf(stdout, "| pending-queue cell | accepted (queued or in the held batch) | rejected at once | RSS growth while held |\n|---|---|---|---|\n")
		acc, rej, rss, err := pendingCell(ctx, o.pending)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %d callers on one held stream (memory) | %d | %d | %.0f MB |\n\n", o.pending, acc, rej, rss)
	}
	fmt.Fprintf(stdout, "| backend | configuration | unloaded acked/s | overload acked/s | goodput vs unloaded | applied | applied for callers who left | refused at once | p50 / p99 acked | RSS growth |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, b := range backends {
		unloaded := make([][]cell, len(o.variants))
		loaded := make([][]cell, len(o.variants))
		for r := range o.runs {
			for i, v := range o.variants {
				fmt.Fprintf(stderr, "%s, %s, run %d/%d: unloaded %s, then %d clients with %s timeouts (deadline %t) for %s\n", b.name, v.name, r+1, o.runs, o.unloaded, o.clients, o.timeout, o.deadline, o.duration)
				u, err := measure(ctx, b, v, 16, 0, o.unloaded, 0, true)
				if err != nil {
					return err
				}
				l, err := measure(ctx, b, v, o.clients, o.timeout, o.duration, o.backoff, o.deadline)
				if err != nil {
					return err
				}
				fmt.Fprintf(stderr, "  unloaded %.0f/s; overload %.0f/s acked, %d applied (%.0f%% for callers who left), %d timed out, %d refused, p99 %s, RSS +%.0f MB\n",
					u.goodput(), l.goodput(), l.applied, l.gonePct(), l.timedOut, l.rejected, l.p99, l.rssMB)
				unloaded[i], loaded[i] = append(unloaded[i], u), append(loaded[i], l)
			}
		}
		for i, v := range o.variants {
			u := median(unloaded[i], func(c cell) float64 { return c.goodput() })
			m := func(f func(c cell) float64) float64 { return median(loaded[i], f) }
			fmt.Fprintf(stdout, "| %s | %s | %.0f | %.0f | %.0f%% | %.0f | %.0f%% | %.0f | %.1f / %.1f ms | %.0f MB |\n", b.name, v.name, u, m(cell.goodput),
				100*m(cell.goodput)/u, m(func(c cell) float64 { return float64(c.applied) }), m(cell.gonePct), m(func(c cell) float64 { return float64(c.rejected) }),
				m(func(c cell) float64 { return ms(c.p50) }), m(func(c cell) float64 { return ms(c.p99) }), m(func(c cell) float64 { return c.rssMB }))
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(cs []cell, f func(cell) float64) float64 {
	v := make([]float64, len(cs))
	for i, c := range cs {
		v[i] = f(c)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// measure runs clients on one fresh stream for d; timeout 0 means patient.
// With deadline false a client cancels its attempt at the timeout instead of
// giving it as the attempt's deadline.
func measure(ctx context.Context, b backend, v variant, clients int, timeout, d, backoff time.Duration, deadline bool) (cell, error) {
	j, closeJ, err := b.open(ctx)
	if err != nil {
		return cell{}, err
	}
	defer closeJ()
	rt, err := newRuntime(ctx, j, "overload", v.mutate)
	if err != nil {
		return cell{}, err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	target := runtime.Target{Aggregate: "counter", ID: "hot"}
	if _, err := rt.Execute(ctx, target, deposit{Amount: 1}); err != nil { // activate
		return cell{}, err
	}
	startVersion := uint64(1)
	rss0 := rssMB()
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if r := uint64(rssMB() * 1024); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()
	var c cell
	var mu sync.Mutex
	var lat []time.Duration
	end := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			var acked, timedOut, rejected int64
			for time.Now().Before(end) {
				actx, cancel := ctx, context.CancelFunc(func() {})
				switch {
				case timeout > 0 && deadline:
					actx, cancel = context.WithTimeout(ctx, timeout)
				case timeout > 0:
					var stop context.CancelFunc
					actx, stop = context.WithCancel(ctx)
					t := time.AfterFunc(timeout, stop)
					cancel = func() { t.Stop(); stop() }
				}
				t0 := time.Now()
				_, err := rt.Execute(actx, target, deposit{Amount: 1})
				cancel()
				switch {
				case err == nil:
					acked++
					mine = append(mine, time.Since(t0))
				case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
					timedOut++
				default:
					rejected++
					time.Sleep(backoff)
				}
			}
			mu.Lock()
			c.acked += acked
			c.timedOut += timedOut
			c.rejected += rejected
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	c.seconds = time.Since(start).Seconds()
	close(stopSampling)
	<-sampled
	c.rssMB = float64(peak.Load())/1024 - rss0
	// Let commands still in flight (decided for callers who left) finish,
	// then count what was applied.
	if err := rt.Shutdown(context.Background()); err != nil {
		return cell{}, err
	}
	sum, err := j.TagSummary(ctx, target.Stream())
	if err != nil {
		return cell{}, err
	}
	c.applied = int64(sum.Version - startVersion)
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		c.p50, c.p99 = lat[n/2], lat[min(n-1, n*99/100)]
	}
	return c, nil
}

// held blocks every Append until release is closed.
type held struct {
	journal.Journal
	release chan struct{}
}

func (h *held) Append(ctx context.Context, evs []journal.Event, o journal.AppendOptions) (journal.AppendResult, error) {
	<-h.release
	return h.Journal.Append(ctx, evs, o)
}

// pendingCell parks n callers (each its own goroutine, a long timeout) on one
// stream whose appends are held, and measures how many were queued, how many
// were refused at once and the RSS they cost while held.
func pendingCell(ctx context.Context, n int) (accepted, rejected int64, rss float64, err error) {
	h := &held{Journal: memory.New(), release: make(chan struct{})}
	mem := h.Journal.(*memory.Journal)
	rt, err := runtime.New(ctx, runtime.Config{Journal: h, Sessions: mem, NodeID: "pending"})
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	if err := errors.Join(runtime.RegisterEvent[deposited](rt, "Deposited", 1), runtime.RegisterAggregate(rt, runtime.Aggregate[counterState]{
		Name: "counter", Initial: func() counterState { return counterState{} },
		Decide: func(s counterState, c any) ([]any, error) { return []any{deposited{Amount: 1}}, nil },
		Evolve: func(s counterState, e any) counterState { return s },
	})); err != nil {
		return 0, 0, 0, err
	}
	target := runtime.Target{Aggregate: "counter", ID: "parked"}
	rss0 := rssMB()
	var rej, started atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			started.Add(1)
			if _, err := rt.Execute(cctx, target, deposit{Amount: 1}); errors.Is(err, runtime.ErrOverloaded) {
				rej.Add(1)
			}
		})
	}
	// Wait until every caller has called Execute and the queue and the
	// refusals have stopped changing: every caller is then queued, held in
	// the first (held) batch, or refused.
	for stable, last := 0, int64(-1); stable < 5; time.Sleep(20 * time.Millisecond) {
		cur := int64(rt.Pending(target)) + rej.Load()
		if started.Load() == int64(n) && cur == last {
			stable++
		} else {
			stable = 0
		}
		last = cur
	}
	rss = rssMB() - rss0
	accepted = int64(n) - rej.Load()
	close(h.release)
	wg.Wait()
	return accepted, rej.Load(), rss, nil
}

// rssMB reads the process's resident set size (Linux), in MB.
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// openPostgres migrates a fresh schema and returns a journal on it; the
// returned function drops the schema.
func openPostgres(ctx context.Context, url string) (journal.Journal, func(), error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	schema := fmt.Sprintf("overload_%d", time.Now().UnixNano())
	cfg := postgres.Config{Schema: schema}
	if err := postgres.Migrate(ctx, pool, cfg); err != nil {
		pool.Close()
		return nil, nil, err
	}
	j, err := postgres.NewJournal(pool, cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return j, func() {
		_ = j.Close()
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}, nil
}
