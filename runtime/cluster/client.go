package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/propagation"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/clusterpb"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// repliesName is the name of each member's reply router actor.
const repliesName = "scribe-replies"

// maxRouteAttempts bounds how often one Execute is re-routed when its
// envelope was certainly not executed (not delivered, or the receiver no
// longer hosts the stream).
const maxRouteAttempts = 4

// call is an envelope waiting for its reply.
type call struct {
	reply  chan any // buffered 1: a reply message, errUndelivered or errMemberLeft
	target *actor.PID
}

// execute runs cmd on the member hosting stream: in process when it is this
// one, otherwise through the stream's grain on that member.
func (c *clusterNode) execute(ctx context.Context, stream journal.StreamID, cmd actors.Command) (actors.Result, error) {
	identity := stream.String()
	for attempt := 1; ; attempt++ {
		if err := c.check(); err != nil {
			return actors.Result{}, err
		}
		owner := c.owner(identity)
		if owner == "" {
			return actors.Result{}, fmt.Errorf("%w: no member of cluster %q hosts streams right now (stream %s); retry when members have joined", runtime.ErrNodeUnavailable, c.cfg.Name, stream)
		}
		if owner == c.self() {
			return c.node.Host.Execute(ctx, stream, cmd)
		}
		res, retry, err := c.remoteExecute(ctx, owner, stream, cmd)
		if !retry || attempt >= maxRouteAttempts || ctx.Err() != nil {
			return res, err
		}
	}
}

// remoteTimeout is the time the hosting member gets for a request: the
// caller's remaining time minus a margin for the reply's trip, so that a
// result (or a domain error) decided just in time reaches the caller before
// its own deadline.
func remoteTimeout(ctx context.Context, def time.Duration) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return def
	}
	left := time.Until(dl)
	margin := min(max(left/20, time.Millisecond), 100*time.Millisecond)
	if left-margin <= 0 {
		return time.Nanosecond
	}
	return left - margin
}

// send registers a call, sends msg to target with the reply router as
// sender, and waits for the reply, the call's failure or ctx.
func (c *clusterNode) send(ctx context.Context, target *actor.PID, id uint64, msg any) (any, error) {
	cl := &call{reply: make(chan any, 1), target: target}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if err := c.fenceError(); err != nil {
			return nil, err
		}
		return nil, actors.ErrShutdown
	}
	c.calls[id] = cl
	c.mu.Unlock()
	c.system.Root.RequestWithCustomSender(target, msg, c.replies)
	select {
	case r := <-cl.reply:
		return r, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		select {
		case r := <-cl.reply:
			return r, nil
		default:
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// The hosting member's own deadline covers a deadline; a
			// cancellation must be told.
			c.system.Root.RequestWithCustomSender(target, &clusterpb.CancelRequest{RequestId: id}, c.replies)
		}
		return nil, ctx.Err()
	}
}

