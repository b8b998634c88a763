package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
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

func TestTransferDCBFoldsAndDecidesLikeTheOCCLoop(t *testing.T) {
	t.Parallel()
	a, b, c := accountTag(1), accountTag(2), accountTag(3)
	def := transferDCB()
	cmd := transfer{From: a, To: b, Amount: 5}
	require.NoError(t, def.Query(cmd).Validate())
	st := def.Initial(cmd)
	for _, e := range []transferred{{From: a, To: c, Amount: 10}, {From: c, To: b, Amount: 3}, {From: b, To: a, Amount: 1}} {
		st = def.Evolve(cmd, st, runtime.DCBEvent{Value: e})
	}
	require.Equal(t, openingBalance-10+1, st.FromBalance)
	require.Equal(t, openingBalance+3-1, st.ToBalance)
	evs, err := def.Decide(cmd, st)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.ElementsMatch(t, []journal.Tag{a, b}, evs[0].(transferred).Tags())

	poor := st
	poor.FromBalance = 4
	_, err = def.Decide(cmd, poor)
	require.True(t, errors.Is(err, errRejected))
}
