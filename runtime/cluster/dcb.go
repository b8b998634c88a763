package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/clusterpb"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/tagconsistency"
)

// clusterOwners reserves each tag stream at the member hosting it. A remote
// reservation carries the hosting actor's lease, version, last position and
// state (encoded with the aggregate's state codec), never its records: the
// executor folds from the journal or from the states. If the caller
// abandons or loses a granted remote reservation, the hosting actor cancels
// it after Config.ReservationHold, or at once when the caller's member
// leaves the cluster.
type clusterOwners struct{ c *clusterNode }

// remoteGrant is the Grantor of a reservation granted by the stream actor on
// another member; the membership that reserved it ends it.
type remoteGrant struct {
	node   *clusterNode
	pid    *actor.PID
	stream journal.StreamID
	id     uint64 // the reservation's ID on the hosting member
}

func (o clusterOwners) Reserve(ctx context.Context, stream journal.StreamID) (*tagconsistency.Reservation, error) {
	c := o.c
	stream = stream.Normalize()
	identity := stream.String()
	for attempt := 1; ; attempt++ {
		if err := c.check(); err != nil {
			return nil, err
		}
		owner := c.owner(identity)
		switch owner {
		case "":
			return nil, fmt.Errorf("%w: no member of cluster %q hosts streams right now (stream %s); retry when members have joined", runtime.ErrNodeUnavailable, c.cfg.Name, stream)
		case c.self():
			return c.localOwners().Reserve(ctx, stream)
		}
		r, retry, err := o.remoteReserve(ctx, stream)
		if !retry || attempt >= maxRouteAttempts || ctx.Err() != nil {
			return r, err
		}
	}
}

func (o clusterOwners) remoteReserve(ctx context.Context, stream journal.StreamID) (*tagconsistency.Reservation, bool, error) {
	c := o.c
	identity := stream.String()
	pid := c.pid(identity)
	if pid == nil {
		return nil, false, fmt.Errorf("%w: the member hosting stream %s did not activate it; nothing was reserved: retry", runtime.ErrNodeUnavailable, stream)
	}
	id := c.seq.Add(1)
	req := &clusterpb.ReserveRequest{
		RequestId:    id,
		Stream:       &clusterpb.Stream{Partition: stream.Partition, Tag: string(stream.Tag)},
		TimeoutNanos: int64(remoteTimeout(ctx, c.node.ReservationTimeout)),
	}
	req.TraceParent, req.TraceState = c.traceContext(ctx)
	r, err := c.send(ctx, pid, id, req)
	if err != nil {
		// A grant that still arrives is cancelled by the reply router.
		c.mu.Lock()
		if !c.closed {
			c.abandoned[id] = abandonedReserve{pid: pid, stream: req.Stream}
		}
		c.mu.Unlock()
		return nil, false, err
	}
	switch r := r.(type) {
	case *clusterpb.ReserveReply:
		if r.Error != nil {
			if hasCode(r.Error, codeNotOwner) {
				c.cl.PidCache.Remove(identity, streamKind)
				return nil, true, fmt.Errorf("%w: member %s no longer hosts stream %s; nothing was reserved: retry", runtime.ErrNodeUnavailable, pid.Address, stream)
			}
			return nil, false, c.decodeError(r.Error, pid.Address)
		}
		res, err := c.reservationFromPB(ctx, stream, pid, r)
		if err != nil {
			return nil, false, err
		}
		return res, false, nil
	case error:
		switch {
		case errors.Is(r, errUndelivered):
			c.cl.PidCache.Remove(identity, streamKind)
			return nil, true, fmt.Errorf("%w: the reservation of stream %s could not be delivered to member %s: retry", runtime.ErrNodeUnavailable, stream, pid.Address)
		case errors.Is(r, errMemberLeft):
			c.cl.PidCache.Remove(identity, streamKind)
			return nil, false, fmt.Errorf("%w: member %s left the cluster while reserving stream %s: retry", runtime.ErrNodeUnavailable, pid.Address, stream)
		}
		return nil, false, r
	}
	return nil, false, fmt.Errorf("runtime: unexpected reply %T from member %s", r, pid.Address)
}

