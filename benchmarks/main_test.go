package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for the harness's progress goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// memoryModes are the modes that run on the memory journal.
var memoryModes = []string{modeActor, modeOCC, modeOCCFast}

// runHarness runs the harness with args and returns stdout and stderr.
func runHarness(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, args, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	return stdout.String(), stderr.String()
}

func TestHarnessOutputShapeOnMemoryJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr := runHarness(t, "-scenario", "hot", "-mode", strings.Join(append(memoryModes, modeRaw), ","),
		"-writers", "1,4", "-duration", "500ms", "-runs", "1", "-warmup", "50ms", "-progress", "100ms",
		"-json", "-out", dir)

	// stdout: one JSON object per line, per run, writer count and mode.
	fields := []string{"scenario", "journal", "mode", "writers", "streams", "run", "commands_per_s",
		"events_per_s", "retries_per_command", "p50_ms", "p99_ms", "errors"}
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var obj map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &obj), "line %q", sc.Text())
		for _, f := range fields {
			require.Contains(t, obj, f, "line %q", sc.Text())
		}
		require.Equal(t, "hot", obj["scenario"])
		require.Equal(t, "memory", obj["journal"])
		require.EqualValues(t, 1, obj["streams"])
		require.EqualValues(t, 0, obj["errors"], "line %q", sc.Text())
		require.Contains(t, obj, "completed", "line %q: completed no command", sc.Text())
		require.Greater(t, obj["completed"].(float64), 0.0, "line %q: completed no command", sc.Text())
		seen[obj["mode"].(string)]++
	}
	for _, m := range memoryModes {
		require.Equal(t, 2, seen[m], "mode %s: want one line per writer count", m)
	}
	require.NotContains(t, seen, modeRaw, "raw needs Postgres")

	// stderr: progress lines, the note about raw, and the table.
	require.Contains(t, stderr, "measuring elapsed=")
	require.Contains(t, stderr, "raw skipped")
	require.Contains(t, stderr, "| writers")
	require.Contains(t, stderr, "actor ÷ mode")

	// results.csv: the header and one row per JSON line.
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, csvHeader, rows[0])
	require.Len(t, rows, 1+2*len(memoryModes))

	// chart.svg: a polyline per mode, axis labels and a legend.
	svg, err := os.ReadFile(filepath.Join(dir, "chart.svg"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(svg, []byte("<svg ")))
	for _, m := range memoryModes {
		require.Equal(t, 1, bytes.Count(svg, []byte(`<polyline data-mode="`+m+`" data-panel="commands/s"`)), "throughput polyline of %s", m)
		require.Equal(t, 1, bytes.Count(svg, []byte(`<polyline data-mode="`+m+`" data-panel="ms p99"`)), "p99 polyline of %s", m)
		require.Contains(t, string(svg), ">"+m+"</text>", "legend entry of %s", m)
	}
	require.Contains(t, string(svg), "writers (log scale)")
	require.Contains(t, string(svg), "commands per second (log scale")
	require.Contains(t, string(svg), "p99 latency, ms (log scale")
}

func TestHarnessRunsEveryScenario(t *testing.T) {
	t.Parallel()
	for _, sc := range []string{scenarioSpread, scenarioSkewed, scenarioTransfer} {
		stdout, stderr := runHarness(t, "-scenario", sc, "-mode", strings.Join(memoryModes, ","), "-writers", "3",
			"-duration", "300ms", "-runs", "1", "-warmup", "20ms", "-progress", "0", "-json")
		require.Contains(t, stderr, "scenario "+sc+" · journal memory", sc)
		ran := map[string]bool{}
		lines := bufio.NewScanner(strings.NewReader(stdout))
		for lines.Scan() {
			var r jsonResult
			require.NoError(t, json.Unmarshal(lines.Bytes(), &r))
			require.Zero(t, r.Errors, "%s/%s: %s", sc, r.Mode, r.FirstError)
			require.Positive(t, r.Completed, "%s/%s: completed no command", sc, r.Mode)
			require.Equal(t, streamsOf(sc, 3), r.Streams)
			ran[r.Mode] = true
		}
		for _, m := range memoryModes {
			require.True(t, ran[m], "mode %s in %s", m, sc)
			require.Regexp(t, `\| 3 +\| `+m+` `, stderr, "row of %s in %s", m, sc)
		}
	}
}

func TestOptionsRejectMistakes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-scenario", "cold"},
		{"-mode", "actor,pessimistic"},
		{"-mode", ""},
		{"-writers", "0"},
		{"-writers", "x"},
		{"-runs", "0"},
		{"-duration", "0s"},
		{"-pool", "0"},
		{"-scenario", ","},
		{"-scenario", "hot,projection"},
		{"-scenario", "transfer", "-mode", "actor,hallgren"},
		{"extra"},
	} {
		_, err := parseOptions(args, &bytes.Buffer{})
		require.Error(t, err, "args %q", args)
	}
	o, err := parseOptions([]string{"-writers", "64, 1,8,8", "-mode", "occ,actor", "-duration", "6s", "-runs", "3"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []int{1, 8, 64}, o.Writers)
	require.Equal(t, []string{modeOCC, modeActor}, o.Modes)
	require.Equal(t, 2*time.Second, o.cellDuration())
	require.Equal(t, "memory", o.journalName())
}