// remoteExecute sends cmd to the grain of stream on member owner. retry
// reports that the command was certainly not executed and may be routed
// again.
func (c *clusterNode) remoteExecute(ctx context.Context, owner string, stream journal.StreamID, cmd actors.Command) (actors.Result, bool, error) {
	payload, err := c.encodeCommand(cmd.Payload)
	if err != nil {
		return actors.Result{}, false, err
	}
	identity := stream.String()
	pid := c.pid(identity)
	if pid == nil {
		return actors.Result{}, false, fmt.Errorf("%w: the member hosting stream %s (%s) did not activate it; the command was not executed: retry", runtime.ErrNodeUnavailable, stream, owner)
	}
	id := c.seq.Add(1)
	req := &clusterpb.ExecuteRequest{
		RequestId:    id,
		Stream:       &clusterpb.Stream{Partition: stream.Partition, Tag: string(stream.Tag)},
		Command:      payload,
		Metadata:     metadataToPB(cmd.Metadata),
		TimeoutNanos: int64(remoteTimeout(ctx, c.node.RequestTimeout)),
	}
	req.TraceParent, req.TraceState = c.traceContext(ctx)
	r, err := c.send(ctx, pid, id, req)
	if err != nil {
		if errors.Is(err, actors.ErrShutdown) || errors.Is(err, c.fenceError()) {
			// Never sent: this membership ended first.
			return actors.Result{}, false, err
		}
		return actors.Result{}, false, fmt.Errorf("cluster: the context ended while member %s executed the command on stream %s; whether its events were stored is unknown (execute it again with the same idempotency key to find out): %w (%w)", pid.Address, stream, err, journal.ErrOutcomeUnknown)
	}
	switch r := r.(type) {
	case *clusterpb.ExecuteReply:
		if r.Error != nil && hasCode(r.Error, codeNotOwner) {
			c.cl.PidCache.Remove(identity, streamKind)
			return actors.Result{}, true, fmt.Errorf("%w: member %s no longer hosts stream %s (the topology changed); the command was not executed: retry", runtime.ErrNodeUnavailable, pid.Address, stream)
		}
		return c.resultFromPB(stream, pid.Address, r)
	case error:
		switch {
		case errors.Is(r, errUndelivered):
			c.cl.PidCache.Remove(identity, streamKind)
			return actors.Result{}, true, fmt.Errorf("%w: the command for stream %s could not be delivered to member %s; it was not executed: retry", runtime.ErrNodeUnavailable, stream, pid.Address)
		case errors.Is(r, errMemberLeft):
			c.cl.PidCache.Remove(identity, streamKind)
			return actors.Result{}, false, fmt.Errorf("%w: member %s, which was executing the command on stream %s, left the cluster; whether its events were stored is unknown (execute it again with the same idempotency key to find out): %w", runtime.ErrNodeUnavailable, pid.Address, stream, journal.ErrOutcomeUnknown)
		default:
			return actors.Result{}, false, r
		}
	default:
		return actors.Result{}, false, fmt.Errorf("cluster: unexpected reply %T from member %s", r, pid.Address)
	}
}

func (c *clusterNode) resultFromPB(stream journal.StreamID, from string, r *clusterpb.ExecuteReply) (actors.Result, bool, error) {
	res := actors.Result{Records: recordsFromPB(r.Records), Version: r.Version, Duplicate: r.Duplicate}
	if r.State != nil {
		if m := c.node.Resolve(stream.Tag.Group()); m != nil {
			st, err := m.DecodeState(r.State.Data)
			if err != nil {
				return res, false, fmt.Errorf("cluster: decoding the state of stream %s sent by member %s: %w", stream, from, err)
			}
			res.State = st
		}
	}
	if r.Error != nil {
		return res, false, c.decodeError(r.Error, from)
	}
	return res, false, nil
}

func (c *clusterNode) traceContext(ctx context.Context) (string, string) {
	carrier := propagation.MapCarrier{}
	c.prop.Inject(ctx, carrier)
	return carrier["traceparent"], carrier["tracestate"]
}

func (c *clusterNode) withTrace(ctx context.Context, parent, state string) context.Context {
	if parent == "" {
		return ctx
	}
	return c.prop.Extract(ctx, propagation.MapCarrier{"traceparent": parent, "tracestate": state})
}

// receiveReply is the reply router: it hands replies to the waiting calls.
func (c *clusterNode) receiveReply(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *clusterpb.ExecuteReply:
		c.complete(m.RequestId, m)
	case *clusterpb.ReserveReply:
		c.complete(m.RequestId, m)
	case *clusterpb.EndReservationReply:
		c.complete(m.RequestId, m)
	case *actor.DeadLetterResponse:
		if m.Target != nil {
			c.failCalls(func(cl *call) bool { return cl.target.Equal(m.Target) }, errUndelivered)
		}
	}
}

func (c *clusterNode) complete(id uint64, msg any) {
	c.mu.Lock()
	cl := c.calls[id]
	delete(c.calls, id)
	ab, wasAbandoned := c.abandoned[id]
	delete(c.abandoned, id)
	c.mu.Unlock()
	if cl != nil {
		cl.reply <- msg
		return
	}
	if r, ok := msg.(*clusterpb.ReserveReply); ok && wasAbandoned && r.Error == nil {
		// Granted after its caller gave up: end it now rather than leave
		// the tag held until the reservation hold runs out.
		c.system.Root.RequestWithCustomSender(ab.pid, &clusterpb.EndReservationRequest{
			RequestId: c.seq.Add(1), Stream: ab.stream, ReservationId: r.ReservationId,
		}, c.replies)
	}
}