// reservationFromPB is the reservation r granted by the member at pid; its
// state is decoded with the aggregate's state codec. With reservationToPB it
// is the only conversion between a reservation and its wire form.
func (c *clusterNode) reservationFromPB(ctx context.Context, stream journal.StreamID, pid *actor.PID, r *clusterpb.ReserveReply) (*tagconsistency.Reservation, error) {
	res := &tagconsistency.Reservation{
		Stream:  stream,
		Version: r.Version,
		Grantor: &remoteGrant{node: c, pid: pid, stream: stream, id: r.ReservationId},
	}
	if r.Lease != nil {
		res.Lease = journal.Lease{Stream: stream, NodeID: r.Lease.NodeId, Incarnation: r.Lease.Incarnation, Epoch: r.Lease.Epoch}
	}
	if r.LastPosition != nil {
		res.LastPosition = journal.Position{Commit: r.LastPosition.Commit, Seq: r.LastPosition.Seq}
	}
	if r.State != nil {
		if m := c.node.Resolve(stream.Tag.Group()); m != nil {
			st, err := m.DecodeState(r.State.Data)
			if err != nil {
				_ = res.Grantor.Cancel(context.WithoutCancel(ctx), nil)
				return nil, fmt.Errorf("runtime: decoding the state of stream %s sent by member %s: %w", stream, pid.Address, err)
			}
			res.State = st
		}
	}
	return res, nil
}

// reservationToPB fills reply with the reservation r granted here, its state
// encoded with the aggregate's state codec.
func (c *clusterNode) reservationToPB(r *tagconsistency.Reservation, reply *clusterpb.ReserveReply) error {
	if r.State != nil {
		if mod := c.node.Resolve(r.Stream.Tag.Group()); mod != nil {
			data, err := mod.EncodeState(r.State)
			if err != nil {
				return fmt.Errorf("runtime: encoding the state of stream %s for the reserving member: %w", r.Stream, err)
			}
			reply.State = &clusterpb.Payload{Type: mod.Name(), Data: data}
		}
	}
	reply.Lease = &clusterpb.Lease{NodeId: r.Lease.NodeID, Incarnation: r.Lease.Incarnation, Epoch: r.Lease.Epoch}
	reply.Version = r.Version
	reply.LastPosition = &clusterpb.Position{Commit: r.LastPosition.Commit, Seq: r.LastPosition.Seq}
	return nil
}

func (g *remoteGrant) Confirm(ctx context.Context, records []journal.Record) error {
	return g.end(ctx, &clusterpb.EndReservationRequest{Confirm: true, Records: recordsToPB(records)})
}

func (g *remoteGrant) Cancel(ctx context.Context, cause error) error {
	req := &clusterpb.EndReservationRequest{}
	if cause != nil {
		req.CancelCause = g.node.encodeError(cause)
	}
	return g.end(ctx, req)
}

func (g *remoteGrant) end(ctx context.Context, req *clusterpb.EndReservationRequest) error {
	c, stream, pid := g.node, g.stream, g.pid
	id := c.seq.Add(1)
	req.RequestId = id
	req.Stream = &clusterpb.Stream{Partition: stream.Partition, Tag: string(stream.Tag)}
	req.ReservationId = g.id
	req.TimeoutNanos = int64(remoteTimeout(ctx, c.node.RequestTimeout))
	r, err := c.send(ctx, pid, id, req)
	if err != nil {
		return fmt.Errorf("runtime: ending the reservation of stream %s on member %s: %w", stream, pid.Address, err)
	}
	switch r := r.(type) {
	case *clusterpb.EndReservationReply:
		if r.Error != nil {
			return c.decodeError(r.Error, pid.Address)
		}
		return nil
	case error:
		return fmt.Errorf("%w: ending the reservation of stream %s on member %s: %w (%w)", runtime.ErrNodeUnavailable, stream, pid.Address, r, tagconsistency.ErrReservationLost)
	}
	return fmt.Errorf("runtime: unexpected reply %T from member %s", r, pid.Address)
}

