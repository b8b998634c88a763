package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/scribe-es/scribe/internal/metricread"
	"github.com/scribe-es/scribe/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(1)
	}
}

// run is the whole harness: parse args, measure every run × writer count ×
// mode, and report. Results and the table go to stdout, progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	if o.OutDir != "" {
		// Fail before measuring, not after.
		if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
			return fmt.Errorf("-out %s: %w", o.OutDir, err)
		}
	}
	if o.CPUProf != "" {
		f, err := os.Create(o.CPUProf)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if o.MutexProf != "" {
		// Open the file first, so a bad path fails before measuring.
		f, err := os.Create(o.MutexProf)
		if err != nil {
			return fmt.Errorf("-mutexprofile: %w", err)
		}
		defer f.Close()
		runtime.SetMutexProfileFraction(5)
		defer func() {
			if err := pprof.Lookup("mutex").WriteTo(f, 0); err != nil {
				fmt.Fprintln(stderr, "-mutexprofile:", err)
			}
		}()
	}
	if o.Scenario == scenarioProjection {
		return runProjection(ctx, o, stdout, stderr)
	}
	for _, sc := range o.Scenarios {
		o.Scenario = sc
		if err := runScenario(ctx, o, args, stdout, stderr); err != nil {
			return err
		}
	}
	return nil
}

// scenarioModes returns the modes of o that scenario o.Scenario measures on
// o's journal, and a note for each mode it skips.
func scenarioModes(o options) (modes []string, notes []string) {
	for _, m := range o.Modes {
		switch {
		case o.DB == "" && m == modeRaw:
			notes = append(notes, "raw skipped: it measures Postgres inserts and needs -db")
		case o.DB == "" && m == modeHallgren:
			notes = append(notes, "hallgren skipped: it measures the peer's Postgres store and needs -db")
		case m == modeActorStates && o.Scenario != scenarioTransfer:
			notes = append(notes, fmt.Sprintf("%s skipped: it measures the %s scenario only (the DCB with Uses)", m, scenarioTransfer))
		case o.Scenario == scenarioLoad && !slices.Contains(loadModes, m):
			notes = append(notes, fmt.Sprintf("%s skipped: the load scenario measures %s", m, strings.Join(loadModes, ", ")))
		default:
			modes = append(modes, m)
		}
	}
	return modes, notes
}

// runScenario measures every run × writer count × mode of scenario
// o.Scenario and reports it.
func runScenario(ctx context.Context, o options, args []string, stdout, stderr io.Writer) error {
	info := runInfo{
		Scenario: o.Scenario, Journal: o.journalName(), Pool: o.Pool, Runs: o.Runs,
		Cell: o.cellDuration().Round(time.Millisecond), Warmup: o.Warmup, Command: commandLine(args),
		Machine: fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d), %s", goruntime.GOOS, goruntime.GOARCH,
			goruntime.NumCPU(), goruntime.GOMAXPROCS(0), goruntime.Version()),
	}
	modes, notes := scenarioModes(o)
	info.Notes = append(info.Notes, notes...)
	if len(modes) == 0 {
		return fmt.Errorf("-scenario %s: no mode of -mode %s runs there (%s)", o.Scenario, strings.Join(o.Modes, ","), strings.Join(notes, "; "))
	}
	table := stdout
	if o.JSON {
		table = stderr
	}
	total := time.Duration(o.Runs*len(o.Writers)*len(modes)) * (o.cellDuration() + o.Warmup)
	fmt.Fprintf(stderr, "benchmarks: %s; modes %v, writers %v; about %v of measuring\n",
		headerLine(info), modes, o.Writers, total.Round(time.Second))
	for _, n := range info.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}

	loadBefore := loadAverage()
	var results []cellResult
	for r := 1; r <= o.Runs; r++ {
		// Rotate the mode order from run to run so no mode always goes first.
		order := slices.Concat(modes[(r-1)%len(modes):], modes[:(r-1)%len(modes)])
		for _, w := range o.Writers {
			for _, m := range order {
				c := cell{Scenario: o.Scenario, Journal: o.journalName(), Mode: m, Writers: w, Streams: streamsOf(o.Scenario, w), Run: r}
				res, err := runCell(ctx, o, c, stderr)
				if err != nil {
					return fmt.Errorf("%s/%s, %d writers, run %d: %w", c.Scenario, c.Mode, c.Writers, c.Run, err)
				}
				fmt.Fprintf(stderr, "%s/%s/%s writers=%d run=%d: %s %s/s, %.3f retries/cmd, p99 %.2f ms, %d errors%s\n",
					c.Scenario, c.Journal, c.Mode, c.Writers, c.Run, human(res.CommandsPerSec()), unitOf(c.Scenario),
					res.RetriesPerCommand(), ms(res.P99), res.Errors, res.perCommandText())
				if o.JSON {
					if err := writeJSONLine(stdout, res, o.Pool); err != nil {
						return err
					}
				}
				results = append(results, res)
			}
		}
	}
	if loadBefore != "" {
		info.Notes = append(info.Notes, fmt.Sprintf("load average (1, 5, 15 min) before: %s; after: %s (other processes compete for the same CPUs)", loadBefore, loadAverage()))
	}
	sortResults(results, modes)
	rows := summarize(results, modes)
	if err := writeTable(table, info, rows); err != nil {
		return err
	}
	if o.OutDir != "" {
		dir := o.OutDir
		if len(o.Scenarios) > 1 {
			dir = filepath.Join(o.OutDir, o.Scenario)
		}
		if err := writeOutDir(dir, info, results, rows, modes); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s/results.csv and %s/chart.svg\n", dir, dir)
	}
	return nil
}

