package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// scribe upcast check fails, naming type, version and first event, on a
// stored version the recorded build does not read, and passes for a build
// with the upcaster.
func TestUpcastCheckVerb(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	res := f.scribe(t, "upcast", "check")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "no build is recorded")

	var firstV1 string
	for i, v := range []int{2, 1, 1} {
		ev := journal.Event{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: v, Tags: []journal.Tag{"acct:1"}, Data: json.RawMessage(`{}`)}
		_, err := f.journal.Append(ctx, []journal.Event{ev}, journal.AppendOptions{})
		require.NoError(t, err)
		if i == 1 {
			firstV1 = ev.ID.String()
		}
	}
	build := func(node string, upcastV1 bool) string {
		rt, err := runtime.New(ctx, runtime.Config{Journal: f.journal, NodeID: node, TolerateUnreadableTypes: true})
		require.NoError(t, err)
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = rt.Shutdown(ctx)
		}()
		runtime.MustRegisterEvent[typesTestDeposited](rt, "Deposited", 2)
		if upcastV1 {
			runtime.MustRegisterUpcaster(rt, "Deposited", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
		}
		require.NoError(t, rt.Start(ctx))
		return rt.BuildID()
	}
	old := build("node-old", false)
	res = f.scribe(t, "upcast", "check")
	require.Equal(t, exitFailure, res.code, res.stderr)
	require.Regexp(t, `(?m)^Deposited\s+1\s+2\s+NO\s+`+firstV1+`$`, res.stdout)
	require.Regexp(t, `(?m)^Deposited\s+2\s+1\s+yes\s*$`, res.stdout)
	require.Contains(t, res.stdout, "build "+old)

	fixed := build("node-new", true)
	res = f.scribe(t, "upcast", "check")
	require.Equal(t, exitOK, res.code, res.stdout+res.stderr)
	require.Contains(t, res.stdout, "build "+fixed)
	require.Contains(t, res.stdout, "reads every stored type version")
	res = f.scribe(t, "upcast", "check", "-build", old)
	require.Equal(t, exitFailure, res.code)
	res = f.scribe(t, "-json", "upcast", "check", "-build", fixed)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Len(t, jsonLines(t, res.stdout), 2)
	res = f.scribe(t, "upcast", "check", "-build", "nope")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, `no build "nope"`)
}
