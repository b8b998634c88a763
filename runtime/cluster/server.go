package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/clusterpb"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// streamGrain is the cluster activation of one stream on its hosting
// member. It serves each envelope on its own goroutine (the stream actor
// orders the commands), so a slow command never blocks the grain.
type streamGrain struct{ c *clusterNode }

func (g *streamGrain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// An idle grain stops like an idle stream actor; callers holding its
		// PID get a dead letter and activate it again.
		ctx.SetReceiveTimeout(g.c.node.IdleTimeout)
	case *actor.ReceiveTimeout:
		ctx.Stop(ctx.Self())
	case *clusterpb.ExecuteRequest:
		// Registered here, in mailbox order, so a CancelRequest that follows
		// always finds it.
		sender := ctx.Sender()
		if sender == nil {
			return
		}
		sctx, done := g.c.startServed(sender, m.RequestId, m.TimeoutNanos, m.TraceParent, m.TraceState)
		if !g.c.serve(sender, func() any { defer done(); return g.c.serveExecute(sctx, m) }) {
			done()
		}
	case *clusterpb.CancelRequest:
		if s := ctx.Sender(); s != nil {
			g.c.cancelServed(servedKey{s.Address, m.RequestId})
		}
	case *clusterpb.ReserveRequest:
		sender := ctx.Sender()
		if sender == nil {
			return
		}
		sctx, done := g.c.startServed(sender, m.RequestId, m.TimeoutNanos, m.TraceParent, m.TraceState)
		if !g.c.serve(sender, func() any { defer done(); return g.c.serveReserve(sctx, sender, m) }) {
			done()
		}
	case *clusterpb.EndReservationRequest:
		g.c.serve(ctx.Sender(), func() any { return g.c.serveEndReservation(m) })
	}
}

// serve runs fn on a goroutine tracked by shutdown and sends its reply to
// sender.
func (c *clusterNode) serve(sender *actor.PID, fn func() any) bool {
	if sender == nil {
		return false
	}
	return c.serveAsync(func() { c.system.Root.Send(sender, fn()) })
}

// serveAsync runs fn on a goroutine that shutdown waits for, unless the
// member is shutting down (then it reports false).
func (c *clusterNode) serveAsync(fn func()) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.serving.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.serving.Done()
		fn()
	}()
	return true
}

func (c *clusterNode) serveContext(timeoutNanos int64, parent, state string) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutNanos)
	if d <= 0 {
		d = c.node.RequestTimeout
	}
	return context.WithTimeout(c.withTrace(context.Background(), parent, state), d)
}

// hostedHere checks that this member still hosts stream and is not fenced.
func (c *clusterNode) hostedHere(stream journal.StreamID) *clusterpb.Error {
	if err := c.check(); err != nil {
		return c.encodeError(err)
	}
	if c.owner(stream.String()) != c.self() {
		return &clusterpb.Error{Codes: []string{codeNotOwner}, Message: fmt.Sprintf("cluster: member %s does not host stream %s", c.self(), stream)}
	}
	return nil
}

// servedKey names an envelope being served: its sender's address and the
// sender's request ID.
type servedKey struct {
	from string
	id   uint64
}

func (c *clusterNode) cancelServed(k servedKey) {
	c.mu.Lock()
	cancel := c.running[k]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// startServed creates the context a request is served with and registers
// it for cancellation (CancelRequest); done releases both.
func (c *clusterNode) startServed(sender *actor.PID, requestID uint64, timeoutNanos int64, parent, state string) (context.Context, func()) {
	ctx, cancel := c.serveContext(timeoutNanos, parent, state)
	key := servedKey{sender.Address, requestID}
	c.mu.Lock()
	c.running[key] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.running, key)
		c.mu.Unlock()
		cancel()
	}
}

func (c *clusterNode) serveExecute(ctx context.Context, m *clusterpb.ExecuteRequest) *clusterpb.ExecuteReply {
	reply := &clusterpb.ExecuteReply{RequestId: m.RequestId}
	stream := streamFromPB(m.Stream)
	if e := c.hostedHere(stream); e != nil {
		reply.Error = e
		return reply
	}
	if c.node.Resolve(stream.Tag.Group()) == nil {
		// Not registered yet (the member is starting): the command is not
		// executed, and the caller may retry.
		reply.Error = c.encodeError(fmt.Errorf("%w: member %s has not registered aggregate %q yet; the command was not executed: retry", runtime.ErrNodeUnavailable, c.self(), stream.Tag.Group()))
		return reply
	}
	cmd, err := c.decodeCommand(m.Command)
	if err != nil {
		reply.Error = c.encodeError(err)
		return reply
	}
	res, err := c.node.Host.Execute(ctx, stream, actors.Command{Payload: cmd, Metadata: metadataFromPB(m.Metadata)})
	reply.Records = recordsToPB(res.Records)
	reply.Version = res.Version
	reply.Duplicate = res.Duplicate
	if err != nil {
		reply.Error = c.encodeError(err)
		return reply
	}
	if res.State != nil {
		if m := c.node.Resolve(stream.Tag.Group()); m != nil {
			data, err := m.EncodeState(res.State)
			if err != nil {
				reply.Error = c.encodeError(fmt.Errorf("cluster: the command on stream %s succeeded but its state could not be encoded for the calling member: %w", stream, err))
				return reply
			}
			reply.State = &clusterpb.Payload{Type: m.Name(), Data: data}
		}
	}
	return reply
}
