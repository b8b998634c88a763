package main

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// slowMode's commands wait until release is closed, whatever their ctx says
// (they fail with ctx's error if it ends first): a machine slower than the
// whole measurement.
type slowMode struct {
	release chan struct{}
	calls   atomic.Int64
}

func (m *slowMode) newWorker(int) worker        { return m }
func (m *slowMode) close(context.Context) error { return nil }
func (m *slowMode) do(ctx context.Context, _ target) (outcome, error) {
	m.calls.Add(1)
	select {
	case <-m.release:
		return outcome{Commands: 1, Events: 1}, nil
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
}

// TestEveryWriterCompletesACommandOnASlowMachine holds every command until
// the window has closed: the first command of each writer is not cut off by
// the window's end, so each writer completes one (outside the window: no
// command is counted in it), and the cell ends right after.
func TestEveryWriterCompletesACommandOnASlowMachine(t *testing.T) {
	t.Parallel()
	m := &slowMode{release: make(chan struct{})}
	const writers, window = 3, 20 * time.Millisecond
	done := make(chan cellResult)
	go func() {
		done <- measure(context.Background(), cell{Scenario: scenarioHot, Mode: modeActor, Writers: writers, Streams: 1, Run: 1},
			m, 0, window, 0, io.Discard)
	}()
	time.Sleep(window + 30*time.Millisecond) // at least this long: the window has closed
	close(m.release)
	res := <-done
	require.EqualValues(t, writers, res.Completed, "every writer completes its first command, late")
	require.Zero(t, res.Commands, "a command that ended after the window is not in it")
	require.Zero(t, res.Errors)
	require.EqualValues(t, writers, m.calls.Load(), "one attempt per writer, none after its late first")
}
