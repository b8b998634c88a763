package actors

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

const shardCount = 64

type shard struct {
	mu      sync.Mutex
	entries map[journal.StreamID]*entry
}

// entry is the host's record of one stream actor. draining is set (under the
// shard lock) when the actor is about to stop; from then on no message is
// sent to it, and requests wait for done and spawn a fresh actor.
type entry struct {
	pid      *actor.PID
	draining bool
	done     chan struct{}
	queued   atomic.Int64 // requests not yet taken or abandoned
	// shedAt, when positive, is the queue length (queued) at which new
	// commands are refused: the stream is shedding by queueing delay
	// (overload.go). Written by the actor, read by deliver.
	shedAt atomic.Int64
	// refused counts the commands refused by shedAt, and gaveUp the callers
	// whose context ended before their answer, since the actor last looked
	// (it swaps both to zero at each batch).
	refused atomic.Int64
	gaveUp  atomic.Int64
}

// hostHooks are the openings the package's tests use; Host.hooks is nil in
// production, so each is one nil check.
type hostHooks struct {
	// linger, when positive, replaces every completion linger's bound
	// (linger.go).
	linger time.Duration
	// now, when set, is the clock queue delays are measured with.
	now func() time.Time
	// strict makes a stream actor panic on a state transition the table
	// refuses (state.go), instead of logging it.
	strict bool
}

// Host runs the stream actors of one node: it owns the protoactor-go actor
// system, the node session (renewed by one goroutine every SessionTimeout/3,
// whatever the number of streams), and the map from stream to actor. Actors
// are spawned on first use and passivate when idle. All methods are safe for
// concurrent use.
type Host struct {
	cfg Config
	// hooks is nil in production; only the package's tests set it
	// (export_test.go).
	hooks *hostHooks
	// inlineAppend: the journal says its Append is in-process work
	// (journal.InlineAppender, as the in-memory journal does: no I/O,
	// network or timer), so the actors call it on their own goroutine
	// instead of handing it to ioPool and back: two goroutine hand-offs per
	// batch. A type embedding such a journal is not trusted with this (its
	// InlineAppend names the embedded journal, not itself) and keeps the I/O
	// path.
	inlineAppend bool
	system       *actor.ActorSystem
	seed         maphash.Seed
	shards       [shardCount]shard
	closed       atomic.Bool
	node         atomic.Pointer[journal.NodeSession]
	sem          chan struct{}
	tel          *telemetry

	// ctx bounds all I/O of the actors; cancelled at the end of Shutdown.
	ctx    context.Context
	cancel context.CancelFunc
	io     sync.WaitGroup // I/O tasks in flight
	ioPool *workerPool    // runs the actors' journal and snapshot calls
	mbPool *workerPool    // runs the actors' mailboxes (the dispatcher)

	renewStop chan struct{}
	renewDone chan struct{}
	shutdown  sync.Once
	resSeq    atomic.Uint64

	lease   leaseClock
	rw      rewinds
	limits  journal.Limits // the journal's, when it reports them
	pending atomic.Int64   // requests of all actors not yet taken or abandoned
	logs    logLimiter     // rate-limits logs of transient failures
	// renewFailures and renewLogged belong to the renewal loop.
	renewFailures int
	renewLogged   time.Time
}

// NewHost validates cfg, opens the node session (superseding a previous
// incarnation of the same NodeID) and starts its renewal.
func NewHost(ctx context.Context, cfg Config) (*Host, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	tel, err := newTelemetry(cfg.TracerProvider, cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("actors: creating instruments: %w", err)
	}
	opened := time.Now()
	node, err := cfg.Sessions.OpenNode(ctx, cfg.NodeID, cfg.SessionTimeout)
	if err != nil {
		return nil, fmt.Errorf("actors: opening the session of node %q: %w", cfg.NodeID, err)
	}
	logger := cfg.Logger
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(warnOnly{logger.Handler()}).With("component", "protoactor")
		}),
		actor.WithDeadLetterRequestLogging(false),
		// A message to a stopped actor (a late timer, a Confirm racing a
		// stop) is a dead letter; its throttle goroutine lives for this
		// interval, so keep it short for Shutdown to leave nothing behind.
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	h := &Host{
		cfg:       cfg,
		system:    system,
		seed:      maphash.MakeSeed(),
		sem:       make(chan struct{}, cfg.RecoveryConcurrency),
		tel:       tel,
		renewStop: make(chan struct{}),
		renewDone: make(chan struct{}),
		ioPool:    newWorkerPool(),
		mbPool:    newWorkerPool(),
	}
	for i := range h.shards {
		h.shards[i].entries = make(map[journal.StreamID]*entry)
	}
	if err := h.rw.init(cfg.Journal, tel.meter); err != nil {
		return nil, fmt.Errorf("actors: creating instruments: %w", err)
	}
	if l, ok := cfg.Journal.(journal.Limited); ok {
		h.limits = l.Limits()
	}
	if ia, ok := cfg.Journal.(journal.InlineAppender); ok {
		h.inlineAppend = ia.InlineAppend() == journal.Appender(cfg.Journal)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.lease.init(cfg.NodeID, cfg.SessionTimeout, opened)
	h.node.Store(&node)
	go h.renewLoop()
	return h, nil
}

