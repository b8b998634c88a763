package backend_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
)

func TestSameContent(t *testing.T) {
	t.Parallel()
	e := journal.Event{ID: journal.NewEventID(), Type: "AccountOpened", Tags: []journal.Tag{"account:42"}, Data: json.RawMessage(`{"owner":"ada"}`)}
	e.Metadata.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prep := func(e journal.Event) journal.Event {
		out, _, err := journal.PrepareAppend([]journal.Event{e}, journal.AppendOptions{}, journal.Limits{})
		require.NoError(t, err)
		return out[0]
	}
	a := prep(e)
	spaced := e
	spaced.Data = json.RawMessage(`{ "owner" : "ada" }`)
	b := prep(spaced)
	require.True(t, backend.SameContent(&a, &b))

	for name, mut := range map[string]func(*journal.Event){
		"type":     func(e *journal.Event) { e.Type = "Other" },
		"schema":   func(e *journal.Event) { e.SchemaVersion = 3 },
		"tags":     func(e *journal.Event) { e.Tags = []journal.Tag{"account:43"} },
		"data":     func(e *journal.Event) { e.Data = json.RawMessage(`{"owner":"bob"}`) },
		"user":     func(e *journal.Event) { e.Metadata.UserID = "u" },
		"created":  func(e *journal.Event) { e.Metadata.CreatedAt = e.Metadata.CreatedAt.Add(time.Microsecond) },
		"scopes":   func(e *journal.Event) { e.Metadata.Scopes = []string{"s"} },
		"tenant":   func(e *journal.Event) { e.Metadata.Partition = "t" },
		"traceCtx": func(e *journal.Event) { e.Metadata.TraceParent = "00-x" },
	} {
		c := e
		mut(&c)
		d := prep(c)
		require.False(t, backend.SameContent(&a, &d), name)
	}
}
