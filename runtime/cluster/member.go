package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"go.opentelemetry.io/otel/propagation"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/clusterpb"
	"github.com/scribe-es/scribe/internal/membership"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// streamKind is the cluster kind of stream grains: one identity per stream
// ("partition/tag"), activated on the member that hosts the stream. A grain
// forwards the envelopes it receives to the member's local stream actor.
const streamKind = "scribe-stream"

// repliesName is the name of each member's reply router actor.
const repliesName = "scribe-replies"

// maxRouteAttempts bounds how often one Execute is re-routed when its
// envelope was certainly not executed (not delivered, or the receiver no
// longer hosts the stream).
const maxRouteAttempts = 4

// fenceCheckInterval is how often a member compares its node session's
// incarnation with the one it joined with.
const fenceCheckInterval = 100 * time.Millisecond

// clusterNode is one membership of a Runtime in a cluster, under one node
// session incarnation: its own protoactor-go actor system (one member ID)
// with remoting, the cluster (disthash identity lookup), the reply router
// and the table of calls waiting for a reply. It ends when it is fenced (or
// shut down) and is never restarted: member replaces it by a new one.
type clusterNode struct {
	node   membership.Node
	cfg    Config
	log    *slog.Logger
	system *actor.ActorSystem
	cl     *cluster.Cluster
	// addr is this member's address (host:port), set once remoting runs;
	// grains may already serve requests then, so it is read atomically.
	addr atomic.Pointer[string]
	prop propagation.TraceContext

	commandsByName map[string]reflect.Type
	commandsByType map[reflect.Type]string
	codes          []ErrorCode
	byCode         map[string]error
	rebuild        map[string]func(string) error

	replies *actor.PID
	seq     atomic.Uint64
	mu      sync.Mutex
	calls   map[uint64]*call
	held    map[uint64]heldReservation       // reservations granted to other members
	running map[servedKey]context.CancelFunc // envelopes being served, by sender and request
	// abandoned are reservation requests whose caller gave up before the
	// reply; a grant that still arrives is cancelled.
	abandoned map[uint64]abandonedReserve
	closed    bool
	serving   sync.WaitGroup

	members    atomic.Pointer[cluster.Rendezvous]
	addrs      atomic.Pointer[[]string]
	joined     chan struct{}
	joinOnce   sync.Once
	topoSub    *eventstream.Subscription
	generation uint64 // the node session incarnation the member joined with

	fenced    chan struct{}
	fenceOnce sync.Once
	fenceErr  atomic.Pointer[error]
	stop      chan struct{}
	watchDone chan struct{}
	stopOnce  sync.Once
	watching  bool // watchFence runs (set before New returns)
}

// call is an envelope waiting for its reply.
type call struct {
	reply  chan any // buffered 1: a reply message, errUndelivered or errMemberLeft
	target *actor.PID
}

// Reasons a call ends without a reply.
var (
	errUndelivered = errors.New("runtime: the envelope was not delivered")
	errMemberLeft  = errors.New("runtime: the member hosting the stream left the cluster")
)