// Node returns the current node session.
func (h *Host) Node() journal.NodeSession { return *h.node.Load() }

// ActiveActors returns the number of stream actors currently alive.
func (h *Host) ActiveActors() int {
	n := 0
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return n
}

func (h *Host) shardOf(stream journal.StreamID) *shard {
	var mh maphash.Hash
	mh.SetSeed(h.seed)
	mh.WriteString(stream.Partition)
	mh.WriteByte(0)
	mh.WriteString(string(stream.Tag))
	return &h.shards[mh.Sum64()%shardCount]
}

// deliver sends msg to the stream's actor, spawning it when absent and
// waiting for a draining actor to stop first.
func (h *Host) deliver(ctx context.Context, stream journal.StreamID, msg any) (*entry, error) {
	if err := h.lease.check(); err != nil {
		return nil, err
	}
	s := h.shardOf(stream)
	for {
		s.mu.Lock()
		if h.closed.Load() {
			s.mu.Unlock()
			return nil, ErrShutdown
		}
		e := s.entries[stream]
		if e == nil {
			var err error
			e, err = h.spawn(ctx, stream)
			if err != nil {
				s.mu.Unlock()
				return nil, err
			}
			s.entries[stream] = e
		}
		if e.draining {
			done := e.done
			s.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var st *reqStatus
		switch r := msg.(type) {
		case *commandReq:
			st = &r.reqStatus
		case *reserveReq:
			st = &r.reqStatus
		}
		if st != nil {
			_, command := msg.(*commandReq)
			if err := h.admit(stream, e, command); err != nil {
				s.mu.Unlock()
				return nil, err
			}
			st.queued, st.pending = &e.queued, &h.pending
		}
		h.system.Root.Send(e.pid, msg)
		s.mu.Unlock()
		return e, nil
	}
}

// admit counts a request in the stream's and the host's queues, or fails with
// ErrOverloaded when either is full or, for a command, when the stream sheds
// by queueing delay and already holds as many commands as it appends within
// the target. Called with the shard lock held, so the stream's bounds are
// exact; the host's may be exceeded by one per shard.
func (h *Host) admit(stream journal.StreamID, e *entry, command bool) error {
	n := e.queued.Load()
	if n >= int64(h.cfg.MaxQueue) {
		return fmt.Errorf("%w: stream %s has %d requests waiting (Config.MaxQueue = %d); nothing was queued: retry after a back-off, or spread the load over more streams", ErrOverloaded, stream, n, h.cfg.MaxQueue)
	}
	if at := e.shedAt.Load(); command && at > 0 && n >= at {
		e.refused.Add(1)
		return fmt.Errorf("%w: stream %s is shedding: commands waited over %s (QueueDelayTarget) for %s (QueueDelayInterval) and %d wait already; nothing was queued or decided: retry after a back-off",
			ErrOverloaded, stream, h.cfg.QueueDelayTarget, h.cfg.QueueDelayInterval, n)
	}
	if n := h.pending.Add(1); n > int64(h.cfg.MaxPending) {
		h.pending.Add(-1)
		return fmt.Errorf("%w: node %q has %d requests waiting over all streams (Config.MaxPending = %d); nothing was queued: retry after a back-off", ErrOverloaded, h.cfg.NodeID, n-1, h.cfg.MaxPending)
	}
	e.queued.Add(1)
	return nil
}

// spawn starts the actor of stream; called with the shard lock held.
func (h *Host) spawn(ctx context.Context, stream journal.StreamID) (*entry, error) {
	e := &entry{done: make(chan struct{})}
	a := &streamActor{host: h, stream: stream, entry: e, spawnedBy: trace.SpanContextFromContext(ctx)}
	if h.cfg.Resolve != nil {
		a.model = h.cfg.Resolve(stream.Tag.Group())
	}
	props := actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(h.dispatcher()))
	pid, err := h.system.Root.SpawnNamed(props, "stream/"+stream.String())
	if err != nil {
		return nil, fmt.Errorf("actors: spawning the actor of stream %s: %w", stream, err)
	}
	e.pid = pid
	return e, nil
}

