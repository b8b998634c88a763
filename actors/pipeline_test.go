package actors_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

type execOutcome struct {
	res actors.Result
	err error
}

// pipelineFixture starts a host on a gated journal with one event on stream
// s (state 1, version 1) and gates every append from then on.
func pipelineFixture(t *testing.T, name string) (*actors.Host, *gated, journal.StreamID) {
	t.Helper()
	f := newFixture()
	g := newGated(f.mem)
	h := f.host(t, func(c *actors.Config) { c.Journal = g })
	h.SetCompletionLinger(time.Nanosecond) // no waiting for more callers after a batch
	s := stream(name)
	exec(t, h, s, add{1})
	g.mu.Lock()
	g.gateAppends = true
	g.mu.Unlock()
	// Registered after the host, so it runs before the host shuts down: a
	// failing test must not leave an append waiting at the gate.
	t.Cleanup(g.openGate)
	return h, g, s
}

func executeAsync(h *actors.Host, s journal.StreamID, cmd actors.Command) <-chan execOutcome {
	out := make(chan execOutcome, 1)
	go func() {
		res, err := h.Execute(context.Background(), s, cmd)
		out <- execOutcome{res, err}
	}()
	return out
}

// recv returns the next value from ch, failing the test (instead of hanging
// it) when none comes within 5 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
		panic("unreachable")
	}
}

func appendsStarted(g *gated, n int) func() bool {
	return func() bool { _, _, a := g.counts(); return a == n }
}

// A command that arrives while an append is in flight is decided at once, on
// the state that append leads to, and answered only after its own append,
// which goes out after the first one is confirmed.
func TestPipelineDecidesOnTopOfTheAppendInFlight(t *testing.T) {
	t.Parallel()
	h, g, s := pipelineFixture(t, "pipeline")
	a := executeAsync(h, s, actors.Command{Payload: add{10}})
	require.Eventually(t, appendsStarted(g, 1), 5*time.Second, time.Millisecond)

	seen := make(chan int, 4)
	b := executeAsync(h, s, actors.Command{Payload: observe{N: 100, Seen: seen}})
	require.Equal(t, 11, recv(t, seen, "decision while the append was in flight"), "decided on top of the append in flight (1 + 10)")
	// The actor counts the command again once its decision returns, just
	// after Decide reported it (the append in flight stays gated meanwhile).
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond, "a command decided ahead still counts as waiting")
	_, _, started := g.counts()
	require.Equal(t, 1, started, "one append in flight per stream")
	select {
	case o := <-b:
		t.Fatalf("answered before its append: %+v", o)
	default:
	}

	g.release <- struct{}{} // the first append completes
	ra := recv(t, a, "reply to the first command")
	require.NoError(t, ra.err)
	require.Equal(t, uint64(2), ra.res.Version)
	require.Eventually(t, appendsStarted(g, 2), 5*time.Second, time.Millisecond)
	select {
	case o := <-b:
		t.Fatalf("answered before its append was confirmed: %+v", o)
	default:
	}
	g.release <- struct{}{}
	rb := recv(t, b, "reply to the second command")
	require.NoError(t, rb.err)
	require.Equal(t, uint64(3), rb.res.Version)
	require.Equal(t, 111, rb.res.State)
	require.Zero(t, h.Pending(s))
	require.Len(t, seen, 0, "decided once")
	g.mu.Lock()
	require.Equal(t, []int{1, 1}, slices.Clone(g.sizes))
	g.mu.Unlock()
}

// A command keeps counting toward the queue bounds while it is decided
// ahead (its Decide running): a caller arriving in that moment is measured
// against the bound with it. The actor used to stop counting it when it took
// it and count it again after its decision, so Pending read 0 meanwhile and
// one more caller than MaxQueue could be admitted.
func TestPipelineCountsTheCommandItDecidesAhead(t *testing.T) {
	t.Parallel()
	h, g, s := pipelineFixture(t, "pipeline-count")
	a := executeAsync(h, s, actors.Command{Payload: add{10}})
	require.Eventually(t, appendsStarted(g, 1), 5*time.Second, time.Millisecond)
	entered, proceed := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(func() { let(); g.openGate() }) // before the host's shutdown, also when the test fails
	b := executeAsync(h, s, actors.Command{Payload: hold{N: 100, Entered: entered, Proceed: proceed}})
	recv(t, entered, "the decision ahead started")
	require.Equal(t, 1, h.Pending(s), "the command being decided ahead still counts as waiting")
	let()
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	g.openGate()
	require.NoError(t, recv(t, a, "reply to the first command").err)
	rb := recv(t, b, "reply to the second command")
	require.NoError(t, rb.err)
	require.Equal(t, 111, rb.res.State)
	require.Zero(t, h.Pending(s))
}

