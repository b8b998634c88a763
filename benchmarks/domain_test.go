package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func TestDepositPayloadIsAboutOneHundredBytes(t *testing.T) {
	t.Parallel()
	st := counterState{Balance: 123_456, Version: 123_456}
	e, err := decideDeposit(st, deposit{Amount: 1})
	require.NoError(t, err)
	ev, err := depositEvent(counterTag(7), e)
	require.NoError(t, err)
	require.InDelta(t, 100, len(ev.Data), 10, "payload %s", ev.Data)
	require.Equal(t, []journal.Tag{"counter:7"}, ev.Tags)
	next, err := foldCounter(st, journal.Record{Event: ev})
	require.NoError(t, err)
	require.Equal(t, counterState{Balance: 123_457, Version: 123_457}, next)

	_, err = decideDeposit(st, deposit{Amount: 0})
	require.ErrorIs(t, err, errRejected)
}

func TestTransferCommandFoldsAndDecidesLikeTheOCCLoop(t *testing.T) {
	t.Parallel()
	a, b, c := accountTag(1), accountTag(2), accountTag(3)
	cmd := transferCommand(transfer{From: a, To: b, Amount: 5})
	require.NoError(t, cmd.Query.Validate())
	st := cmd.Initial()
	for _, e := range []transferred{{From: a, To: c, Amount: 10}, {From: c, To: b, Amount: 3}, {From: b, To: a, Amount: 1}} {
		data, err := json.Marshal(e)
		require.NoError(t, err)
		st = cmd.Evolve(st, journal.Record{Event: journal.Event{Type: transferredType, Data: data, Tags: []journal.Tag{e.From, e.To}}})
	}
	require.Equal(t, openingBalance-10+1, st.FromBalance)
	require.Equal(t, openingBalance+3-1, st.ToBalance)
	evs, err := cmd.Decide(st)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.ElementsMatch(t, []journal.Tag{a, b}, evs[0].Tags)

	// A record that cannot be decoded fails the decision instead of being skipped.
	bad := cmd.Evolve(st, journal.Record{Event: journal.Event{Type: transferredType, Data: []byte(`{"amount":"x"}`)}})
	_, err = cmd.Decide(bad)
	require.Error(t, err)

	poor := st
	poor.FromBalance = 4
	_, err = cmd.Decide(poor)
	require.True(t, errors.Is(err, errRejected))
}
