package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
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
	"github.com/scribe-es/scribe/runtime/internal/membership"
)

// streamKind is the cluster kind of stream grains: one identity per stream
// ("partition/tag"), activated on the member that hosts the stream. A grain
// forwards the envelopes it receives to the member's local stream actor.
const streamKind = "scribe-stream"

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

// Reasons a call ends without a reply.
var (
	errUndelivered = errors.New("cluster: the envelope was not delivered")
	errMemberLeft  = errors.New("cluster: the member hosting the stream left the cluster")
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
		c.shutdown(actors.ErrShutdown)
		return nil, fmt.Errorf("cluster: starting the cluster reply router: %w", err)
	}
	timer := time.NewTimer(cfg.JoinTimeout)
	defer timer.Stop()
	select {
	case <-c.joined:
	case <-timer.C:
		c.shutdown(actors.ErrShutdown)
		return nil, fmt.Errorf("cluster: member %s did not see itself in cluster %q's topology within %s; check Config.Provider (automanaged.Provider.Peers must list this member's health endpoint) and the ports", c.self(), cfg.Name, cfg.JoinTimeout)
	case <-ctx.Done():
		c.shutdown(actors.ErrShutdown)
		return nil, fmt.Errorf("cluster: joining cluster %q: %w", cfg.Name, ctx.Err())
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
			err = fmt.Errorf("cluster: starting cluster member on %s:%d failed: %v (is the port free and the provider reachable?)", c.cfg.Host, c.cfg.Port, r)
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
		c.cancelAllHeld()
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