// commandLine renders the invocation for the report, with any password in a
// -db URL replaced by "xxxxx".
func commandLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if u, err := url.Parse(a); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
				a = u.String()
			}
		}
		if strings.ContainsAny(a, " ?&*") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return strings.TrimSpace("go run ./benchmarks " + strings.Join(out, " "))
}

func headerLine(info runInfo) string {
	s := fmt.Sprintf("scenario %s, journal %s", info.Scenario, info.Journal)
	if info.Journal == "postgres" {
		s += fmt.Sprintf(", pool %d", info.Pool)
	}
	return s + fmt.Sprintf(", %d run(s) × %v per mode and writer count (+%v warm-up), %s", info.Runs, info.Cell, info.Warmup, info.Machine)
}

// runCell measures one mode at one writer count on a fresh backend.
func runCell(ctx context.Context, o options, c cell, progress io.Writer) (cellResult, error) {
	b, err := openBackend(ctx, o)
	if err != nil {
		return cellResult{}, err
	}
	m, err := newMode(ctx, c, o, b)
	if err != nil {
		return cellResult{}, errors.Join(err, b.close(context.WithoutCancel(ctx)))
	}
	counter := b.Statements
	if sc, ok := m.(statementCounting); ok {
		counter = sc.statementCounter()
	}
	var before statementCounts
	if counter != nil {
		before = counter.counts()
	}
	res := measure(ctx, c, m, o.Warmup, o.cellDuration(), o.Progress, progress)
	if counter != nil {
		after := counter.counts()
		res.Sent = statementCounts{RoundTrips: after.RoundTrips - before.RoundTrips,
			Statements: after.Statements - before.Statements, Transactions: after.Transactions - before.Transactions}
	}
	if n, ok := m.(cellNoting); ok {
		if note := n.cellNote(); note != "" {
			fmt.Fprintf(progress, "  %s\n", note)
		}
	}
	if b.Engine != nil {
		if err := printEngineStats(context.WithoutCancel(ctx), progress, b.Engine); err != nil {
			return res, err
		}
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := errors.Join(m.close(closeCtx), b.close(closeCtx)); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// statementCounting is a mode that talks to Postgres through a pool of its
// own: runCell counts that pool's statements instead of the backend's.
type statementCounting interface {
	statementCounter() *statementCounter
}

// cellNoting is a mode with something to say after a measurement (printed
// with the progress lines).
type cellNoting interface {
	cellNote() string
}

// newMode sets up mode c.Mode on backend b.
func newMode(ctx context.Context, c cell, o options, b *backend) (mode, error) {
	if c.Scenario == scenarioLoad {
		return newLoadMode(ctx, c, o, b)
	}
	switch c.Mode {
	case modeHallgren:
		m, err := newHallgrenMode(ctx, c, o, b)
		if err != nil {
			return nil, err
		}
		return m, nil
	case modeOCC, modeOCCFast:
		return &occMode{j: b.Journal, scenario: c.Scenario, fast: c.Mode == modeOCCFast}, nil
	case modeRaw:
		return newRawMode(ctx, c, o, b)
	case modeActor:
		return newActorMode(ctx, c, b)
	case modeActorPersonal:
		return newActorPersonalMode(ctx, c, b)
	case modeActorStates:
		return newActorStatesMode(ctx, c, b)
	case modeClusterLocal, modeClusterRemote:
		return newClusterMode(ctx, c, b)
	}
	return nil, fmt.Errorf("mode %s is not built into this harness", c.Mode)
}

// loadAverage returns the machine's load averages from /proc/loadavg, or ""
// where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// printEngineStats prints where a Postgres cell's append transactions spent
// their time (warm-up included): how many went out in one round trip and the
// mean duration of a write round trip and of a whole transaction.
func printEngineStats(ctx context.Context, w io.Writer, engine *metricread.Reader) error {
	s, err := engine.Sums(ctx)
	if err != nil {
		return err
	}
	batches := s.Int(postgres.MetricBatches)
	if batches == 0 {
		return nil
	}
	n := float64(batches)
	direct := s[postgres.MetricBatchesDirect]
	fmt.Fprintf(w, "  postgres journal (warm-up included): %d transactions, %.1f appends and %.1f events each; %.0f%% in one round trip, %d fenced; mean write round trip %.2f ms, mean transaction %.2f ms\n",
		batches, s[postgres.MetricBatchAppends]/n, s[postgres.MetricBatchEvents]/n, 100*direct/max(1, direct+s[postgres.MetricBatchesReadFirst]),
		s.Int(postgres.MetricBatchesFenced), ms(s.Duration(postgres.MetricBatchWriteTime))/n, ms(s.Duration(postgres.MetricBatchTime))/n)
	return nil
}