func startCluster(ctx context.Context, node membership.Node, cfg Config) (c *clusterNode, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	built, err := cfg.Provider.Build()
	if err != nil {
		return nil, err
	}
	if built == nil || built.Provider == nil {
		return nil, fmt.Errorf("cluster: Config.Provider (%T) built no provider", cfg.Provider)
	}
	prov := built.Provider
	logger := node.Logger
	c = &clusterNode{
		node:           node,
		cfg:            cfg,
		log:            logger.With("component", "scribe-cluster"),
		commandsByName: map[string]reflect.Type{},
		commandsByType: map[reflect.Type]string{},
		byCode:         map[string]error{},
		rebuild:        map[string]func(string) error{},
		calls:          map[uint64]*call{},
		held:           map[uint64]heldReservation{},
		running:        map[servedKey]context.CancelFunc{},
		abandoned:      map[uint64]abandonedReserve{},
		joined:         make(chan struct{}),
		fenced:         make(chan struct{}),
		stop:           make(chan struct{}),
		watchDone:      make(chan struct{}),
		generation:     node.Host.Node().Incarnation,
	}
	for _, ct := range cfg.Commands {
		c.commandsByName[ct.name], c.commandsByType[ct.typ] = ct.typ, ct.name
	}
	c.codes = append(builtinErrorCodes(), cfg.Errors...)
	for _, ec := range c.codes {
		c.byCode[ec.Code] = ec.Err
		if ec.Rebuild != nil {
			c.rebuild[ec.Code] = ec.Rebuild
		}
	}
	c.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(errorOnly{logger.Handler()}).With("component", "protoactor-cluster")
		}),
		actor.WithDeadLetterRequestLogging(false),
		// A dead letter (a reply to a caller that stopped waiting, a message
		// to a passivated grain) starts a throttle goroutine that lives for
		// this interval: keep it short so Shutdown leaves nothing behind.
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	grain := actor.PropsFromProducer(func() actor.Actor { return &streamGrain{c: c} })
	ccfg := cluster.Configure(cfg.Name, prov, disthash.New(),
		remote.Configure(cfg.Host, cfg.Port),
		cluster.WithKinds(cluster.NewKind(streamKind, grain)))
	c.cl = cluster.New(c.system, ccfg)
	c.topoSub = c.system.EventStream.Subscribe(c.onEvent)
	if err := c.startMember(); err != nil {
		// The remote endpoint and gossip may already run: stop them too, so
		// the port and their goroutines are released.
		c.leave()
		return nil, err
	}
	c.setSelf(c.system.Address())
	c.watching = true
	go c.watchFence()
	// Spawned once remoting runs, so its PID carries the member's address.
	c.replies, err = c.system.Root.SpawnNamed(actor.PropsFromFunc(c.receiveReply), repliesName)
	if err != nil {
		c.shutdown(runtime.ErrShutdown)
		return nil, fmt.Errorf("runtime: starting the cluster reply router: %w", err)
	}
	timer := time.NewTimer(cfg.JoinTimeout)
	defer timer.Stop()
	select {
	case <-c.joined:
	case <-timer.C:
		c.shutdown(runtime.ErrShutdown)
		return nil, fmt.Errorf("runtime: member %s did not see itself in cluster %q's topology within %s; check Config.Provider (automanaged.Provider.Peers must list this member's health endpoint) and the ports", c.self(), cfg.Name, cfg.JoinTimeout)
	case <-ctx.Done():
		c.shutdown(runtime.ErrShutdown)
		return nil, fmt.Errorf("runtime: joining cluster %q: %w", cfg.Name, ctx.Err())
	}
	c.log.Info("joined the cluster", "cluster", cfg.Name, "address", c.self(), "node", node.NodeID)
	return c, nil
}

// self is this member's address ("" before remoting runs).
func (c *clusterNode) self() string {
	if a := c.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// setSelf records this member's address once remoting runs.
func (c *clusterNode) setSelf(addr string) { c.addr.Store(&addr) }

// startMember starts remoting, the identity lookup and the provider; they
// report some failures (a port in use) by panicking.
func (c *clusterNode) startMember() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("runtime: starting cluster member on %s:%d failed: %v (is the port free and the provider reachable?)", c.cfg.Host, c.cfg.Port, r)
		}
	}()
	c.cl.StartMember()
	return nil
}

// shutdown leaves the cluster: it stops accepting envelopes, waits for the
// envelopes being served, fails the calls still waiting with reason and
// stops the actor system. The Runtime then shuts its stream actors down
// (or, on a rejoin, the member discards them).
func (c *clusterNode) shutdown(reason error) {
	c.stopOnce.Do(func() {
		close(c.stop)
		if c.watching {
			<-c.watchDone
		}
		c.mu.Lock()
		c.closed = true
		for id, cl := range c.calls {
			delete(c.calls, id)
			cl.reply <- reason
		}
		c.mu.Unlock()
		c.serving.Wait()
		c.releaseAllHeld()
		c.system.EventStream.Unsubscribe(c.topoSub)
		c.leave()
	})
}

// leave stops the provider (others see this member leave), the identity
// lookup and the remote endpoint, then the actor system.
// Each step runs even if an earlier one fails (after a failed start, some
// parts never started).
func (c *clusterNode) leave() {
	step := func(name string, f func()) {
		defer func() {
			if r := recover(); r != nil {
				c.log.Warn("leaving the cluster reported a failure", "step", name, "panic", r)
			}
		}()
		f()
	}
	step("provider", func() { _ = c.cl.Config.ClusterProvider.Shutdown(true) })
	step("identity lookup", func() {
		if c.cl.IdentityLookup != nil {
			c.cl.IdentityLookup.Shutdown()
		}
	})
	step("gossip", func() { c.cl.Gossip.Shutdown() })
	step("remote", func() {
		if c.cl.Remote != nil {
			c.cl.Remote.Shutdown(false)
		}
	})
	step("actor system", func() { c.system.Shutdown() })
}

