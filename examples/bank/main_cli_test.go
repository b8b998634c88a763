package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// lockedBuffer is a bytes.Buffer safe for concurrent writers and readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRunServerLifecycle runs the command as main does: it says it uses the
// in-memory journal, serves /healthz, and on cancellation (the signal)
// shuts down and returns exit code 0.
func TestRunServerLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- runServer(ctx, []string{"-addr", "127.0.0.1:0", "-node", "cli-test", "-log-level", "debug"}, noEnv, &bytes.Buffer{}, &stderr)
	}()
	var addr string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var e struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "bank listening" {
				addr = e.Addr
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
	require.Contains(t, stderr.String(), "using the in-memory journal")

	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	select {
	case c := <-code:
		require.Equal(t, 0, c)
	case <-time.After(30 * time.Second):
		t.Fatal("runServer did not return after cancellation")
	}
	logs := stderr.String()
	require.Contains(t, logs, `"msg":"request"`, "debug level logs each request")
	require.Contains(t, logs, `"msg":"stopped"`)
}

func TestRunServerFlagErrors(t *testing.T) {
	t.Parallel()
	badDB := func(k string) string {
		if k == "SCRIBE_DATABASE_URL" {
			return "postgres://%zz"
		}
		return ""
	}
	for _, tc := range []struct {
		args   []string
		getenv func(string) string
		code   int
		want   string
	}{
		{[]string{"-log-level", "loud"}, noEnv, 2, "-log-level"},
		{[]string{"extra"}, noEnv, 2, "unexpected argument"},
		{[]string{"-nope"}, noEnv, 2, "flag provided but not defined"},
		{[]string{"-node", "", "-addr", "127.0.0.1:0"}, noEnv, 1, "node ID is empty"},
		{[]string{"-addr", "256.0.0.1:99999", "-node", "x"}, noEnv, 1, "listen on"},
		{[]string{"-db", "postgres://%zz", "-node", "x"}, noEnv, 1, "database URL"},
		{[]string{"-node", "x"}, badDB, 1, "database URL"}, // SCRIBE_DATABASE_URL is read
		{[]string{"-h"}, noEnv, 0, "loadgen"},
	} {
		var stderr lockedBuffer
		code := runServer(context.Background(), tc.args, tc.getenv, &bytes.Buffer{}, &stderr)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, tc.args)
	}
}

// TestLoadgenCommand runs the loadgen subcommand against a real server.
func TestLoadgenCommand(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, "memory")
	var stdout, stderr lockedBuffer
	code := runLoadgen(context.Background(), []string{"-url", ts.url, "-workers", "4", "-duration", "1500ms", "-accounts", "5"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	out := stdout.String()
	require.Contains(t, out, "transfers:")
	require.Contains(t, out, "latency: p50")
	require.Contains(t, out, "invariants OK")
	require.Contains(t, stderr.String(), "loadgen:    1s")

	for _, args := range [][]string{{"-workers", "0"}, {"-accounts", "1"}, {"-url", "ftp://x"}, {"-duration", "-1s"}} {
		var errOut lockedBuffer
		require.Equal(t, 1, runLoadgen(context.Background(), args, &bytes.Buffer{}, &errOut), args)
		require.Contains(t, errOut.String(), "loadgen:")
	}
}

// TestGracefulShutdownFinishesInFlight shuts the server down while clients
// are sending deposits: no request that got an answer got a 5xx, and every
// deposit acknowledged before the shutdown is in the journal.
func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, "memory")
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"alice"}`), 201, "alice", 0, 1)
	mem := ts.srv.backend.Journal

	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked, answered, failed int
	started := make(chan struct{})
	var once sync.Once
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				req, _ := http.NewRequest("POST", ts.url+"/accounts/alice/deposit", strings.NewReader(`{"amount":1}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := ts.client.Do(req)
				if err != nil {
					return // the listener is closed
				}
				resp.Body.Close()
				mu.Lock()
				answered++
				if resp.StatusCode == http.StatusOK {
					acked++
				} else {
					failed++
				}
				mu.Unlock()
				if resp.StatusCode != http.StatusOK {
					return
				}
				once.Do(func() { close(started) })
			}
		}()
	}
	<-started
	// Stop the HTTP side as Shutdown does first (stop accepting, finish
	// in-flight requests), then read the journal before the runtime and the
	// in-memory backend close.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, ts.srv.http.Shutdown(ctx))
	wg.Wait()
	var stored int
	for rec, err := range mem.ReadStream(ctx, streamOf("alice"), 1, 0) {
		require.NoError(t, err)
		if rec.Type == "MoneyDeposited" {
			stored++
		}
	}
	require.Positive(t, acked)
	require.Zero(t, failed, "a request accepted before the shutdown is finished, not failed")
	require.Equal(t, acked, answered)
	require.Equal(t, acked, stored, "every acknowledged deposit is stored, and nothing else")
	ts.stop()
}
