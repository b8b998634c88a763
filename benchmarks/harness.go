package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scribe-es/scribe/runtime"
)

// target is what one command addresses: stream A (the counter scenarios) or a
// transfer from account A to account B.
type target struct{ A, B int }

// outcome is what one call of a worker's do achieved.
type outcome struct {
	Commands int // commands completed (raw: rows inserted)
	Events   int // events appended
	Retries  int // attempts beyond the first
}

// worker executes commands for one writer goroutine. A worker is used by one
// goroutine only; it may keep state between calls (occ-fast does).
type worker interface {
	do(ctx context.Context, t target) (outcome, error)
}

// mode is one way of writing, set up on one cell's backend.
type mode interface {
	// newWorker returns the worker of writer id (0-based).
	newWorker(id int) worker
	// close releases what the mode holds (actors, statements); the backend is
	// closed after it.
	close(ctx context.Context) error
}

// cell identifies one measurement.
type cell struct {
	Scenario string
	Journal  string
	Mode     string
	Writers  int
	Streams  int
	Run      int
}

// cellResult is one measurement's outcome.
type cellResult struct {
	cell
	Elapsed  time.Duration
	Commands int64
	Events   int64
	Retries  int64
	Errors   int64
	FirstErr string
	P50, P99 time.Duration
	// Completed counts every command completed, warm-up and late ones
	// included: what the Postgres counts are divided by.
	Completed int64
	// Sent is what the cell's pool sent to Postgres (warm-up included);
	// zero on the memory journal.
	Sent statementCounts
}

// perCommand returns what the cell sent to Postgres per completed command,
// and false on the memory journal.
func (r cellResult) perCommand() (roundTrips, statements, transactions float64, ok bool) {
	if r.Sent == (statementCounts{}) || r.Completed == 0 {
		return 0, 0, 0, false
	}
	n := float64(r.Completed)
	return float64(r.Sent.RoundTrips) / n, float64(r.Sent.Statements) / n, float64(r.Sent.Transactions) / n, true
}

// perCommandText renders perCommand for the progress line ("" without counts).
func (r cellResult) perCommandText() string {
	rt, st, tx, ok := r.perCommand()
	if !ok {
		return ""
	}
	return fmt.Sprintf("; per %s: %.2f round trips, %.2f statements, %.2f transactions", strings.TrimSuffix(unitOf(r.Scenario), "s"), rt, st, tx)
}

// unitOf names what one command of scenario is, in the plural.
func unitOf(scenario string) string {
	if scenario == scenarioLoad {
		return "loads"
	}
	return "commands"
}

// CommandsPerSec is the measured command rate.
func (r cellResult) CommandsPerSec() float64 { return float64(r.Commands) / r.Elapsed.Seconds() }

// EventsPerSec is the measured event rate.
func (r cellResult) EventsPerSec() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// RetriesPerCommand is the mean number of retries of a completed command.
func (r cellResult) RetriesPerCommand() float64 {
	if r.Commands == 0 {
		return 0
	}
	return float64(r.Retries) / float64(r.Commands)
}

// streamsOf returns how many streams a scenario addresses with n writers.
func streamsOf(scenario string, writers int) int {
	switch scenario {
	case scenarioHot, scenarioLoad:
		return 1
	case scenarioSpread:
		return writers
	case scenarioSkewed:
		return skewedStreams
	default:
		return transferAccounts
	}
}

// picker returns writer id's sequence of targets for a scenario.
func picker(scenario string, id, run int) func() target {
	rng := rand.New(rand.NewPCG(uint64(id)+1, uint64(run)+1))
	switch scenario {
	case scenarioHot, scenarioLoad:
		return func() target { return target{} }
	case scenarioSpread:
		return func() target { return target{A: id} }
	case scenarioSkewed:
		z := rand.NewZipf(rng, skewedZipfS, 1, skewedStreams-1)
		return func() target { return target{A: int(z.Uint64())} }
	default:
		return func() target {
			a := rng.IntN(transferAccounts)
			b := rng.IntN(transferAccounts - 1)
			if b >= a {
				b++
			}
			return target{A: a, B: b}
		}
	}
}

