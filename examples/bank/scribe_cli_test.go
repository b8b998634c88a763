package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// TestScribeCLIOnARunningBank builds the operator's command line and points
// it at a running bank on Postgres: `scribe tail` prints a deposit made
// through the bank's API (the delay is logged: a NOTIFY wake-up, well under
// a second on an idle machine), and `scribe verify` finds every chain of
// the bank's schema intact.
func TestScribeCLIOnARunningBank(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/scribe")
	}
	_, schema := pgtest.Pool(t)
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

	verify := exec.CommandContext(ctx, bin, "-db", url, "-schema", schema, "verify")
	verify.Env = append(os.Environ(), "SCRIBE_DATABASE_URL=")
	out, err = verify.CombinedOutput()
	require.NoError(t, err, "scribe verify on the bank's schema: %s", out)
	t.Logf("scribe verify: %s", out)
}