func TestSummarizeTakesMediansAndPerRunRatios(t *testing.T) {
	t.Parallel()
	res := func(m string, run int, cmds int64, p99 time.Duration) cellResult {
		return cellResult{cell: cell{Mode: m, Writers: 8, Streams: 1, Run: run}, Elapsed: time.Second,
			Commands: cmds, Events: cmds, Retries: cmds / 2, P99: p99}
	}
	rows := summarize([]cellResult{
		res(modeActor, 1, 1000, 3*time.Millisecond), res(modeOCC, 1, 100, 9*time.Millisecond),
		res(modeActor, 2, 4000, 1*time.Millisecond), res(modeOCC, 2, 200, 7*time.Millisecond),
		res(modeActor, 3, 3000, 2*time.Millisecond), res(modeOCC, 3, 1000, 8*time.Millisecond),
	}, []string{modeActor, modeOCC})
	require.Len(t, rows, 2)
	require.Equal(t, modeActor, rows[0].Mode)
	require.Equal(t, 3000.0, rows[0].CommandsPerS)
	require.Equal(t, 2*time.Millisecond, rows[0].P99)
	require.Equal(t, 200.0, rows[1].CommandsPerS)
	// Per-run ratios 10, 20, 3: the median is 10 (not 3000/200 = 15).
	require.Equal(t, 10.0, rows[1].ActorRatio)
	require.Equal(t, 0.5, rows[1].RetriesPerCommand)
}

// TestOCCLoopsLoseNoCommand races writers through each OCC loop on one journal
// and checks that every acknowledged command is stored exactly once.
func TestOCCLoopsLoseNoCommand(t *testing.T) {
	t.Parallel()
	for _, fast := range []bool{false, true} {
		j := memory.New()
		defer j.Close()
		m := &occMode{j: j, scenario: scenarioHot, fast: fast}
		const writers, each = 6, 40
		var wg sync.WaitGroup
		var mu sync.Mutex
		retries := 0
		for id := range writers {
			w := m.newWorker(id)
			wg.Go(func() {
				for range each {
					out, err := w.do(context.Background(), target{A: 3})
					if err != nil {
						t.Errorf("fast=%v: %v", fast, err)
						return
					}
					mu.Lock()
					retries += out.Retries
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		var st counterState
		for r, err := range j.ReadStream(context.Background(), journal.Stream(counterTag(3)), 1, 0) {
			require.NoError(t, err)
			st, err = foldCounter(st, r)
			require.NoError(t, err)
		}
		require.EqualValues(t, writers*each, st.Version, "fast=%v", fast)
		require.EqualValues(t, writers*each, st.Balance, "fast=%v", fast)
	}
}

// TestOCCTransfersConserveMoney races transfers over a few accounts and checks
// that the money in the system is conserved and every transfer stored once.
func TestOCCTransfersConserveMoney(t *testing.T) {
	t.Parallel()
	for _, fast := range []bool{false, true} {
		j := memory.New()
		defer j.Close()
		m := &occMode{j: j, scenario: scenarioTransfer, fast: fast}
		const writers, each, accounts = 4, 30, 3
		var wg sync.WaitGroup
		var workers []transferWorker
		for id := range writers {
			w := m.newWorker(id)
			workers = append(workers, w.(transferWorker))
			wg.Go(func() {
				for i := range each {
					a := (id + i) % accounts
					_, err := w.do(context.Background(), target{A: a, B: (a + 1) % accounts})
					if err != nil {
						t.Errorf("fast=%v: %v", fast, err)
						return
					}
				}
			})
		}
		wg.Wait()
		balances := map[journal.Tag]int64{}
		n := 0
		for r, err := range j.ReadAll(context.Background(), journal.Position{}, 0) {
			require.NoError(t, err)
			var e transferred
			require.NoError(t, json.Unmarshal(r.Data, &e))
			balances[e.From] -= e.Amount
			balances[e.To] += e.Amount
			n++
		}
		require.Equal(t, writers*each, n, "fast=%v", fast)
		var sum int64
		for _, b := range balances {
			sum += b
		}
		require.Zero(t, sum, "fast=%v", fast)
		// Each worker's view (occ-fast: its cache plus the tail) agrees with the journal.
		for _, w := range workers {
			for a := range accounts {
				from, to := accountTag(a), accountTag((a+2)%accounts)
				st, _, err := w.load(context.Background(), transferQuery(from, to), from, to)
				require.NoError(t, err)
				require.Equal(t, openingBalance+balances[from], st.FromBalance, "fast=%v", fast)
				require.Equal(t, openingBalance+balances[to], st.ToBalance, "fast=%v", fast)
			}
		}
	}
}

// TestHarnessOnPostgres runs every mode briefly on the Postgres journal and
// checks that raw mode ran and that every per-measurement schema was dropped.
func TestHarnessOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	unique := pgtest.SchemaName(t) // ends in a random hex suffix
	prefix := "benchtest_" + unique[len(unique)-12:] + "_"
	stdout, stderr := runHarness(t, "-db", url, "-pool", "4", "-schema-prefix", prefix,
		"-scenario", "hot", "-writers", "2", "-duration", "2s", "-runs", "1", "-warmup", "200ms",
		"-progress", "0", "-json")
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var r jsonResult
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		require.Equal(t, "postgres", r.Journal)
		require.Equal(t, 4, r.Pool)
		require.Zero(t, r.Errors, "mode %s: %s", r.Mode, r.FirstError)
		require.Positive(t, r.Completed, "mode %s: completed no command", r.Mode)
		seen[r.Mode] = true
	}
	for _, m := range allModes {
		require.True(t, seen[m], "mode %s did not run", m)
	}
	require.Contains(t, stderr, "pool 4 connections (every mode)")
	require.Regexp(t, `postgres journal \(warm-up included\): [1-9]\d* transactions`, stderr,
		"the engine's counters, read through its metrics")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, $1)", prefix).Scan(&left))
	require.Zero(t, left, "schemas with prefix %s were not dropped", prefix)
}
