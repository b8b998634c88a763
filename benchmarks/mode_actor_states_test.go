package main

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

// TestActorStatesTransfersConserveMoney races transfers in the actor-states
// mode (the DCB with Uses) over a few accounts and checks that every transfer
// is stored once, money is conserved, and each account's actor state agrees
// with the journal; a transfer from an account that was never opened is
// rejected and writes nothing.
func TestActorStatesTransfersConserveMoney(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := memory.New()
	defer j.Close()
	m, err := newActorStatesMode(ctx, cell{Scenario: scenarioTransfer, Mode: modeActorStates}, &backend{Journal: j, Sessions: j})
	require.NoError(t, err)
	sm := m.(*actorStatesMode)
	defer func() { require.NoError(t, m.close(ctx)) }()

	const writers, each, accounts = 6, 30, 4
	var wg sync.WaitGroup
	for id := range writers {
		w := m.newWorker(id)
		wg.Go(func() {
			for i := range each {
				a := (id + i) % accounts
				out, err := w.do(ctx, target{A: a, B: (a + 1 + id%2) % accounts})
				if err != nil {
					t.Errorf("writer %d: %v", id, err)
					return
				}
				if out.Commands != 1 || out.Events != 1 {
					t.Errorf("writer %d: outcome %+v, want one command and one event", id, out)
				}
			}
		})
	}
	wg.Wait()

	_, err = sm.transfers.Execute(ctx, transfer{From: journal.NewTag(accountGroup, "never-opened"), To: accountTag(0), Amount: 1})
	require.ErrorIs(t, err, errRejected)

	delta := map[journal.Tag]int64{}
	opened, transfers := 0, 0
	for r, err := range j.ReadAll(ctx, journal.Position{}, 0) {
		require.NoError(t, err)
		switch r.Type {
		case accountOpenedType:
			opened++
		case transferredType:
			var e transferred
			require.NoError(t, json.Unmarshal(r.Data, &e))
			delta[e.From] -= e.Amount
			delta[e.To] += e.Amount
			transfers++
		default:
			t.Fatalf("unexpected event type %q", r.Type)
		}
	}
	require.Equal(t, transferAccounts, opened, "setUp opens every account once")
	require.Equal(t, writers*each, transfers)
	var sum int64
	for _, d := range delta {
		sum += d
	}
	require.Zero(t, sum, "transfers conserve money")
	for a := range accounts {
		st, err := runtime.State[accountState](ctx, sm.rt, runtime.Target{Aggregate: accountGroup, ID: strconv.Itoa(a)})
		require.NoError(t, err)
		require.Equal(t, accountState{ID: accountTag(a), Balance: openingBalance + delta[accountTag(a)]}, st.State)
	}
}

func TestActorStatesMeasuresOnlyTransfers(t *testing.T) {
	t.Parallel()
	j := memory.New()
	defer j.Close()
	_, err := newActorStatesMode(context.Background(), cell{Scenario: scenarioHot, Mode: modeActorStates}, &backend{Journal: j, Sessions: j})
	require.ErrorContains(t, err, "measures only the transfer scenario")
	o := options{Scenario: scenarioHot, Modes: []string{modeActor, modeActorStates}}
	modes, notes := scenarioModes(o)
	require.Equal(t, []string{modeActor}, modes)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "actor-states skipped")
}

// TestHarnessRunsActorStates measures the mode through the command line,
// beside actor, on the memory journal: both complete transfers.
func TestHarnessRunsActorStates(t *testing.T) {
	t.Parallel()
	stdout, _ := runHarness(t, "-scenario", "transfer", "-mode", "actor,actor-states", "-writers", "4",
		"-duration", "500ms", "-runs", "1", "-warmup", "20ms", "-progress", "0", "-json")
	ran := map[string]bool{}
	for _, r := range jsonResults(t, stdout) {
		require.Zero(t, r.Errors, "%s: %s", r.Mode, r.FirstError)
		require.Positive(t, r.Completed, "%s: completed no transfer", r.Mode)
		requireEventsPerCommand(t, 1, r, "%s: one event per transfer", r.Mode)
		ran[r.Mode] = true
	}
	require.Equal(t, map[string]bool{modeActor: true, modeActorStates: true}, ran)
}