// heldReservation is a reservation this member granted to another member.
type heldReservation struct {
	r      *tagconsistency.Reservation
	holder string // the address of the member holding it
}

func (c *clusterNode) localOwners() tagconsistency.TagOwners {
	return c.node.Host
}

// abandonedReserve is a reservation request whose caller gave up.
type abandonedReserve struct {
	pid    *actor.PID
	stream *clusterpb.Stream
}

func (c *clusterNode) serveReserve(ctx context.Context, sender *actor.PID, m *clusterpb.ReserveRequest) *clusterpb.ReserveReply {
	reply := &clusterpb.ReserveReply{RequestId: m.RequestId}
	stream := streamFromPB(m.Stream)
	if e := c.hostedHere(stream); e != nil {
		reply.Error = e
		return reply
	}
	r, err := c.localOwners().Reserve(ctx, stream)
	if err != nil {
		reply.Error = c.encodeError(err)
		return reply
	}
	if err := c.reservationToPB(r, reply); err != nil {
		_ = r.Grantor.Cancel(context.Background(), nil)
		reply.Error = c.encodeError(err)
		return reply
	}
	id := c.seq.Add(1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = r.Grantor.Cancel(context.Background(), nil)
		reply.Error = c.encodeError(actors.ErrShutdown)
		return reply
	}
	c.held[id] = heldReservation{r: r, holder: sender.Address}
	c.mu.Unlock()
	if !slices.Contains(c.memberAddrs(), sender.Address) {
		// The holder left while the reservation waited: nobody will end it.
		c.cancelHeldBy(sender.Address)
		reply.Error = c.encodeError(fmt.Errorf("%w: member %s left the cluster before its reservation of %s was granted", runtime.ErrNodeUnavailable, sender.Address, stream))
		return reply
	}
	reply.ReservationId = id
	return reply
}

func (c *clusterNode) serveEndReservation(m *clusterpb.EndReservationRequest) *clusterpb.EndReservationReply {
	reply := &clusterpb.EndReservationReply{RequestId: m.RequestId}
	c.mu.Lock()
	h, ok := c.held[m.ReservationId]
	delete(c.held, m.ReservationId)
	c.mu.Unlock()
	if !ok {
		reply.Error = c.encodeError(fmt.Errorf("%w: member %s holds no reservation %d of stream %s", tagconsistency.ErrReservationLost, c.self(), m.ReservationId, streamFromPB(m.Stream)))
		return reply
	}
	ctx, cancel := c.serveContext(m.TimeoutNanos, "", "")
	defer cancel()
	var err error
	if m.Confirm {
		err = h.r.Grantor.Confirm(ctx, recordsFromPB(m.Records))
	} else {
		var cause error
		if m.CancelCause != nil {
			cause = c.decodeError(m.CancelCause, "")
		}
		err = h.r.Grantor.Cancel(ctx, cause)
	}
	if err != nil {
		reply.Error = c.encodeError(err)
	}
	return reply
}

// cancelHeldBy cancels the reservations granted to a member that left.
func (c *clusterNode) cancelHeldBy(addr string) {
	var rs []*tagconsistency.Reservation
	c.mu.Lock()
	for id, h := range c.held {
		if h.holder == addr {
			rs = append(rs, h.r)
			delete(c.held, id)
		}
	}
	c.mu.Unlock()
	for _, r := range rs {
		ctx, cancel := context.WithTimeout(context.Background(), c.node.RequestTimeout)
		_ = r.Grantor.Cancel(ctx, errMemberLeft)
		cancel()
	}
}

// cancelAllHeld cancels every reservation this member granted (shutdown).
func (c *clusterNode) cancelAllHeld() {
	c.mu.Lock()
	held := c.held
	c.held = map[uint64]heldReservation{}
	c.mu.Unlock()
	for _, h := range held {
		ctx, cancel := context.WithTimeout(context.Background(), c.node.RequestTimeout)
		_ = h.r.Grantor.Cancel(ctx, nil)
		cancel()
	}
}