// drain marks e draining and sends msg (a *drainMsg) as the last message the
// actor will receive. It reports false when e was already draining.
func (h *Host) drain(stream journal.StreamID, e *entry, msg *drainMsg) bool {
	s := h.shardOf(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.draining {
		return false
	}
	e.draining = true
	h.system.Root.Send(e.pid, msg)
	return true
}

// removed forgets a stopped actor and wakes requests waiting for it.
func (h *Host) removed(stream journal.StreamID, e *entry) {
	s := h.shardOf(stream)
	s.mu.Lock()
	if s.entries[stream] == e {
		delete(s.entries, stream)
	}
	s.mu.Unlock()
	close(e.done)
}

// send delivers an internal message straight to an actor's PID.
func (h *Host) send(pid *actor.PID, msg any) { h.system.Root.Send(pid, msg) }

// goIO runs fn on a pooled goroutine, tracked by Shutdown; after Shutdown
// closed the pool, fn is dropped (every actor has stopped by then).
func (h *Host) goIO(fn func()) {
	h.io.Add(1)
	if !h.ioPool.run(func() {
		defer h.io.Done()
		fn()
	}) {
		h.io.Done()
	}
}

// ioContext bounds one journal or snapshot call.
func (h *Host) ioContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(h.ctx, h.cfg.RequestTimeout)
}

// loseSession stops every actor with a session error.
func (h *Host) loseSession(cause error) {
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		for stream, e := range s.entries {
			if !e.draining {
				e.draining = true
				h.system.Root.Send(e.pid, &drainMsg{err: sessionLost(stream, cause)})
			}
		}
		s.mu.Unlock()
	}
}

// Shutdown passivates every actor (snapshot if due, release the lease), closes
// the node session and stops the actor system. Requests made after Shutdown
// started fail with ErrShutdown. When ctx ends first, the remaining actors'
// I/O is cancelled and Shutdown returns ctx's error after cleaning up.
func (h *Host) Shutdown(ctx context.Context) error {
	var err error
	h.shutdown.Do(func() { err = h.doShutdown(ctx) })
	return err
}

func (h *Host) doShutdown(ctx context.Context) error {
	var waits []chan struct{}
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		if i == 0 {
			h.closed.Store(true)
		}
		for _, e := range s.entries {
			if !e.draining {
				e.draining = true
				h.system.Root.Send(e.pid, &drainMsg{})
			}
			waits = append(waits, e.done)
		}
		s.mu.Unlock()
	}
	var errs []error
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			if len(errs) == 0 {
				errs = append(errs, fmt.Errorf("actors: shutdown did not finish passivating every actor in time; their remaining journal calls were cancelled: %w", ctx.Err()))
				h.cancel() // unblock the remaining I/O; the actors then stop
			}
			<-w
		}
	}
	close(h.renewStop)
	<-h.renewDone
	h.io.Wait()
	h.ioPool.close()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.RequestTimeout)
	if err := h.cfg.Sessions.CloseNode(cctx, *h.node.Load()); err != nil && !isSessionError(err) {
		errs = append(errs, fmt.Errorf("actors: closing the node session: %w", err))
	}
	cancel()
	h.cancel()
	h.system.Shutdown()
	h.mbPool.close()
	return errors.Join(errs...)
}

// Pending returns the number of commands and reservations sent to the
// stream's actor that it has not yet taken up (decided, granted or failed)
// and whose callers still wait; 0 when the stream has no active actor. It
// does not message the actor.
func (h *Host) Pending(stream journal.StreamID) int {
	stream = stream.Normalize()
	s := h.shardOf(stream)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[stream]; e != nil {
		return int(e.queued.Load())
	}
	return 0
}
