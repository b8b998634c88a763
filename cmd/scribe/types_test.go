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

type typesTestOpened struct {
	ID string `json:"id"`
}

type typesTestDeposited struct {
	Amount int `json:"amount"`
}

// scribe types shows each type's versions with their counts, the recorded
// schemas and which recorded builds read each version.
func TestTypesVersions(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	at := func(typ string, v int, tag journal.Tag) {
		ev := journal.Event{ID: journal.NewEventID(), Type: typ, SchemaVersion: v, Tags: []journal.Tag{tag}, Data: json.RawMessage(`{}`)}
		_, err := f.journal.Append(ctx, []journal.Event{ev}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	at("Opened", 1, "acct:1")
	at("Opened", 1, "acct:2")
	at("Deposited", 1, "acct:1")
	at("Deposited", 2, "acct:1")
	at("Deposited", 2, "acct:2")
	at("Deposited", 2, "acct:2")

	res := f.scribe(t, "types")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^Deposited\s+1\s+1\s+-\s+no build recorded$`, res.stdout)
	require.Regexp(t, `(?m)^Deposited\s+2\s+3\s+-\s+no build recorded$`, res.stdout)

	// A build writing Deposited v2 and reading v1 through an upcaster.
	rt, err := runtime.New(ctx, runtime.Config{Journal: f.journal, NodeID: "types-node"})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	runtime.MustRegisterEvent[typesTestOpened](rt, "Opened", 1)
	runtime.MustRegisterEvent[typesTestDeposited](rt, "Deposited", 2, runtime.WithSchema(json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","minimum":0}}}`)))
	runtime.MustRegisterUpcaster(rt, "Deposited", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
	require.NoError(t, rt.Start(ctx))

	res = f.scribe(t, "types")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "2 event types, 6 events")
	require.Regexp(t, `(?m)^Deposited\s+1\s+1\s+-\s+1 of 1 builds$`, res.stdout)
	require.Regexp(t, `(?m)^Deposited\s+2\s+3\s+[0-9a-f]{8}\s+1 of 1 builds$`, res.stdout)
	require.Regexp(t, `(?m)^Opened\s+1\s+2\s+[0-9a-f]{8}\s+1 of 1 builds$`, res.stdout)
	require.Regexp(t, `(?m)^`+rt.BuildID()+`\s+types-node\s+`, res.stdout)

	res = f.scribe(t, "types", "-type", "Deposited")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "Deposited v1: 1 events, read by 1 of 1 builds\n  no schema recorded")
	require.Contains(t, res.stdout, "Deposited v2: 3 events, read by 1 of 1 builds")
	require.Contains(t, res.stdout, `"minimum": 0`)

	res = f.scribe(t, "-json", "types")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 2)
	require.Equal(t, "Deposited", rows[0]["type"])
	versions := rows[0]["versions"].([]any)
	require.Len(t, versions, 2)
	v2 := versions[1].(map[string]any)
	require.EqualValues(t, 2, v2["version"])
	require.EqualValues(t, 3, v2["events"])
	require.Equal(t, []any{rt.BuildID()}, v2["readBy"])
	require.NotNil(t, v2["schema"])

	res = f.scribe(t, "types", "-type", "Nope")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, `no event type "Nope"`)
}
