// protoactor-go's cluster and remote packages have data races of their own
// (remote.BlockList read without its lock by the member list; gRPC's global
// logger replaced by every Remote.Start, which races when two members share
// a process), so the race detector fails any test running two members in one
// process. These tests run in race-free builds; the multi-process tests run
// under the race detector, one member per process.

//go:build !race

package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
)

// Two members on one journal: every command, sent to either member, is
// executed by the one actor of its stream, on the member that hosts it.
func TestInProcessRoutingAndTypedErrors(t *testing.T) {
	j := memory.New()
	rts := startInProcess(t, 2, j)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const accounts, perMember = 40, 5
	var wg sync.WaitGroup
	errs := make(chan error, accounts*len(rts)*perMember)
	for a := range accounts {
		for m, rt := range rts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range perMember {
					_, err := rt.Execute(ctx, acct(fmt.Sprintf("a%d", a)), Deposit{Amount: 10},
						runtime.WithIdempotencyKey(fmt.Sprintf("dep-%d-%d-%d", a, m, k)))
					if err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Each stream has exactly one actor in the cluster, and both members host some.
	total := 0
	for _, rt := range rts {
		n := rt.ActiveStreams()
		require.Positive(t, n, "each member hosts some streams")
		total += n
	}
	require.Equal(t, accounts, total, "one actor per stream across the cluster")
	for a := range accounts {
		res, err := runtime.ExecuteTyped[Account](ctx, rts[a%2], acct(fmt.Sprintf("a%d", a)), Deposit{Amount: 1})
		require.NoError(t, err)
		require.Equal(t, int64(10*perMember*len(rts)+1), res.State.Balance)
		require.Equal(t, uint64(perMember*len(rts)+1), res.Version)
		require.Len(t, res.Records, 1)
		require.Equal(t, "Deposited", res.Records[0].Type)
		require.Equal(t, res.Version, res.Records[0].Version(acct(fmt.Sprintf("a%d", a)).Stream().Tag))
	}

	// Find a stream hosted by member 1, and execute on it through member 0.
	remote, local := rts[0], rts[1]
	id := hostedBy(t, ctx, local, remote)
	// ClusterOwner names the member where the actor became active, on both.
	require.NotEmpty(t, local.ClusterAddress())
	require.NotEqual(t, local.ClusterAddress(), remote.ClusterAddress())
	require.Equal(t, local.ClusterAddress(), remote.ClusterOwner(acct(id)))
	require.Equal(t, local.ClusterAddress(), local.ClusterOwner(acct(id)))
	for a := range accounts {
		// Every stream is owned by one of the two members, and both agree which.
		o := rts[0].ClusterOwner(acct(fmt.Sprintf("a%d", a)))
		require.Contains(t, []string{rts[0].ClusterAddress(), rts[1].ClusterAddress()}, o)
		require.Equal(t, o, rts[1].ClusterOwner(acct(fmt.Sprintf("a%d", a))))
	}

	// A domain error keeps its identity across members.
	_, err := remote.Execute(ctx, acct(id), Withdraw{Amount: 1 << 40})
	require.ErrorIs(t, err, errInsufficient)
	var re *cluster.RemoteError
	require.ErrorAs(t, err, &re, "the error came from the hosting member")
	require.Contains(t, err.Error(), "insufficient funds")

	// An idempotency key reused with a different command is recognised on
	// the hosting member (the fingerprint crosses with the command).
	_, err = remote.Execute(ctx, acct(id), Deposit{Amount: 2}, runtime.WithIdempotencyKey("k-remote"))
	require.NoError(t, err)
	_, err = remote.Execute(ctx, acct(id), Deposit{Amount: 3}, runtime.WithIdempotencyKey("k-remote"))
	require.ErrorIs(t, err, runtime.ErrIdempotencyKeyReused)
	dup, err := runtime.ExecuteTyped[Account](ctx, remote, acct(id), Deposit{Amount: 2}, runtime.WithIdempotencyKey("k-remote"))
	require.NoError(t, err)
	require.True(t, dup.Duplicate)

	// A journal sentinel keeps its identity: metadata the journal rejects.
	_, err = remote.Execute(ctx, acct(id), Deposit{Amount: 1}, runtime.WithMetadata(journal.Metadata{CorrelationID: "bad\x00id"}))
	require.ErrorIs(t, err, journal.ErrInvalidEvent)
	require.ErrorAs(t, err, &re)
	// An append behind the actor's back is no conflict for the caller: the
	// actor's append fails with a version mismatch, it re-reads its tail and
	// decides again, and the command succeeds seeing the event.
	_, err = j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "Deposited", Tags: []journal.Tag{acct(id).Stream().Tag}, Data: []byte(`{"amount":5}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	res, err := runtime.ExecuteTyped[Account](ctx, remote, acct(id), Deposit{Amount: 1})
	require.NoError(t, err)
	require.Equal(t, int64(1+2+5+1), res.State.Balance, "probe deposit, the keyed deposit, the event appended behind the actor's back, this deposit")

	// A command type missing from ClusterConfig.Commands fails clearly
	// when it must cross members.
	type Unlisted struct{}
	_, err = remote.Execute(ctx, acct(id), Unlisted{})
	require.ErrorIs(t, err, runtime.ErrUnknownCommand)
}

// hostedBy returns an account ID whose stream is hosted by member host (its
// actor becomes active there, not on other).
func hostedBy(t *testing.T, ctx context.Context, host, other *runtime.Runtime) string {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("probe-%d", i)
		before := host.ActiveStreams()
		_, err := other.Execute(ctx, acct(id), Deposit{Amount: 1})
		require.NoError(t, err)
		if host.ActiveStreams() == before+1 {
			return id
		}
	}
	t.Fatal("no stream hosted by the member")
	return ""
}

// Deadlines cross members: a remote command's decision is bounded by the
// caller's deadline, and a domain error decided just before the deadline
// comes back as the domain error, not as a timeout.
func TestInProcessDeadlines(t *testing.T) {
	j := memory.New()
	rts := startInProcess(t, 2, j)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := hostedBy(t, ctx, rts[1], rts[0])

	dctx, dcancel := context.WithTimeout(ctx, 400*time.Millisecond)
	_, err := rts[0].Execute(dctx, acct(id), Slow{Millis: 150, Fail: true})
	dcancel()
	require.ErrorIs(t, err, errInsufficient, "a domain error is not turned into a timeout")
	require.NotErrorIs(t, err, context.DeadlineExceeded)

	start := time.Now()
	dctx, dcancel = context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = rts[0].Execute(dctx, acct(id), Slow{Millis: 1500})
	dcancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second, "the caller's deadline bounds the remote call")
	// The slow command still holds the actor; a later command is served after it.
	_, err = rts[0].Execute(ctx, acct(id), Deposit{Amount: 1})
	require.NoError(t, err)
}

// An idle stream actor passivates and its grain stops; a later command from
// another member, sent to the stopped grain's PID, comes back undelivered
// and is routed again to a fresh activation: it is executed exactly once.
func TestInProcessIdleGrainReactivates(t *testing.T) {
	j := memory.New()
	rts := startInProcess(t, 2, j, func(c *runtime.Config) { c.IdleTimeout = 300 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := hostedBy(t, ctx, rts[1], rts[0])
	require.Eventually(t, func() bool { return rts[1].ActiveStreams() == 0 }, 10*time.Second, 20*time.Millisecond, "the stream actor passivated")
	// Wait past the grain's own idle timeout too.
	deadline := time.Now().Add(time.Second)
	require.Eventually(t, func() bool { return time.Now().After(deadline) }, 5*time.Second, 50*time.Millisecond)
	res, err := runtime.ExecuteTyped[Account](ctx, rts[0], acct(id), Deposit{Amount: 2}, runtime.WithIdempotencyKey("after-idle"))
	require.NoError(t, err)
	require.Equal(t, int64(3), res.State.Balance, "the probe's deposit and this one, once")
	require.Equal(t, 1, rts[1].ActiveStreams(), "reactivated on its hosting member")
	require.Equal(t, 0, rts[0].ActiveStreams())
}

// The trace context crosses members: the hosting member's execute span
// belongs to the caller's trace, as a child of the caller's span.
func TestInProcessTraceCrossesMembers(t *testing.T) {
	j := memory.New()
	recs := []*tracetest.SpanRecorder{tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()}
	tps := []*sdktrace.TracerProvider{
		sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recs[0])),
		sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recs[1])),
	}
	next := 0
	rts := startInProcess(t, 2, j, func(c *runtime.Config) { c.TracerProvider = tps[next]; next++ })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := hostedBy(t, ctx, rts[1], rts[0])
	pctx, parent := tps[0].Tracer("test").Start(ctx, "caller")
	_, err := rts[0].Execute(pctx, acct(id), Deposit{Amount: 1})
	require.NoError(t, err)
	parent.End()
	found := false
	for _, s := range recs[1].Ended() {
		if s.Name() == "scribe.stream.execute" && s.SpanContext().TraceID() == parent.SpanContext().TraceID() {
			found = true
			require.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), "the caller's span is the parent")
		}
	}
	require.True(t, found, "the hosting member recorded the command's execute span in the caller's trace")
}

// A caller's cancellation crosses members: a command waiting at the
// hosting member when its caller cancels is never executed there.
func TestInProcessCancellationCrossesMembers(t *testing.T) {
	j := memory.New()
	rts := startInProcess(t, 2, j)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A "gate" aggregate whose Slow command reports when its decision starts.
	started := make(chan struct{}, 16)
	for _, rt := range rts {
		require.NoError(t, runtime.RegisterAggregate(rt, runtime.Aggregate[int64]{
			Name:    "gate",
			Initial: func() int64 { return 0 },
			Decide: func(s int64, cmd any) ([]any, error) {
				switch c := cmd.(type) {
				case Slow:
					started <- struct{}{}
					time.Sleep(time.Duration(c.Millis) * time.Millisecond) // holds the actor
					return nil, nil
				case Deposit:
					return []any{Deposited(c)}, nil
				}
				return nil, fmt.Errorf("gate: unknown command %T", cmd)
			},
			Evolve: func(s int64, ev any) int64 { return s + amountOf(ev) },
		}))
	}
	var gate runtime.Target
	for i := 0; gate.ID == ""; i++ {
		tg := runtime.Target{Aggregate: "gate", ID: fmt.Sprintf("g%d", i)}
		before := rts[1].ActiveStreams()
		_, err := rts[0].Execute(ctx, tg, Deposit{Amount: 1})
		require.NoError(t, err)
		if rts[1].ActiveStreams() == before+1 {
			gate = tg
		}
	}
	slow := make(chan error, 1)
	go func() {
		_, err := rts[0].Execute(ctx, gate, Slow{Millis: 1000})
		slow <- err
	}()
	<-started // the hosting actor is busy deciding
	cctx, ccancel := context.WithCancel(ctx)
	dep := make(chan error, 1)
	go func() {
		_, err := rts[0].Execute(cctx, gate, Deposit{Amount: 100})
		dep <- err
	}()
	ccancel() // the envelope or its cancellation reaches the busy actor's member
	require.ErrorIs(t, <-dep, context.Canceled)
	require.NoError(t, <-slow)
	res, err := runtime.ExecuteTyped[int64](ctx, rts[0], gate, Deposit{Amount: 1})
	require.NoError(t, err)
	require.Equal(t, int64(1+1), res.State, "the cancelled deposit was not executed")
}

// A member joins a running cluster: the streams that move to it are handed
// over at once (their previous hosts passivate them and release their
// leases) instead of failing until those actors go idle.
func TestInProcessScaleOutHandsStreamsOver(t *testing.T) {
	j := memory.New()
	ms, peers := allocate(t, 3)
	name := clusterName()
	short := func(c *runtime.Config) { c.OpenTimeout = 2 * time.Second } // IdleTimeout stays 2 min
	rts := []*runtime.Runtime{startMember(t, name, 0, ms[0], peers, j, short), startMember(t, name, 1, ms[1], peers, j, short)}
	waitAllMembers(t, rts, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const accounts = 30
	for a := range accounts {
		_, err := rts[a%2].Execute(ctx, acct(fmt.Sprintf("s%d", a)), Deposit{Amount: 1})
		require.NoError(t, err)
	}
	rts = append(rts, startMember(t, name, 2, ms[2], peers, j, short))
	waitAllMembers(t, rts, 3)
	for a := range accounts {
		ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := runtime.ExecuteTyped[Account](ectx, rts[a%3], acct(fmt.Sprintf("s%d", a)), Deposit{Amount: 1})
		ecancel()
		require.NoError(t, err, "account s%d after the join", a)
		require.Equal(t, int64(2), res.State.Balance)
	}
	require.Positive(t, rts[2].ActiveStreams(), "the new member hosts some streams")
	total := 0
	for _, rt := range rts {
		total += rt.ActiveStreams()
	}
	require.Equal(t, accounts, total, "each stream is active on exactly one member")
}