// When the append in flight fails, a command decided on top of it is neither
// answered nor appended from that decision: it is decided again on the state
// the actor recovers, and succeeds.
func TestPipelineDecidesAgainWhenTheAppendInFlightFails(t *testing.T) {
	t.Parallel()
	h, g, s := pipelineFixture(t, "pipeline-fail")
	g.mu.Lock()
	g.failNext = errors.New("the disk is on fire")
	g.mu.Unlock()
	a := executeAsync(h, s, actors.Command{Payload: add{10}})
	require.Eventually(t, appendsStarted(g, 1), 5*time.Second, time.Millisecond)
	seen := make(chan int, 4)
	b := executeAsync(h, s, actors.Command{Payload: observe{N: 100, Seen: seen}})
	require.Equal(t, 11, recv(t, seen, "decision ahead"), "decided ahead, on top of the append in flight")

	g.openGate() // every append passes from here on; the first one fails
	ra := recv(t, a, "reply to the first command")
	require.ErrorContains(t, ra.err, "the disk is on fire")
	rb := recv(t, b, "reply to the second command")
	require.NoError(t, rb.err)
	require.Equal(t, 1, recv(t, seen, "second decision"), "decided again on the state without the failed append")
	require.Equal(t, uint64(2), rb.res.Version)
	require.Equal(t, 101, rb.res.State)
	require.Equal(t, 101, exec(t, h, s, noop{}).State)
}

// A command repeating the idempotency key of the append in flight is not
// decided ahead: it waits for that append and is answered as its duplicate.
func TestPipelineKeyOfTheAppendInFlightWaitsForIt(t *testing.T) {
	t.Parallel()
	h, g, s := pipelineFixture(t, "pipeline-key")
	cmd := actors.Command{Payload: add{10}, Metadata: journal.Metadata{IdempotencyKey: "once"}}
	a := executeAsync(h, s, cmd)
	require.Eventually(t, appendsStarted(g, 1), 5*time.Second, time.Millisecond)
	b := executeAsync(h, s, cmd)
	require.Eventually(t, func() bool { return h.Pending(s) == 1 }, 5*time.Second, time.Millisecond)
	g.openGate()
	ra, rb := recv(t, a, "reply to the first command"), recv(t, b, "reply to the second command")
	require.NoError(t, ra.err)
	require.NoError(t, rb.err)
	require.False(t, ra.res.Duplicate)
	require.True(t, rb.res.Duplicate)
	require.Equal(t, ra.res.Records[0].ID, rb.res.Records[0].ID)
	require.Equal(t, 11, exec(t, h, s, noop{}).State, "appended once")
	_, _, started := g.counts()
	require.Equal(t, 1, started, "the duplicate appended nothing")
}

// When the append in flight writes nothing because the stream moved (an
// append behind the actor's back), its commands and those decided on top of
// it are decided again in their order: the first one first.
func TestPipelineVersionMismatchKeepsTheOrder(t *testing.T) {
	t.Parallel()
	h, g, s := pipelineFixture(t, "pipeline-order")
	seenA, seenB := make(chan int, 4), make(chan int, 4)
	a := executeAsync(h, s, actors.Command{Payload: observe{N: 10, Seen: seenA}})
	require.Equal(t, 1, recv(t, seenA, "decision of the first command"))
	b := executeAsync(h, s, actors.Command{Payload: observe{N: 100, Seen: seenB}})
	require.Equal(t, 11, recv(t, seenB, "decision ahead of the second command"))
	_, err := g.Journal.Append(context.Background(), []journal.Event{{
		ID: journal.NewEventID(), Type: "Added", SchemaVersion: 1, Tags: []journal.Tag{s.Tag}, Data: []byte(`{"n":1000}`),
	}}, journal.AppendOptions{})
	require.NoError(t, err)

	g.openGate() // the held append fails: the stream is at version 2 now
	ra, rb := recv(t, a, "reply to the first command"), recv(t, b, "reply to the second command")
	require.NoError(t, ra.err)
	require.NoError(t, rb.err)
	require.Equal(t, 1001, recv(t, seenA, "second decision of the first command"), "the first command is decided again first")
	require.Equal(t, 1011, recv(t, seenB, "second decision of the second command"), "then the one decided on top of it")
	require.Equal(t, uint64(3), ra.res.Version)
	require.Equal(t, uint64(4), rb.res.Version)
	require.Equal(t, 1111, rb.res.State)
}
