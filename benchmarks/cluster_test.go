package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// -cluster adds the cluster modes, in order, once.
func TestClusterFlagAddsTheClusterModes(t *testing.T) {
	t.Parallel()
	o, err := parseOptions([]string{"-mode", "actor,cluster-remote", "-cluster"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []string{modeActor, modeClusterRemote, modeClusterLocal}, o.Modes)
	o, err = parseOptions([]string{"-mode", "occ"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []string{modeOCC}, o.Modes, "the cluster modes run only when asked for")
}

// The cluster modes run two members in one process. protoactor-go's cluster
// has data races of its own and leaves gRPC goroutines behind (see
// runtime/clustertest), so the harness runs as a child process built by go
// run, without the race detector, and this test reads its -json output.
// The harness itself fails a cluster cell whose streams were not all hosted
// by the member it meant (see clusterMode.close).
func TestClusterModesInAChildProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harness: skipped with -short")
	}
	for _, sc := range []string{scenarioHot, scenarioTransfer} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "run", ".", "-scenario", sc, "-mode", "actor", "-cluster",
			"-writers", "4", "-duration", "600ms", "-runs", "1", "-warmup", "100ms", "-progress", "0", "-json")
		cmd.Env = os.Environ()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "%s: stderr:\n%s", sc, stderr.String())

		// stdout holds only JSON lines: nothing else writes to it.
		seen := map[string]jsonResult{}
		lines := bufio.NewScanner(&stdout)
		for lines.Scan() {
			var r jsonResult
			require.NoError(t, json.Unmarshal(lines.Bytes(), &r), "stdout line %q", lines.Text())
			seen[r.Mode] = r
		}
		require.Len(t, seen, 3, "%s: one result per mode", sc)
		for _, m := range []string{modeActor, modeClusterLocal, modeClusterRemote} {
			r, ok := seen[m]
			require.True(t, ok, "%s: mode %s missing", sc, m)
			require.Zero(t, r.Errors, "%s/%s: %s", sc, m, r.FirstError)
			require.Positive(t, r.Completed, "%s/%s: completed no command", sc, m)
			require.Equal(t, r.CommandsPerS, r.EventsPerS, "%s/%s: one event per command", sc, m)
		}
		require.True(t, strings.Contains(stderr.String(), "| cluster-remote"), "%s: the table lists cluster-remote:\n%s", sc, stderr.String())
	}
}