// writerStats is one writer's tally; only its goroutine writes it until the
// measurement ends, except done, which the progress line reads.
type writerStats struct {
	done     atomic.Int64 // commands completed, warm-up included
	commands int64
	events   int64
	retries  int64
	errors   int64
	firstErr error
	hist     histogram
	_        [64]byte // keep neighbours' counters off this cache line
}

// measure runs writers workers of m for warmup+window and tallies what
// completes inside the window. Errors of commands cut off by the end of the
// window are not counted.
func measure(ctx context.Context, c cell, m mode, warmup, window, progressEvery time.Duration, progress io.Writer) cellResult {
	stats := make([]writerStats, c.Writers)
	start := time.Now()
	from := start.Add(warmup)
	until := from.Add(window)
	// The window's end is every command's deadline: a command still running
	// then is cut off (and not counted), so the window ends on time.
	// Only a writer's first command is exempt: it runs on the caller's ctx
	// and, started after the window, is still run once, so that every writer
	// completes a command however slow the machine (a cell of a slow machine
	// has fewer, not none); it counts in the window only if it ends inside.
	parent := ctx
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	var wg sync.WaitGroup
	for id := range c.Writers {
		w := m.newWorker(id)
		pick := picker(c.Scenario, id, c.Run)
		st := &stats[id]
		wg.Go(func() {
			for parent.Err() == nil {
				t0 := time.Now()
				first := st.done.Load() == 0
				if !first && (ctx.Err() != nil || !t0.Before(until)) {
					return
				}
				cmdCtx := ctx
				if first {
					cmdCtx = parent
				}
				out, err := w.do(cmdCtx, pick())
				t1 := time.Now()
				if first && !t0.Before(until) {
					// The late first attempt: counted as done, never in the window.
					st.done.Add(int64(out.Commands))
					return
				}
				if t1.Before(from) || !t1.Before(until) {
					// Warm-up, or finished after the window closed.
					st.done.Add(int64(out.Commands))
					continue
				}
				if err != nil {
					if ctx.Err() != nil {
						return // cut off by the window's end
					}
					if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, runtime.ErrOverloaded) {
						// Also cut off by the window's end, the only
						// deadline: a remote member gets the caller's time
						// minus a margin for the reply, so its share ends a
						// moment before ctx does; and an actor sheds a
						// command whose deadline is nearer than an append
						// takes (the harness never fills a queue bound).
						continue
					}
					st.errors++
					if st.firstErr == nil {
						st.firstErr = err
					}
					continue
				}
				st.commands += int64(out.Commands)
				st.events += int64(out.Events)
				st.retries += int64(out.Retries)
				st.hist.record(t1.Sub(t0))
				st.done.Add(int64(out.Commands))
			}
		})
	}
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if progressEvery > 0 {
		progressDone.Go(func() {
			tick := time.NewTicker(progressEvery)
			defer tick.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case now := <-tick.C:
					var done int64
					for i := range stats {
						done += stats[i].done.Load()
					}
					phase := "measuring"
					if now.Before(from) {
						phase = "warming up"
					}
					fmt.Fprintf(progress, "  %s/%s/%s writers=%d run=%d %s elapsed=%.1fs of %.1fs ops=%d\n",
						c.Scenario, c.Journal, c.Mode, c.Writers, c.Run, phase,
						now.Sub(start).Seconds(), until.Sub(start).Seconds(), done)
				}
			}
		})
	}
	wg.Wait()
	close(stopProgress)
	progressDone.Wait()

	res := cellResult{cell: c, Elapsed: window}
	var h histogram
	for i := range stats {
		st := &stats[i]
		res.Commands += st.commands
		res.Events += st.events
		res.Retries += st.retries
		res.Errors += st.errors
		res.Completed += st.done.Load()
		if st.firstErr != nil && res.FirstErr == "" {
			res.FirstErr = st.firstErr.Error()
		}
		h.merge(&st.hist)
	}
	res.P50 = h.quantile(0.50)
	res.P99 = h.quantile(0.99)
	return res
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errSkipped marks a mode that cannot run on the chosen journal.
var errSkipped = errors.New("skipped")
