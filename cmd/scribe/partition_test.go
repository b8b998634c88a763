package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// moveArgs are the arguments of `scribe partition move` of partition from
// a to b.
func moveArgs(a, b *fixture, partition string, extra ...string) []string {
	return append([]string{"partition", "move", "-from", a.url, "-from-schema", a.schema, "-to", b.url, "-to-schema", b.schema,
		"-partition", partition}, extra...)
}

// cancelOn is a diagnostics writer that cancels a context once it has
// seen a text.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	text   string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.text) {
		c.cancel()
	}
	return n, err
}

func (c *cancelOn) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// requireRefusal checks a run that a refusal ended: exit status 1, the
// texts in its diagnostics, and no advice to run it again as it is.
func requireRefusal(t *testing.T, res result, texts ...string) {
	t.Helper()
	require.Equal(t, exitFailure, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	for _, s := range texts {
		require.Contains(t, res.stderr, s)
	}
	require.Contains(t, res.stderr, "postgres: partition move refused")
	require.NotContains(t, res.stderr, "passing fault")
	require.NotContains(t, res.stderr, "run the same command again")
}

// TestPartitionMoveCLIRefusesAMissingPartition: moving a partition the
// source does not hold exits 1 with or without -confirm, says which
// partition has no events or streams and that nothing was written, never
// advises running it again, and writes nothing on either database.
func TestPartitionMoveCLIRefusesAMissingPartition(t *testing.T) {
	t.Parallel()
	a, b := setup(t, true), setup(t, true)
	a.fillBank(t)
	for _, extra := range [][]string{nil, {"-confirm"}} {
		res := a.scribe(t, moveArgs(a, b, "nosuch", extra...)...)
		requireRefusal(t, res, `partition "nosuch" has no events or streams on the source`, "nothing was written on either database")
		require.Empty(t, res.stdout)
	}
	for _, f := range []*fixture{a, b} {
		for _, table := range []string{"partition_fences", "partition_moves", "partition_move_history"} {
			require.Zero(t, f.exec(t, `SELECT 1 FROM __S__.`+table), table)
		}
	}
}

// TestPartitionMoveCLIStopsResumesAndMovesBack: a move stopped by a passing
// fault (its context ends right after the fence) exits 1 saying that
// running the same command again continues it from the copy; run again it
// completes as a resumed move; run once more it is refused (exit 1) naming
// where the partition went, with no advice to run it again; then the
// partition moves back and there again, each a new move of every event.
func TestPartitionMoveCLIStopsResumesAndMovesBack(t *testing.T) {
	t.Parallel()
	a, b := setup(t, true), setup(t, true)
	events := len(a.fillBank(t))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out bytes.Buffer
	diag := &cancelOn{text: "fence: done", cancel: cancel}
	args := append([]string{"-db", a.url, "-schema", a.schema}, moveArgs(a, b, "default", "-to-name", "b", "-batch", "4", "-confirm")...)
	code := runWith(ctx, args, &out, diag, func(string) string { return "" })
	require.Equal(t, exitFailure, code, "stdout: %s\nstderr: %s", out.String(), diag.String())
	require.Contains(t, diag.String(), "context canceled")
	require.Contains(t, diag.String(), "a passing fault stopped the move: run the same move again (same partition, source and target) and it continues from step copy")
	require.NotContains(t, diag.String(), "refused")

	res := a.scribe(t, moveArgs(a, b, "default", "-to-name", "b")...)
	require.Zero(t, res.code, res.stderr)
	require.Contains(t, res.stdout, `the target records an unfinished move of it from this source, stopped at step "copy": -confirm resumes it there`)
	res = a.scribe(t, moveArgs(a, b, "default", "-to-name", "b", "-confirm")...)
	require.Zero(t, res.code, res.stderr)
	require.Contains(t, res.stdout, `moved partition "default" (resumed): `)
	require.Contains(t, res.stderr, "retire: done")

	res = a.scribe(t, moveArgs(a, b, "default", "-to-name", "b", "-confirm")...)
	requireRefusal(t, res, `partition "default" was moved away from the source to b`, "nothing was written on either database")

	for _, m := range [][2]*fixture{{b, a}, {a, b}} {
		name := "a"
		if m[1] == b {
			name = "b"
		}
		res = a.scribe(t, moveArgs(m[0], m[1], "default", "-to-name", name, "-confirm")...)
		require.Zero(t, res.code, res.stderr)
		require.NotContains(t, res.stdout, "(resumed)")
		require.Contains(t, res.stdout, `moved partition "default": `)
		require.Equal(t, int64(events), m[1].exec(t, `SELECT 1 FROM __S__.events WHERE partition = 'default'`))
		require.Zero(t, m[0].exec(t, `SELECT 1 FROM __S__.events WHERE partition = 'default'`))
	}
	res = b.scribe(t, "verify")
	require.Zero(t, res.code, res.stdout+res.stderr)
}
