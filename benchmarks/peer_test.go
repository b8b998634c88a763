package main

import (
	"bufio"
	"context"
	"encoding/json"
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

// TestLoadScenarioOnMemoryJournal loads the seeded aggregate through the
// runtime and the journal, and skips the peer, which needs Postgres.
func TestLoadScenarioOnMemoryJournal(t *testing.T) {
	t.Parallel()
	stdout, stderr := runHarness(t, "-scenario", "load", "-mode", "actor,occ,occ-fast,hallgren", "-writers", "2",
		"-duration", "300ms", "-runs", "1", "-warmup", "20ms", "-progress", "0", "-json")
	ran := map[string]bool{}
	for _, r := range jsonResults(t, stdout) {
		require.Zero(t, r.Errors, "%s: %s", r.Mode, r.FirstError)
		require.Positive(t, r.CommandsPerS, r.Mode)
		require.InEpsilon(t, loadEvents*r.CommandsPerS, r.EventsPerS, 0.01, "%s: every load folds %d events", r.Mode, loadEvents)
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
		require.Positive(t, r.CommandsPerS, "%s/%s/%d", r.Scenario, r.Mode, r.Writers)
		require.Positive(t, r.RoundTripsPerCommand, "%s/%s/%d: counted", r.Scenario, r.Mode, r.Writers)
		events := 1.0
		if r.Scenario == scenarioLoad {
			events = loadEvents
		}
		require.InEpsilon(t, events*r.CommandsPerS, r.EventsPerS, 0.01, "%s/%s/%d", r.Scenario, r.Mode, r.Writers)
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
	// (BEGIN, SELECT, INSERT, COMMIT); a load is one query. The window's end
	// may cut off a last Get.
	for _, sc := range []string{scenarioHot, scenarioSpread} {
		r := seen[key{sc, modeHallgren, 1}]
		require.Zero(t, r.RetriesPerCommand, sc)
		require.InDelta(t, 5, r.RoundTripsPerCommand, 0.1, sc)
		require.InDelta(t, 5, r.StatementsPerCommand, 0.1, sc)
		require.InDelta(t, 2, r.TransactionsPerCommand, 0.1, sc)
	}
	require.InDelta(t, 1, seen[key{scenarioLoad, modeHallgren, 1}].RoundTripsPerCommand, 0.1)
	require.Contains(t, stderr.String(), "sent to Postgres per load")

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE starts_with(nspname, $1)", prefix).Scan(&left))
	require.Zero(t, left, "schemas with prefix %s (Scribe's and the peer's) were not dropped", prefix)
}
