package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// process is the bank binary running as a child process.
type process struct {
	cmd    *exec.Cmd
	addr   string
	mu     sync.Mutex
	logs   strings.Builder
	exited chan struct{}
	err    error
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// buildBinary compiles the bank into a temporary directory, with the race
// detector when the tests have it (so the build reuses their compiled
// packages instead of compiling every dependency again).
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bank")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	start := time.Now()
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	t.Logf("go %s took %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// logTail is how many of a process's last log lines a failed test shows.
const logTail = 150

// startProcess runs the binary with args and waits for its "bank listening"
// log line, which names the bound address.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "SCRIBE_DATABASE_URL=", "OTEL_EXPORTER_OTLP_ENDPOINT=")
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	p.cmd.Stdout = io.Discard
	require.NoError(t, p.cmd.Start())
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			var entry struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "bank listening" {
				addr <- entry.Addr
			}
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			// What the process said last is often why the test failed.
			lines := strings.Split(strings.TrimRight(p.log(), "\n"), "\n")
			t.Logf("the last %d log lines of %s %s:\n%s", min(len(lines), logTail), filepath.Base(bin), strings.Join(args, " "),
				strings.Join(lines[max(0, len(lines)-logTail):], "\n"))
		}
	})
	select {
	case p.addr = <-addr:
	case <-p.exited:
		t.Fatalf("the bank exited before listening (%v):\n%s", p.err, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("the bank did not start listening within 30 s:\n%s", p.log())
	}
	return p
}

// TestPostgresCrashRestart builds the binary, runs it on a fresh Postgres
// schema under transfer load, kills it with SIGKILL, restarts it with the
// same node ID and checks that it serves again within 5 s and that every
// acknowledged operation is reflected (and money is conserved). It ends with
// a SIGTERM: a graceful shutdown exits 0.
func TestPostgresCrashRestart(t *testing.T) {
	t.Parallel()
	_, schema := pgSchema(t)
	dbURL := pgtest.URL(t)
	bin := buildBinary(t)
	args := []string{"-addr", "127.0.0.1:0", "-db", dbURL, "-schema", schema, "-node", "crash-node"}
	p1 := startProcess(t, bin, args...)
	require.Contains(t, p1.log(), "postgres schema migrated")

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	c1 := &loadClient{base: "http://" + p1.addr, http: client}
	const accounts, initial = 12, 10_000
	ids := make([]string, accounts)
	for i := range ids {
		ids[i] = fmt.Sprintf("acct-%d", i)
		_, err := c1.post(ctx, "/accounts", map[string]any{"id": ids[i]}, http.StatusCreated)
		require.NoError(t, err)
		_, err = c1.post(ctx, "/accounts/"+ids[i]+"/deposit", map[string]any{"amount": initial}, http.StatusOK)
		require.NoError(t, err)
	}

	// Load: 16 clients make transfers; every 200 is remembered.
	var mu sync.Mutex
	acked := map[string]string{} // transfer ID -> from account
	var ackCount atomic.Int64
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(w), 7))
			for loadCtx.Err() == nil {
				from, to := rng.IntN(accounts), rng.IntN(accounts-1)
				if to >= from {
					to++
				}
				res, err := c1.postKey(loadCtx, "/transfers", randomHex(8), map[string]any{"from": ids[from], "to": ids[to], "amount": rng.IntN(500) + 1})
				if err != nil {
					return // the process is gone
				}
				if res.status == http.StatusOK {
					var tv TransferView
					if json.Unmarshal(res.body, &tv) == nil {
						mu.Lock()
						acked[tv.ID] = tv.From.ID
						mu.Unlock()
						ackCount.Add(1)
					}
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return ackCount.Load() >= 200 }, 30*time.Second, 5*time.Millisecond, "the load makes progress")
	require.NoError(t, p1.cmd.Process.Signal(syscall.SIGKILL))
	<-p1.exited
	wg.Wait()
	stopLoad()

	restart := time.Now()
	p2 := startProcess(t, bin, args...)
	c2 := &loadClient{base: "http://" + p2.addr, http: client}
	served := 0
	require.Eventually(t, func() bool {
		for served < len(ids) {
			var a AccountView
			if c2.get(ctx, "/accounts/"+ids[served], &a) != nil {
				return false
			}
			served++
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "every account served again within 5 s of the restart")
	took := time.Since(restart)
	require.Less(t, took, 5*time.Second, "serving the same accounts again after a crash")
	t.Logf("after SIGKILL under load (%d transfers acknowledged), the restarted bank served all %d accounts %s after it was started", ackCount.Load(), len(ids), took.Round(time.Millisecond))

	inv, err := checkInvariants(ctx, c2, ids, accounts*initial)
	require.NoError(t, err)
	require.Empty(t, inv.Problems)
	stored := map[string]bool{}
	for _, id := range ids {
		events, err := c2.allEvents(ctx, id)
		require.NoError(t, err)
		for _, ev := range events {
			var data struct{ TransferID string }
			require.NoError(t, json.Unmarshal(ev.Data, &data))
			if data.TransferID != "" {
				stored[data.TransferID] = true
			}
		}
	}
	mu.Lock()
	for id, from := range acked {
		require.True(t, stored[id], "transfer %s from %s was acknowledged with 200 but is not stored", id, from)
	}
	mu.Unlock()

	// A graceful shutdown exits 0.
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p2.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit within 30 s of SIGTERM:\n%s", p2.log())
	}
	var exitErr *exec.ExitError
	if errors.As(p2.err, &exitErr) {
		t.Fatalf("exit after SIGTERM: %v\n%s", p2.err, p2.log())
	}
	require.NoError(t, p2.err)
	require.Contains(t, p2.log(), `"msg":"stopped"`)
}
