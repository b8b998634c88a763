package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// TestScribeCLIOnARunningBank builds the operator's command line and points
// it at a running bank on Postgres: `scribe tail` prints a deposit made
// through the bank's API (the delay is logged: a NOTIFY wake-up, well under
// a second on an idle machine). Then, issue 17's "done when" on a schema
// filled by the bank's loadgen: `scribe verify` exits 0; after an UPDATE of
// one event's payload, a DELETE of a middle event and a DELETE of a
// stream's newest event it exits 1 and names the stream and position each
// time.
func TestScribeCLIOnARunningBank(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/scribe")
	}
	pool, schema := pgSchema(t)
	url := pgtest.URL(t)
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "cli-node", Logger: testLogger(t), DatabaseURL: url, Schema: schema})
	require.Equal(t, http.StatusCreated, ts.request("POST", "/accounts", `{"id":"cli-a"}`).Status)
	require.Equal(t, http.StatusCreated, ts.request("POST", "/accounts", `{"id":"cli-b"}`).Status)
	require.Equal(t, http.StatusOK, ts.request("POST", "/accounts/cli-a/deposit", `{"amount":50}`).Status)
	require.Equal(t, http.StatusOK, ts.request("POST", "/transfers", `{"from":"cli-a","to":"cli-b","amount":20}`).Status)

	bin := filepath.Join(t.TempDir(), "scribe")
	build := exec.Command("go", "build", "-o", bin, "github.com/scribe-es/scribe/cmd/scribe")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/scribe: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tail := exec.CommandContext(ctx, bin, "-db", url, "-schema", schema, "tail")
	stdout, err := tail.StdoutPipe()
	require.NoError(t, err)
	stderr, err := tail.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, tail.Start())
	t.Cleanup(func() { _ = tail.Process.Kill(); _ = tail.Wait() })
	// Wait until tail follows the feed, then deposit through the bank.
	errLines := bufio.NewScanner(stderr)
	for errLines.Scan() && !strings.Contains(errLines.Text(), "following the feed") {
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	start := time.Now()
	require.Equal(t, http.StatusOK, ts.request("POST", "/accounts/cli-b/deposit", `{"amount":777}`).Status)
	var shown string
	for shown == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "tail ended")
			if strings.Contains(l, "MoneyDeposited") && strings.Contains(l, "777") {
				shown = l
			}
		case <-ctx.Done():
			t.Fatal("scribe tail did not show the bank's deposit")
		}
	}
	t.Logf("scribe tail showed the deposit %s after the bank acknowledged it: %s", time.Since(start), shown)
	require.Contains(t, shown, "account:cli-b")
	require.NoError(t, tail.Process.Signal(syscall.SIGINT))
	require.NoError(t, tail.Wait(), "tail ends with status 0 on SIGINT")

	rep, err := runLoad(ctx, loadConfig{URL: ts.url, Workers: 4, Duration: time.Second, Accounts: 6, Initial: 1000, MaxAmount: 50, Prefix: "lg"})
	require.NoError(t, err)
	if len(rep.Invariant.ReadModelMismatch) > 0 {
		explainReadModel(t, ts.srv.backend.Journal, rep.Invariant.ReadModelMismatch)
	}
	require.True(t, rep.InvariantOK, "loadgen invariants: %v", rep.Invariant.Problems)
	t.Logf("loadgen: %d transfers", rep.OK+rep.Rejected)

	verify := func() (string, int) {
		cmd := exec.CommandContext(ctx, bin, "-db", url, "-schema", schema, "verify")
		cmd.Env = append(os.Environ(), "SCRIBE_DATABASE_URL=")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		require.NoError(t, err, "scribe verify: %s", out)
		return string(out), 0
	}
	out1, code := verify()
	require.Zero(t, code, "scribe verify on the loadgen's schema: %s", out1)
	t.Logf("scribe verify: %s", out1)

	// Tamper with three accounts' streams, read through the journal.
	j, err := postgres.NewJournal(pool, postgres.Config{Schema: schema})
	require.NoError(t, err)
	defer j.Close()
	stream := func(id string) []journal.Record {
		var recs []journal.Record
		for r, err := range j.ReadStream(ctx, journal.Stream(bank.AccountTag(id)), 1, 0) {
			require.NoError(t, err)
			recs = append(recs, r)
		}
		require.GreaterOrEqual(t, len(recs), 3, "account %s has too few events for this test", id)
		return recs
	}
	exec1 := func(sql string, args ...any) {
		tag, err := pool.Exec(ctx, strings.ReplaceAll(sql, "__S__", pgx.Identifier{schema}.Sanitize()), args...)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected(), sql)
	}
	broken := func(out, id string, version uint64, pos journal.Position) {
		t.Helper()
		require.Contains(t, out, fmt.Sprintf("BROKEN default/%s at version %d, position %s: ", bank.AccountTag(id), version, pos), "verify names the stream and position:\n%s", out)
	}

	// An UPDATE of lg0's deposit (version 2, one tag) payload.
	lg0 := stream("lg0")
	exec1(`UPDATE __S__.events SET data = convert_to('{"accountId":"lg0","amount":999999}', 'UTF8') WHERE id = $1`, lg0[1].ID)
	out2, code := verify()
	require.Equal(t, 1, code, out2)
	broken(out2, "lg0", 2, lg0[1].Position)

	// A DELETE of lg1's deposit, a middle event: version 3 is read where 2 belongs.
	lg1 := stream("lg1")
	exec1(`DELETE FROM __S__.events WHERE id = $1`, lg1[1].ID)
	out3, code := verify()
	require.Equal(t, 1, code, out3)
	broken(out3, "lg1", 3, lg1[2].Position)

	// A DELETE of lg2's newest event (and its tag rows, as a careful
	// tamperer would): the stream's recorded head is no longer reached.
	lg2 := stream("lg2")
	newest := lg2[len(lg2)-1]
	exec1(`DELETE FROM __S__.events WHERE id = $1`, newest.ID)
	_, err = pool.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, "event_tags"}.Sanitize()+` WHERE commit_xid = $1 AND seq = $2`, int64(newest.Position.Commit), int64(newest.Position.Seq))
	require.NoError(t, err)
	out4, code := verify()
	require.Equal(t, 1, code, out4)
	broken(out4, "lg2", newest.Version(bank.AccountTag("lg2")), newest.Position)
}
