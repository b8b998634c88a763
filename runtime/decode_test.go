package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// TestTypedReads: records read straight from the journal decode into the
// registered Go values, upcast from the schema version they were stored
// with; unknown types, newer versions and the wrong Go type are errors that
// name the record; Decoding yields every record of a read with its value.
func TestTypedReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := memoryEnv()
	stream := journal.Stream("ledger:typed")
	// Stored as version 1 ({"value": n}) by an older deployment, and one
	// event of a type this deployment does not know.
	v1 := journal.Event{ID: journal.NewEventID(), Type: "Renamed", SchemaVersion: 1, Tags: []journal.Tag{stream.Tag}, Data: json.RawMessage(`{"value":5}`)}
	inc := journal.Event{ID: journal.NewEventID(), Type: "Incremented", SchemaVersion: 1, Tags: []journal.Tag{stream.Tag}, Data: json.RawMessage(`{"by":2}`)}
	gone := journal.Event{ID: journal.NewEventID(), Type: "Retired", SchemaVersion: 1, Tags: []journal.Tag{stream.Tag}, Data: json.RawMessage(`{}`)}
	future := journal.Event{ID: journal.NewEventID(), Type: "Incremented", SchemaVersion: 3, Tags: []journal.Tag{stream.Tag}, Data: json.RawMessage(`{"by":9}`)}
	_, err := e.j.Append(ctx, []journal.Event{v1, inc, gone, future}, journal.AppendOptions{})
	require.NoError(t, err)

	rt := e.start(t)
	require.NoError(t, runtime.RegisterEvent[Renamed](rt, "Renamed", 2))
	require.NoError(t, runtime.RegisterUpcaster(rt, "Renamed", 1, func(d json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(strings.Replace(string(d), `"value"`, `"amount"`, 1)), nil
	}))

	var got []runtime.Decoded
	var errs []error
	for d, err := range rt.Decoding(e.j.ReadStream(ctx, stream, 1, 0)) {
		got = append(got, d)
		errs = append(errs, err)
	}
	require.Len(t, got, 4)
	require.NoError(t, errs[0])
	require.Equal(t, Renamed{Amount: 5}, got[0].Value, "version 1 was upcast")
	require.Equal(t, uint64(1), got[0].Record.Version(stream.Tag))
	require.NoError(t, errs[1])
	require.Equal(t, Incremented{By: 2}, got[1].Value)
	require.ErrorIs(t, errs[2], runtime.ErrUnknownEvent)
	require.ErrorContains(t, errs[2], `"Retired"`)
	require.Nil(t, got[2].Value)
	require.Equal(t, gone.ID, got[2].Record.ID, "the record is still given with its error")
	require.ErrorContains(t, errs[3], "schema version 3, newer than the registered 1")

	r, err := runtime.DecodeAs[Renamed](rt, got[0].Record)
	require.NoError(t, err)
	require.Equal(t, 5, r.Amount)
	_, err = runtime.DecodeAs[Renamed](rt, got[1].Record)
	require.ErrorContains(t, err, "decodes to runtime_test.Incremented, not runtime_test.Renamed")

	// A failing upcaster names the record.
	rt2 := memoryEnv().start(t, func(c *runtime.Config) { c.NodeID = "other" })
	require.NoError(t, runtime.RegisterEvent[Renamed](rt2, "Renamed", 2))
	require.NoError(t, runtime.RegisterUpcaster(rt2, "Renamed", 1, func(json.RawMessage) (json.RawMessage, error) {
		return nil, errBadUpcast
	}))
	_, err = rt2.Decode(got[0].Record)
	require.ErrorIs(t, err, errBadUpcast)
	require.ErrorContains(t, err, v1.ID.String())

	// Stopping early stops the read.
	n := 0
	for range rt.Decoding(e.j.ReadStream(ctx, stream, 1, 0)) {
		n++
		break
	}
	require.Equal(t, 1, n)
}

var errBadUpcast = errors.New("upcast failed")
