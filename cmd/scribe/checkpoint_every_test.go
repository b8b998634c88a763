package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
)

// startEvery starts `scribe checkpoint -every 1s -json` as a process of
// its own and returns it with readers of its stdout and stderr lines (read
// both to their end before exitCode).
func startEvery(t *testing.T, bin string, s *signed, out string) (*exec.Cmd, *bufio.Scanner, *bufio.Scanner) {
	t.Helper()
	// A watchdog: a process that stops answering is killed, which ends its
	// pipes, so the test fails with its output instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, "-db", s.url, "-schema", s.schema, "checkpoint", "-key", s.key, "-out", out, "-every", "1s", "-json")
	cmd.Env = append(os.Environ(), "SCRIBE_DATABASE_URL=")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	return cmd, bufio.NewScanner(stdout), bufio.NewScanner(stderr)
}

// rest returns the lines left in sc, joined.
func rest(sc *bufio.Scanner) string {
	var b strings.Builder
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// exitCode waits for cmd and returns its exit status.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// TestCheckpointEvery runs `scribe checkpoint -every 1s` as a process: it
// writes a checkpoint at once and then one per interval, each covering the
// events appended before it (the second counts the event appended after
// the first); SIGTERM stops it with exit status 0 after a line saying how
// many it wrote, every file it named is in the directory and verifies with
// `scribe verify -checkpoints`. Pointed at a directory that cannot be
// created, it logs each failed attempt, keeps running, and SIGINT stops it
// with exit status 1.
func TestCheckpointEvery(t *testing.T) {
	t.Parallel()
	s := setupSigned(t)
	s.fillBank(t)
	bin := buildScribe(t)

	cmd, lines, errLines := startEvery(t, bin, s, s.dir)
	type written struct {
		File       string `json:"file"`
		Checkpoint struct {
			Events uint64 `json:"events"`
		} `json:"checkpoint"`
	}
	next := func() written {
		if !lines.Scan() {
			_ = cmd.Process.Kill()
			t.Fatalf("scribe checkpoint -every printed no checkpoint: %v\nstderr:\n%s", lines.Err(), rest(errLines))
		}
		var w written
		require.NoError(t, json.Unmarshal(lines.Bytes(), &w), lines.Text())
		return w
	}
	first := next()
	_, err := s.journal.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1,
		Tags: []journal.Tag{"account:every"}, Data: json.RawMessage(`{"accountId":"every","amount":1}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	second := next()
	require.Equal(t, first.Checkpoint.Events+1, second.Checkpoint.Events, "the second checkpoint covers the event appended after the first")
	files := []string{first.File, second.File}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for lines.Scan() { // checkpoints finished before the signal
		var w written
		require.NoError(t, json.Unmarshal(lines.Bytes(), &w), lines.Text())
		files = append(files, w.File)
	}
	stderr := rest(errLines)
	require.Equal(t, 0, exitCode(t, cmd), stderr)
	require.Contains(t, stderr, "every 1s")
	require.Regexp(t, `stopped: \d+ checkpoint\(s\) written, 0 attempt\(s\) failed`, stderr)
	listed, err := evidence.ListDir(s.dir)
	require.NoError(t, err)
	require.ElementsMatch(t, files, listed)
	res := s.verifyCheckpoints(t)
	require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)

	// A directory that cannot be made (its parent is a file): every
	// attempt fails and is logged, the loop goes on until stopped, and
	// the exit status says it failed.
	parent := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(parent, nil, 0o644))
	cmd, lines, errLines = startEvery(t, bin, s, filepath.Join(parent, "checkpoints"))
	var seen []string
	for failures := 0; failures < 2; {
		require.True(t, errLines.Scan(), "scribe checkpoint -every ended early: %v\n%s", errLines.Err(), strings.Join(seen, "\n"))
		seen = append(seen, errLines.Text())
		if strings.Contains(errLines.Text(), "trying again in 1s") {
			require.Contains(t, errLines.Text(), "not stored")
			failures++
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.Empty(t, rest(lines), "nothing was written")
	stderr = rest(errLines)
	require.Equal(t, exitFailure, exitCode(t, cmd), stderr)
	require.Regexp(t, `stopped: 0 checkpoint\(s\) written, [2-9]\d* attempt\(s\) failed`, stderr)
}