// onEvent follows the cluster topology: it keeps the rendezvous table that
// says which member hosts a stream, and fails the calls waiting on members
// that left.
func (c *clusterNode) onEvent(ev any) {
	topo, ok := ev.(*cluster.ClusterTopology)
	if !ok {
		return
	}
	rdv := cluster.NewRendezvous()
	rdv.UpdateMembers(topo.Members)
	addrs := make([]string, 0, len(topo.Members))
	for _, m := range topo.Members {
		addrs = append(addrs, m.Address())
	}
	slices.Sort(addrs)
	c.addrs.Store(&addrs)
	c.members.Store(rdv)
	self := false
	for _, m := range topo.Members {
		if m.Address() == c.system.Address() {
			self = true
			c.joinOnce.Do(func() { close(c.joined) })
		}
	}
	select {
	case <-c.joined:
		if !self {
			// The others dropped this member (it missed their health checks)
			// and block its member ID for good: this membership can no
			// longer host streams. The member rejoins with a new one.
			c.fence(fmt.Errorf("%w: member %s (node %q) was removed from cluster %q (its provider stopped listing it: it missed the others' health checks, or its pod stopped running); it is rejoining the cluster, and executed nothing meanwhile",
				runtime.ErrLeaseLost, c.system.Address(), c.node.NodeID, c.cfg.Name))
		}
	default:
	}
	if self {
		c.serveAsync(c.handOver)
	}
	for _, m := range topo.Left {
		addr := m.Address()
		c.log.Warn("member left the cluster", "member", addr)
		c.failCalls(func(cl *call) bool { return cl.target.Address == addr }, errMemberLeft)
		c.mu.Lock()
		for id, ab := range c.abandoned {
			if ab.pid.Address == addr {
				delete(c.abandoned, id)
			}
		}
		c.mu.Unlock()
		c.serveAsync(func() { c.releaseHeldBy(addr) })
	}
}

// handOver passivates the local actors of streams that another member
// hosts now (a member joined), so their new host acquires their leases at
// once instead of waiting for them to go idle.
func (c *clusterNode) handOver() {
	moved := 0
	for _, stream := range c.node.Host.Streams() {
		if c.owner(stream.String()) != c.self() && c.node.Host.Passivate(stream) {
			moved++
		}
	}
	if moved > 0 {
		c.log.Info("handed streams over to their new hosts", "streams", moved)
	}
}

func (c *clusterNode) failCalls(match func(*call) bool, reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cl := range c.calls {
		if match(cl) {
			delete(c.calls, id)
			cl.reply <- reason
		}
	}
}

// watchFence ends this membership when its node session was lost (the
// host opened a new incarnation): the cluster has presumed it dead and
// other members may host its streams, so it must not keep serving them.
// The member (see member) then leaves and rejoins with the new incarnation;
// a twin node ID (journal.ErrNodeSuperseded) ends it for good.
func (c *clusterNode) watchFence() {
	defer close(c.watchDone)
	t := time.NewTicker(fenceCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if err := c.node.Host.Ready(); errors.Is(err, journal.ErrNodeSuperseded) {
			c.fence(fmt.Errorf("%w: %w", runtime.ErrNodeFenced, err))
			return
		}
		if c.check() != nil {
			return
		}
	}
}

// check returns the error this membership's calls fail with, nil while it
// serves. A membership serves only under the node session incarnation it
// joined with: on finding another one it fences itself at once, so no
// request is executed in the window before watchFence notices.
func (c *clusterNode) check() error {
	if err := c.fenceError(); err != nil {
		return err
	}
	if c.node.Host.Node().Incarnation != c.generation {
		c.fence(fmt.Errorf("%w: node %q lost its node session (incarnation %d; paused or cut off from the database past the session timeout), so the cluster may host its streams elsewhere; this member is rejoining the cluster with a new incarnation, and executed nothing meanwhile",
			runtime.ErrLeaseLost, c.node.NodeID, c.generation))
		return c.fenceError()
	}
	return nil
}

// fence ends this membership: Execute fails with err from now on, Fenced's
// channel closes, and the provider stops announcing it (the others drop it
// from their topology). err matches runtime.ErrLeaseLost when the member
// will rejoin, runtime.ErrNodeFenced when it stays out for good.
func (c *clusterNode) fence(err error) {
	c.fenceOnce.Do(func() {
		c.fenceErr.Store(&err)
		close(c.fenced)
		go func() {
			defer func() { _ = recover() }()
			_ = c.cl.Config.ClusterProvider.Shutdown(false)
		}()
	})
}

func (c *clusterNode) fenceError() error {
	if p := c.fenceErr.Load(); p != nil {
		return *p
	}
	return nil
}

