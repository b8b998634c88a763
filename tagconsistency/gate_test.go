package tagconsistency_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// blockedIn wraps cmd so that its Decide reports it runs, holding its
// reservations, and then waits for release.
func blockedIn[S any](cmd tagconsistency.Command[S], deciding chan<- struct{}, release <-chan struct{}) tagconsistency.Command[S] {
	decide := cmd.Decide
	cmd.Decide = func(s S) ([]journal.Event, error) {
		deciding <- struct{}{}
		<-release
		return decide(s)
	}
	return cmd
}

// gatedEnv sets up an executor with a gate of cfg and funds each account
// with 10.
func gatedEnv(t *testing.T, cfg tagconsistency.GateConfig, accounts ...journal.Tag) (env, *tagconsistency.Gate) {
	t.Helper()
	gate, err := tagconsistency.NewGate(cfg)
	require.NoError(t, err)
	e := setup(t, memoryBackend(), func(c *tagconsistency.Config, _ *lockOwners) { c.Gate = gate })
	for _, acct := range accounts {
		require.NoError(t, e.deposit(context.Background(), acct, 10))
	}
	return e, gate
}

// executeBlocked runs cmd until its Decide, which then waits for release:
// when it returns, cmd holds its tags. The channel gets its result.
func executeBlocked[S any](e env, cmd tagconsistency.Command[S]) (result <-chan error, release func()) {
	deciding, released := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := tagconsistency.Execute(context.Background(), e.x, blockedIn(cmd, deciding, released), tagconsistency.Options{})
		done <- err
	}()
	<-deciding
	return done, func() { close(released) }
}

// TestGatedCommandWaitsHoldingNoTag: while a command holds account 2, a
// transfer 1→2 waits at the gate without reserving account 1, so a transfer
// 1→3 completes meanwhile. Without the gate the 1→2 transfer holds account 1
// at its owner while it queues for account 2, and 1→3 queues behind it until
// the first command ends.
func TestGatedCommandWaitsHoldingNoTag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, c, d := accountTag(1), accountTag(2), accountTag(3), accountTag(4)
	e, gate := gatedEnv(t, tagconsistency.GateConfig{}, a, b, c, d)
	first, release := executeBlocked(e, transfer(b, d, 1)) // holds accounts 2 and 4

	queued := make(chan error, 1)
	go func() {
		_, err := tagconsistency.Execute(ctx, e.x, transfer(a, b, 2), tagconsistency.Options{})
		queued <- err
	}()
	require.Eventually(t, func() bool { return gate.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	require.Empty(t, e.owners.stream(journal.Stream(a)).slot, "the waiting transfer reserved account 1")

	passing := make(chan error, 1)
	go func() {
		_, err := tagconsistency.Execute(ctx, e.x, transfer(a, c, 3), tagconsistency.Options{})
		passing <- err
	}()
	select {
	case err := <-passing:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the 1→3 transfer queued behind the transfer waiting for account 2")
	}

	release()
	require.NoError(t, <-first)
	require.NoError(t, <-queued)
	require.Zero(t, gate.Waiting())
	require.EqualValues(t, 3, e.histogramCount(t, "scribe.dcb.gate.wait"), "every command's wait at the gate is measured")
	waits := 0
	for _, s := range e.spans.Ended() {
		if _, ok := attr(s, "scribe.dcb.gate_wait_ms"); ok && s.Name() == "scribe.dcb.execute" {
			waits++
		}
	}
	require.Equal(t, 3, waits, "every execute span carries its wait at the gate")
	balance := func(acct journal.Tag) int64 { return balanceOf(acct, readStream(t, e.j, acct)) }
	require.Equal(t, []int64{10 - 2 - 3, 10 - 1 + 2, 10 + 3, 10 + 1}, []int64{balance(a), balance(b), balance(c), balance(d)})
}

// TestGatedCommandWhoseCallerLeftWritesNothing: a command whose context ends
// while it waits at the gate returns the context's error and never reserves
// or decides.
func TestGatedCommandWhoseCallerLeftWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := accountTag(1), accountTag(2)
	e, gate := gatedEnv(t, tagconsistency.GateConfig{}, a, b)
	first, release := executeBlocked(e, transfer(a, b, 1))

	gone, leave := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	decided := false
	go func() {
		cmd := transfer(b, a, 5)
		decide := cmd.Decide
		cmd.Decide = func(s transferState) ([]journal.Event, error) { decided = true; return decide(s) }
		_, err := tagconsistency.Execute(gone, e.x, cmd, tagconsistency.Options{})
		waiting <- err
	}()
	require.Eventually(t, func() bool { return gate.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	leave()
	err := <-waiting
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "waiting at the gate")
	require.False(t, decided)

	release()
	require.NoError(t, <-first)
	require.Len(t, readAll(t, e.j, journal.Query{Items: []journal.QueryItem{{Types: []string{"Transferred"}, Tags: []journal.Tag{a}}}}), 1, "only the first transfer is stored")
}

// TestGatedCommandTimesOutNamingTheBusyTag: a command that waits at the gate
// past its MaxWait fails as a reservation timeout would, with its name and
// the busy tag, having written nothing.
func TestGatedCommandTimesOutNamingTheBusyTag(t *testing.T) {
	t.Parallel()
	a, b := accountTag(1), accountTag(2)
	e, _ := gatedEnv(t, tagconsistency.GateConfig{MaxWait: 100 * time.Millisecond}, a, b)
	first, release := executeBlocked(e, transfer(b, a, 1))
	_, err := tagconsistency.Execute(context.Background(), e.x, transfer(a, b, 5), tagconsistency.Options{})
	require.ErrorIs(t, err, tagconsistency.ErrReservationTimeout)
	var te *tagconsistency.ReservationTimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "Transfer", te.Command)
	require.Equal(t, journal.Stream(a), te.Stream, "the first of its tags the other command holds")

	release()
	require.NoError(t, <-first)
	require.Len(t, readAll(t, e.j, journal.Query{Items: []journal.QueryItem{{Types: []string{"Transferred"}, Tags: []journal.Tag{a}}}}), 1, "only the first transfer is stored")
}
