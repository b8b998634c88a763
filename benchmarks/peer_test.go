package main

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// jsonResults parses the harness's -json output.
func jsonResults(t *testing.T, stdout string) []jsonResult {
	t.Helper()
	var out []jsonResult
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var r jsonResult
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %q", sc.Text())
		out = append(out, r)
	}
	return out
}

// requireEventsPerCommand checks that r's event rate is events times its
// command rate, up to the rounding of both to 0.1 per second in the JSON.
func requireEventsPerCommand(t *testing.T, events float64, r jsonResult, msgAndArgs ...any) {
	t.Helper()
	require.InDelta(t, events*r.CommandsPerS, r.EventsPerS, events*0.05+0.05, msgAndArgs...)
}

// TestLoadScenarioOnMemoryJournal loads the seeded aggregate through the
// runtime and the journal, and skips the peer, which needs Postgres.
func TestLoadScenarioOnMemoryJournal(t *testing.T) {
	t.Parallel()
	stdout, stderr := runHarness(t, "-scenario", "load", "-mode", "actor,occ,occ-fast,hallgren", "-writers", "2",
		"-duration", "3s", "-runs", "1", "-warmup", "20ms", "-progress", "0", "-json")
	ran := map[string]bool{}
	for _, r := range jsonResults(t, stdout) {
		require.Zero(t, r.Errors, "%s: %s", r.Mode, r.FirstError)
		require.Positive(t, r.Completed, "%s: completed no command", r.Mode)
		requireEventsPerCommand(t, loadEvents, r, "%s: every load folds %d events", r.Mode, loadEvents)
		ran[r.Mode] = true
	}
	require.Equal(t, map[string]bool{modeActor: true, modeOCC: true}, ran)
	require.Contains(t, stderr, "hallgren skipped")
	require.Contains(t, stderr, "occ-fast skipped")
	require.Regexp(t, `\| writers +\| mode +\| loads/s`, stderr)
}

// TestPeerOnPostgres runs the peer beside Scribe in the hot, spread and load
// scenarios, checks what each command sent to Postgres where the peer's code
// fixes it (one writer: no conflicts), and that every schema was dropped.
func TestPeerOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	unique := pgtest.SchemaName(t)
	prefix := "benchpeer_" + unique[len(unique)-12:] + "_"
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := run(ctx, []string{"-db", url, "-pool", "4", "-schema-prefix", prefix,
		"-scenario", "hot,spread,load", "-mode", "actor,hallgren", "-writers", "1,3",
		"-duration", "800ms", "-runs", "1", "-warmup", "100ms", "-progress", "0", "-json"}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())

	type key struct {
		scenario, mode string
		writers        int
	}
	seen := map[key]jsonResult{}
	for _, r := range jsonResults(t, stdout.String()) {
		require.Zero(t, r.Errors, "%s/%s/%d: %s", r.Scenario, r.Mode, r.Writers, r.FirstError)
		require.Positive(t, r.Completed, "%s/%s/%d: completed no command", r.Scenario, r.Mode, r.Writers)
		require.Positive(t, r.RoundTripsPerCommand, "%s/%s/%d: counted", r.Scenario, r.Mode, r.Writers)
		events := 1.0
		if r.Scenario == scenarioLoad {
			events = loadEvents
		}
		requireEventsPerCommand(t, events, r, "%s/%s/%d", r.Scenario, r.Mode, r.Writers)
		seen[key{r.Scenario, r.Mode, r.Writers}] = r
	}
	for _, sc := range []string{scenarioHot, scenarioSpread, scenarioLoad} {
		for _, m := range []string{modeActor, modeHallgren} {
			for _, w := range []int{1, 3} {
				require.Contains(t, seen, key{sc, m, w}, "%s/%s/%d did not run", sc, m, w)
			}
		}
		require.Contains(t, stderr.String(), "scenario "+sc+" · journal postgres")
	}
	// One writer, no conflicts: a command is a Get (one query) and a Save
	// (BEGIN, SELECT, INSERT, COMMIT); a load is one query. The counts are
	// per completed command (warm-up included), and the window's end may
	// cut off the writer's last command after it sent part of its
	// statements (at most 4 of 5, both transactions begun; at most the one
	// query of a load): so n completed commands sent between per*n and
	// per*n + cut, whatever n the machine's speed allowed.
	within := func(name string, perCommand float64, r jsonResult, per, cut float64) {
		t.Helper()
		n := float64(r.Completed)
		require.Positive(t, n, "%s: no command completed", name)
		total := math.Round(perCommand * n)
		require.GreaterOrEqual(t, total, per*n, "%s: %v per command over %v commands", name, perCommand, n)
		require.LessOrEqual(t, total, per*n+cut, "%s: %v per command over %v commands", name, perCommand, n)
	}
	for _, sc := range []string{scenarioHot, scenarioSpread} {
		r := seen[key{sc, modeHallgren, 1}]
		require.Zero(t, r.RetriesPerCommand, sc)
		within(sc+" round trips", r.RoundTripsPerCommand, r, 5, 4)
		within(sc+" statements", r.StatementsPerCommand, r, 5, 4)
		within(sc+" transactions", r.TransactionsPerCommand, r, 2, 2)
	}
	load := seen[key{scenarioLoad, modeHallgren, 1}]
	within("load round trips", load.RoundTripsPerCommand, load, 1, 1)
	require.Contains(t, stderr.String(), "sent to Postgres per load")

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, $1)", prefix).Scan(&left))
	require.Zero(t, left, "schemas with prefix %s (Scribe's and the peer's) were not dropped", prefix)
}