// owner returns the address of the member hosting stream, "" when the
// topology is empty.
func (c *clusterNode) owner(identity string) string {
	rdv := c.members.Load()
	if rdv == nil {
		return ""
	}
	return rdv.GetByClusterIdentity(cluster.NewClusterIdentity(identity, streamKind))
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

// pid returns the grain of identity, activating it on its member.
func (c *clusterNode) pid(identity string) *actor.PID {
	if p, ok := c.cl.PidCache.Get(identity, streamKind); ok {
		return p
	}
	p := c.cl.Get(identity, streamKind)
	if p != nil {
		c.cl.PidCache.Set(identity, streamKind, p)
	}
	return p
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
		return nil, runtime.ErrShutdown
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
		if errors.Is(err, runtime.ErrShutdown) || errors.Is(err, c.fenceError()) {
			// Never sent: this membership ended first.
			return actors.Result{}, false, err
		}
		return actors.Result{}, false, fmt.Errorf("runtime: the context ended while member %s executed the command on stream %s; whether its events were stored is unknown (execute it again with the same idempotency key to find out): %w (%w)", pid.Address, stream, err, journal.ErrOutcomeUnknown)
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
		return actors.Result{}, false, fmt.Errorf("runtime: unexpected reply %T from member %s", r, pid.Address)
	}
}

func (c *clusterNode) resultFromPB(stream journal.StreamID, from string, r *clusterpb.ExecuteReply) (actors.Result, bool, error) {
	res := actors.Result{Records: recordsFromPB(r.Records), Version: r.Version, Duplicate: r.Duplicate}
	if r.State != nil {
		if m := c.node.Model(stream.Tag.Group()); m != nil {
			st, err := m.DecodeState(r.State.Data)
			if err != nil {
				return res, false, fmt.Errorf("runtime: decoding the state of stream %s sent by member %s: %w", stream, from, err)
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
		return &clusterpb.Error{Codes: []string{codeNotOwner}, Message: fmt.Sprintf("runtime: member %s does not host stream %s", c.self(), stream)}
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
	if c.node.Model(stream.Tag.Group()) == nil {
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
		if m := c.node.Model(stream.Tag.Group()); m != nil {
			data, err := m.EncodeState(res.State)
			if err != nil {
				reply.Error = c.encodeError(fmt.Errorf("runtime: the command on stream %s succeeded but its state could not be encoded for the calling member: %w", stream, err))
				return reply
			}
			reply.State = &clusterpb.Payload{Type: m.Name(), Data: data}
		}
	}
	return reply
}

func (c *clusterNode) encodeCommand(cmd any) (*clusterpb.Payload, error) {
	typ := reflect.TypeOf(cmd)
	name, ok := c.commandsByType[typ]
	if !ok {
		return nil, fmt.Errorf("%w: command type %v is not listed in cluster.Config.Commands, so it cannot be sent to the member hosting its stream; add cluster.Command[%v](\"<name>\")", runtime.ErrUnknownCommand, typ, typ)
	}
	data, err := c.node.Codec.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("runtime: encoding command %q for another member: %w", name, err)
	}
	return &clusterpb.Payload{Type: name, Data: data}, nil
}

func (c *clusterNode) decodeCommand(p *clusterpb.Payload) (any, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: an envelope arrived without a command", runtime.ErrUnknownCommand)
	}
	typ, ok := c.commandsByName[p.Type]
	if !ok {
		return nil, fmt.Errorf("%w: command %q is not listed in this member's cluster.Config.Commands; every member must list the same commands", runtime.ErrUnknownCommand, p.Type)
	}
	ptr := reflect.New(typ)
	if err := c.node.Codec.Unmarshal(p.Data, ptr.Interface()); err != nil {
		return nil, fmt.Errorf("runtime: decoding command %q from another member: %w", p.Type, err)
	}
	return ptr.Elem().Interface(), nil
}

// errorOnly drops protoactor-go's cluster records below Error: membership
// changes are reported by Scribe's own logs.
type errorOnly struct{ slog.Handler }

func (w errorOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && w.Handler.Enabled(ctx, l)
}

func (w errorOnly) WithAttrs(as []slog.Attr) slog.Handler { return errorOnly{w.Handler.WithAttrs(as)} }
func (w errorOnly) WithGroup(n string) slog.Handler       { return errorOnly{w.Handler.WithGroup(n)} }

func (c *clusterNode) memberAddrs() []string {
	p := c.addrs.Load()
	if p == nil {
		return nil
	}
	return slices.Clone(*p)
}
