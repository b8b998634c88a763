package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

type noisy struct{ calls *int }

func (n noisy) String() string { *n.calls++; return "formatted" }

// TestErrorOnlyNeverFormatsValues: protoactor-go's records keep their
// message and errors, but an arbitrary value is logged as its type, never
// formatted (formatting a message protoactor mutates meanwhile is a race).
func TestErrorOnlyNeverFormatsValues(t *testing.T) {
	var buf bytes.Buffer
	calls := 0
	l := slog.New(errorOnly{slog.NewTextHandler(&buf, nil)})
	l.Info("dropped", "v", noisy{&calls})
	l.With("w", noisy{&calls}).Error("failed to send", "msg", noisy{&calls}, "err", errors.New("boom"), slog.Group("g", "x", noisy{&calls}))
	require.Zero(t, calls, "no value was formatted")
	out := buf.String()
	require.NotContains(t, out, "dropped")
	require.Contains(t, out, `msg="failed to send"`)
	require.Contains(t, out, "err=boom")
	require.Contains(t, out, "cluster.noisy")
	require.NotContains(t, out, "formatted")
}
