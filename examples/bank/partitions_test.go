package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
)

// buildScribe builds cmd/scribe into the test's temporary directory.
func buildScribe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scribe")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/scribe-es/scribe/cmd/scribe").CombinedOutput()
	require.NoError(t, err, "go build ./cmd/scribe: %s", out)
	return bin
}

// runScribe runs the scribe binary and returns its output and exit code.
func runScribe(t *testing.T, ctx context.Context, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "SCRIBE_DATABASE_URL=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err, "scribe %v: %s", args, out)
	return string(out), 0
}

// countEvents counts the events of partition in schema on the database at url.
func countEvents(t *testing.T, ctx context.Context, url, schema, partition string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "events"}.Sanitize()+` WHERE partition = $1`, partition).Scan(&n))
	return n
}

// TestPartitionMoveBankOnTwoServers runs the bank with two partitions on two
// Postgres servers (-db and -db2, the second a throwaway server): the
// loadgen drives transfers in both partitions at once and every invariant
// holds (balances equal the acknowledged operations, the per-database read
// models agree with the accounts); each partition's events are on its own
// server only; a transfer across the partitions is refused with 400; and
// `scribe verify` exits 0 on both servers.
func TestPartitionMoveBankOnTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second Postgres server and builds cmd/scribe")
	}
	_, schema := pgSchema(t)
	url1 := pgtest.URL(t)
	url2 := throwawaypg.Start(t).URL()
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "two-db-node", Logger: testLogger(t),
		DatabaseURL: url1, Schema: schema, SecondDatabaseURL: url2, SecondPartition: "east"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	reports := make([]*loadReport, 2)
	errs := make([]error, 2)
	for i, prefix := range []string{"west-lg", "east-lg"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = runLoad(ctx, loadConfig{URL: ts.url, Workers: 4, Duration: time.Second, Accounts: 6, Initial: 1000, MaxAmount: 50, Prefix: prefix})
		}()
	}
	wg.Wait()
	for i, rep := range reports {
		require.NoError(t, errs[i])
		require.True(t, rep.InvariantOK, "loadgen invariants (%d): %v", i, rep.Invariant.Problems)
		require.Positive(t, rep.OK, "transfers were acknowledged")
	}
	t.Logf("transfers: %d in the default partition, %d in east", reports[0].OK+reports[0].Rejected, reports[1].OK+reports[1].Rejected)

	// Each partition's events are on its own server only.
	require.Positive(t, countEvents(t, ctx, url1, schema, "default"))
	require.Zero(t, countEvents(t, ctx, url1, schema, "east"))
	require.Positive(t, countEvents(t, ctx, url2, schema, "east"))
	require.Zero(t, countEvents(t, ctx, url2, schema, "default"))

	r := ts.request("POST", "/transfers", `{"from":"west-lg0","to":"east-lg0","amount":1}`)
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), "within one partition")

	bin := buildScribe(t)
	for _, url := range []string{url1, url2} {
		out, code := runScribe(t, ctx, bin, "-db", url, "-schema", schema, "verify")
		require.Zero(t, code, "scribe verify on %s: %s", url, out)
		t.Logf("scribe verify %s: %s", url, out)
	}
}

// lineSignal is an io.Writer that signals once on its first write.
type lineSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (l *lineSignal) Write(p []byte) (int, error) {
	l.once.Do(func() { close(l.ch) })
	return len(p), nil
}

// TestPartitionMoveBankUnderLoad moves the bank's partition "east" from the
// second server to the first with `scribe partition move` while the loadgen
// drives transfers in both partitions: transfers to east get retryable 503s
// during the cut-over and are retried with their Idempotency-Keys until
// each has a definite answer (none may fail); afterwards
// every loadgen invariant holds in both partitions (money conserved, every
// balance the fold of its events, the read models agree), the bank finds
// east on the first server by itself, the second server holds nothing of it,
// and `scribe verify` exits 0 on both servers.
func TestPartitionMoveBankUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second Postgres server and builds cmd/scribe")
	}
	_, schema := pgSchema(t)
	url1 := pgtest.URL(t)
	url2 := throwawaypg.Start(t).URL()
	bin := buildScribe(t)
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "move-node", Logger: testLogger(t),
		DatabaseURL: url1, Schema: schema, SecondDatabaseURL: url2, SecondPartition: "east"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	reports := make([]*loadReport, 2)
	errs := make([]error, 2)
	running := &lineSignal{ch: make(chan struct{})}
	for i, prefix := range []string{"west-mv", "east-mv"} {
		cfg := loadConfig{URL: ts.url, Workers: 4, Duration: 4 * time.Second, Accounts: 6, Initial: 1000, MaxAmount: 50, Prefix: prefix}
		if i == 1 {
			cfg.Progress = running // its first line: east's transfers are running
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = runLoad(ctx, cfg)
		}()
	}
	select {
	case <-running.ch:
	case <-ctx.Done():
		t.Fatal("the loadgen never started its transfers")
	}
	out, code := runScribe(t, ctx, bin, "partition", "move", "-from", url2, "-to", url1, "-schema", schema, "-partition", "east")
	require.Zero(t, code, "scribe partition move without -confirm: %s", out)
	require.Contains(t, out, "-confirm would copy it")
	out, code = runScribe(t, ctx, bin, "partition", "move", "-from", url2, "-to", url1, "-schema", schema, "-partition", "east", "-to-name", "db", "-batch", "100", "-confirm")
	require.Zero(t, code, "scribe partition move: %s", out)
	t.Logf("scribe partition move: %s", out)
	require.Contains(t, out, "precopy: ")
	require.Contains(t, out, "retire: done")
	wg.Wait()
	for i, rep := range reports {
		require.NoError(t, errs[i])
		require.True(t, rep.InvariantOK, "loadgen invariants (%d): %v", i, rep.Invariant.Problems)
		require.Positive(t, rep.OK)
		t.Logf("loadgen %d: %d ok, %d insufficient funds, %d failed, %d retries", i, rep.OK, rep.Rejected, rep.Failed, rep.Retries)
	}
	// Every transfer got a definite answer (the loadgen repeats a 503 with
	// its Idempotency-Key, as Retry-After says, for up to 30 s): none may
	// end undecided. Every acknowledged transfer of east is stored once (on
	// the first server now), and nothing else is.
	var transfers, distinct int
	conn, err := pgx.Connect(ctx, url1)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT convert_from(data, 'UTF8')::jsonb->>'transferId') FROM `+
		pgx.Identifier{schema, "events"}.Sanitize()+` WHERE partition = 'east' AND type = 'MoneyTransferred'`).Scan(&transfers, &distinct))
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, transfers, distinct, "no transfer is stored twice")
	for i, rep := range reports {
		require.Zero(t, rep.Failed, "loadgen %d: transfers left without a definite answer", i)
	}
	east := reports[1]
	require.Equal(t, east.OK, int64(transfers), "east's stored transfers are exactly the acknowledged ones")

	member, err := ts.srv.backend.router.MemberOf("east")
	require.NoError(t, err)
	require.Equal(t, "db", member, "the bank found east on the first server")
	require.Positive(t, countEvents(t, ctx, url1, schema, "east"))
	require.Zero(t, countEvents(t, ctx, url2, schema, "east"))
	for _, url := range []string{url1, url2} {
		out, code := runScribe(t, ctx, bin, "-db", url, "-schema", schema, "verify")
		require.Zero(t, code, "scribe verify on %s: %s", url, out)
		t.Logf("scribe verify %s: %s", url, out)
	}
}
