package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// TestTwinNodeIDMessage: two live processes with one NodeID. The older one's
// error says so in one sentence, without the contradictory nested session
// sentinels, says how to choose IDs, and still matches the sentinels callers
// test (journal.ErrNodeSuperseded, runtime.ErrLeaseLost).
func TestTwinNodeIDMessage(t *testing.T) {
	t.Parallel()
	for name, newEnv := range map[string]func(*testing.T) *env{
		"Memory":   func(*testing.T) *env { return memoryEnv() },
		"Postgres": postgresEnv,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			older := e.start(t, func(c *runtime.Config) { c.NodeID = "twin-msg"; c.SessionTimeout = 2 * time.Second })
			target := counter("twin-msg")
			mustExec(t, older, target, Increment{By: 1})
			e.start(t, func(c *runtime.Config) { c.NodeID = "twin-msg"; c.SessionTimeout = 2 * time.Second })

			// The older's next command finds its stream's lease taken over
			// (before its renewal learns why: a retryable lease error), then
			// its renewal finds the node superseded: from then on every
			// error is the one message.
			_, err := older.Execute(ctx, target, Increment{By: 1})
			require.Error(t, err)
			require.True(t, runtime.IsRetryable(err), "%v", err)
			require.Eventually(t, func() bool { return errors.Is(older.Ready(), journal.ErrNodeSuperseded) }, 10*time.Second, 5*time.Millisecond)
			requireTwinError(t, older.Ready())
			_, err = older.Execute(ctx, target, Increment{By: 1})
			requireTwinError(t, err)
			_, err = older.Execute(ctx, counter("twin-msg-other"), Increment{By: 1})
			requireTwinError(t, err)
		})
	}
}

func requireTwinError(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, journal.ErrNodeSuperseded)
	require.ErrorIs(t, err, runtime.ErrLeaseLost)
	msg := err.Error()
	t.Log(msg)
	require.Contains(t, msg, `another live process opened node ID "twin-msg"`)
	require.Contains(t, msg, "pod name", "says how to choose node IDs")
	require.NotContains(t, msg, "session expired", "not a contradictory session sentinel")
	require.NotContains(t, msg, "invalid session")
}
