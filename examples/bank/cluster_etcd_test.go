//go:build !nocluster

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// envEtcdEndpoints names the environment variable with the endpoints of an
// etcd the cluster tests use (comma-separated host:port); unset, they start
// their own from the etcd binary (Debian's etcd-server package).
const envEtcdEndpoints = "SCRIBE_TEST_ETCD_ENDPOINTS"

// etcdServer is the etcd a test's cluster members find each other through.
type etcdServer struct {
	endpoints string // comma-separated host:port
	hc        *http.Client
}

// startEtcd returns the etcd of $SCRIBE_TEST_ETCD_ENDPOINTS, or starts a
// single-member etcd on free ports in a temporary directory and stops it at
// cleanup. Without an etcd binary the test fails under
// SCRIBE_REQUIRE_POSTGRES=1 or CI=true and skips loudly otherwise.
func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	e := &etcdServer{hc: &http.Client{Timeout: 5 * time.Second}}
	t.Cleanup(e.hc.CloseIdleConnections)
	if eps := os.Getenv(envEtcdEndpoints); eps != "" {
		e.endpoints = eps
		return e
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		msg := "!!! no etcd binary (install Debian's etcd-server package, or set " + envEtcdEndpoints + "): this etcd cluster test did not run"
		if os.Getenv(pgtest.EnvRequire) == "1" || os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ports := clusterPorts(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	dir := t.TempDir()
	cmd := exec.Command(bin, "--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start(), "start %s", bin)
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	e.endpoints = strings.TrimPrefix(client, "http://")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var health struct{ Health string }
		resp, err := e.hc.Get(client + "/health")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&health)
			_ = resp.Body.Close()
			if err == nil && health.Health == "true" {
				return e
			}
		}
		select {
		case <-exited:
			t.Fatalf("etcd exited before serving:\n%s", out.String())
		case <-time.After(50 * time.Millisecond): // polling
		}
		require.True(t, time.Now().Before(deadline), "etcd did not answer /health within 30 s (%v):\n%s", err, out.String())
	}
}

// keys counts the keys under prefix (etcd's JSON gateway, /v3/kv/range).
func (e *etcdServer) keys(ctx context.Context, prefix string) (int, error) {
	end := []byte(prefix)
	end[len(end)-1]++
	body, _ := json.Marshal(map[string]any{
		"key":        base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end":  base64.StdEncoding.EncodeToString(end),
		"count_only": true,
	})
	ep := strings.Split(e.endpoints, ",")[0]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ep+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct{ Count string }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, fmt.Errorf("etcd range %s: %w", prefix, err)
	}
	if r.Count == "" {
		return 0, nil
	}
	return strconv.Atoi(r.Count)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
