package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/membership"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// Limits are the stream engine's timeouts and bounds (actors.Limits: each
// field's meaning there); Config embeds them, and a zero field takes its value
// in DefaultLimits.
type Limits = actors.Limits

// DefaultLimits returns the values zero Limits fields take.
func DefaultLimits() Limits { return actors.DefaultLimits() }

// Config configures a Runtime. Only Journal is required; every other zero
// field takes the default its comment names.
type Config struct {
	// Journal stores the events. Required.
	Journal journal.Journal
	// Sessions grants the node session and the stream leases that fence every
	// append. Default: Journal, when it implements journal.Sessions (both
	// memory.Journal and the Postgres journal do).
	Sessions journal.Sessions
	// Snapshots stores state snapshots. Default nil: no snapshots (streams are
	// replayed from version 1 on activation).
	Snapshots snapshots.Store
	// SnapshotPolicy says when snapshots are saved. Default nil:
	// snapshots.DefaultPolicy() (every 100 events and on passivation).
	SnapshotPolicy *snapshots.Policy
	// NodeID identifies this runtime across restarts: a runtime restarted with
	// the same NodeID takes over its previous incarnation's streams at once,
	// while other node IDs wait for the session timeout. Default: the host
	// name (os.Hostname). Set it explicitly when one host runs several
	// runtimes on the same journal: two live runtimes with one NodeID fence
	// each other.
	NodeID string
	// Logger receives operational logs. Default: discard.
	Logger *slog.Logger
	// OnStoreRewound, when set, is called once for every stream the runtime
	// finds behind what it had acknowledged (an asynchronous standby
	// promoted, a backup restored; see StoreRewind), after the ERROR log and
	// before the stream serves again. It runs on the stream's actor: it must
	// return quickly and must not call the runtime. Default: nil (the loss
	// is still logged, counted and summarised by Rewinds).
	OnStoreRewound func(StoreRewind)
	// TracerProvider receives spans (scribe.stream.execute,
	// scribe.stream.decide, scribe.stream.append, scribe.stream.recover,
	// scribe.stream.reserve, scribe.dcb.*). Default: no-op. The runtime
	// never uses the global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider receives metrics (see package actors). Default: no-op.
	MeterProvider metric.MeterProvider
	// Limits bound the stream actors: session, open, idle, request and
	// reservation timeouts, batch and queue sizes, queue-delay shedding.
	Limits
	// Codec encodes event payloads (to JSON objects) and snapshot states.
	// Default JSONCodec.
	Codec Codec
	// KeyStore keeps the data keys that seal the personal fields of event
	// types registered WithPersonalData, and destroys them on Erase. With a
	// KeyStore, the snapshots of streams holding personal data are sealed as
	// a whole under their subjects' keys (and unusable once one of them is
	// erased: the stream is then replayed). Default nil: registering an
	// event type with personal data fails.
	KeyStore erasure.KeyStore
	// ErasurePollInterval is how often the runtime reads the journal for
	// erasure records made elsewhere (another runtime, `scribe erase`), to
	// drop what it holds of the erased subjects; it bounds how long another
	// runtime's erasure takes to reach this one. Only with a KeyStore.
	// Default DefaultErasurePollInterval (1 s).
	ErasurePollInterval time.Duration
	// KeyCacheSize bounds the data keys, erasures and stream bindings this
	// runtime caches (each). Cached keys are dropped when the subject's
	// erasure record reaches the runtime through the journal. Default
	// DefaultKeyCacheSize (10000).
	KeyCacheSize int
	// Replica serves State's reads instead of Journal: a read replica of the
	// journal's database (postgres.NewReplica). Commands, their actors and
	// every append still use Journal. A State read from the replica is as
	// current as its replay; with AtLeastVersion it waits for the replica up
	// to ReplicaWait, then reads Journal. Default nil: State reads Journal.
	Replica journal.Journal
	// ReplicaWait bounds how long State with AtLeastVersion waits for Replica
	// to reach the version before it reads Journal instead. Default
	// DefaultReplicaWait (2 s).
	ReplicaWait time.Duration
	// Cluster makes the runtime a member of a cluster: a *cluster.Config
	// from package runtime/cluster. Default nil: a single node, no cluster
	// code on any path.
	Cluster Cluster
}

// Runtime is Scribe's entry point: register aggregates and event types, then
// Execute commands; each stream's commands are decided by its single actor.
// All methods and the generic functions taking a *Runtime are safe for
// concurrent use.
type Runtime struct {
	cfg     Config
	reg     *registry
	host    *actors.Host
	cluster membership.Member // nil in single-node mode
	// erasures follows the journal's erasure records; nil without a
	// KeyStore.
	erasures *erasureWatcher
}

// New validates cfg, applies its defaults, opens the node session and
// starts the actor system. Call Shutdown when done.
//
// New fails fast on configuration: when the journal cannot be reached or
// is not usable (a Postgres schema not migrated) while New opens the node
// session, the error matches ErrConfiguration and is not retryable
// (IsRetryable false); it says what to check. After New returned, the
// same database failure is an outage: Execute reports it retryable.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if cfg.Journal == nil {
		return nil, errors.New("runtime: Config.Journal is nil; pass memory.New() or a Postgres journal (postgres.NewJournal)")
	}
	if cfg.Sessions == nil {
		s, ok := cfg.Journal.(journal.Sessions)
		if !ok {
			return nil, fmt.Errorf("runtime: Config.Sessions is nil and the journal (%T) does not implement journal.Sessions; pass the journal's session service", cfg.Journal)
		}
		cfg.Sessions = s
	}
	if cfg.NodeID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return nil, fmt.Errorf("runtime: Config.NodeID is empty and the host name is unavailable (%v); set a stable NodeID", err)
		}
		cfg.NodeID = host
	}
	if cfg.SnapshotPolicy == nil {
		p := snapshots.DefaultPolicy()
		cfg.SnapshotPolicy = &p
	}
	if cfg.Codec == nil {
		cfg.Codec = JSONCodec{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReplicaWait < 0 {
		return nil, fmt.Errorf("runtime: Config.ReplicaWait is %s; use 0 for the default (%s) or a positive duration", cfg.ReplicaWait, DefaultReplicaWait)
	}
	if cfg.ReplicaWait == 0 {
		cfg.ReplicaWait = DefaultReplicaWait
	}
	if cfg.ErasurePollInterval < 0 {
		return nil, fmt.Errorf("runtime: Config.ErasurePollInterval is %s; use 0 for the default (%s) or a positive interval", cfg.ErasurePollInterval, DefaultErasurePollInterval)
	}
	if cfg.ErasurePollInterval == 0 {
		cfg.ErasurePollInterval = DefaultErasurePollInterval
	}
	if cfg.KeyCacheSize < 0 {
		return nil, fmt.Errorf("runtime: Config.KeyCacheSize is %d; use 0 for the default (%d) or a positive size", cfg.KeyCacheSize, DefaultKeyCacheSize)
	}
	if cfg.KeyCacheSize == 0 {
		cfg.KeyCacheSize = DefaultKeyCacheSize
	}
	keys := newKeyring(cfg.KeyStore, cfg.KeyCacheSize)
	rt := &Runtime{reg: newRegistry(cfg.Codec, keys)}
	snaps := cfg.Snapshots
	if snaps != nil && keys != nil {
		// Snapshots of streams holding personal data are sealed too.
		snaps = sealedSnapshots{Store: snaps, keys: keys, journal: cfg.Journal}
	}
	hostCfg := actors.Config{
		Journal:        cfg.Journal,
		Sessions:       cfg.Sessions,
		Snapshots:      snaps,
		SnapshotPolicy: *cfg.SnapshotPolicy,
		Resolve:        rt.reg.model,
		NodeID:         cfg.NodeID,
		Limits:         cfg.Limits,
		Logger:         cfg.Logger,
		OnStoreRewound: cfg.OnStoreRewound,
		TracerProvider: cfg.TracerProvider,
		MeterProvider:  cfg.MeterProvider,
	}
	host, err := actors.NewHost(ctx, hostCfg)
	if err != nil {
		return nil, startError(ctx, cfg.NodeID, err)
	}
	rt.host = host
	cfg.Limits = host.Config().Limits
	rt.cfg = cfg
	if err := rt.watchErasures(ctx); err != nil {
		return nil, errors.Join(err, host.Shutdown(context.WithoutCancel(ctx)))
	}
	if err := rt.joinCluster(ctx); err != nil {
		rt.erasures.stop()
		return nil, errors.Join(err, host.Shutdown(context.WithoutCancel(ctx)))
	}
	return rt, nil
}

// startError reports why New could not start the actor host (its first
// call to the journal opens the node session). A journal that cannot be
// reached, or is not open (a Postgres schema not migrated), at start is a
// configuration error (ErrConfiguration, not retryable): the unreachable
// cause is kept as text only, so the error does not also match the
// retryable journal.ErrUnavailable. ctx ending is reported as it is.
func startError(ctx context.Context, node string, err error) error {
	switch {
	case ctx.Err() != nil || errors.Is(err, journal.ErrConfiguration):
		return fmt.Errorf("runtime: %w", err)
	case errors.Is(err, journal.ErrUnavailable):
		return fmt.Errorf("%w: runtime: node %q cannot start: the journal's database cannot be reached, which at start means a configuration error, not an outage: "+
			"check the host and port of the database URL and that the server runs there, then start again (cause: %v)",
			ErrConfiguration, node, err)
	case errors.Is(err, journal.ErrStoreNotOpen):
		return fmt.Errorf("%w: runtime: could not open node %q's session: %w", ErrConfiguration, node, err)
	}
	return fmt.Errorf("runtime: %w", err)
}

// Config returns the runtime's configuration with every default applied.
func (rt *Runtime) Config() Config { return rt.cfg }

// Ready returns nil while this runtime can serve commands: its node session
// was confirmed by the database less than SessionTimeout (minus a safety
// margin) ago, no other live process opened the same NodeID, and (in cluster
// mode) the member is in the cluster. Otherwise it returns the reason, the
// error Execute would return: ErrLeaseLost (paused past the session timeout,
// the database unreachable, or a cluster member rejoining its cluster; it
// clears itself once a renewal succeeds and the member has rejoined), which
// also matches journal.ErrNodeSuperseded for a twin NodeID (permanent:
// restart the process with its own NodeID; in cluster mode it matches
// ErrNodeFenced too). Use it for a readiness probe. It does no I/O and is
// safe for concurrent use.
func (rt *Runtime) Ready() error {
	if rt.cluster != nil {
		if err := rt.cluster.FenceError(); err != nil {
			return err
		}
	}
	return rt.twin(rt.host.Ready())
}

// twin returns err, or, once another live process opened this runtime's
// NodeID (this host's node session was superseded), the one error that says
// so (twinNodeError, wrapping err).
func (rt *Runtime) twin(err error) error {
	if err == nil {
		return nil
	}
	var t *twinNodeError
	if errors.As(err, &t) {
		return err
	}
	if errors.Is(rt.host.Ready(), journal.ErrNodeSuperseded) {
		return &twinNodeError{node: rt.cfg.NodeID, cause: err}
	}
	return err
}

// ActiveStreams returns the number of stream actors currently alive.
func (rt *Runtime) ActiveStreams() int { return rt.host.ActiveActors() }

// Pending returns the number of commands queued at target's stream actor
// (waiting behind the batch being decided or appended), 0 when the stream
// has no active actor.
func (rt *Runtime) Pending(target Target) int { return rt.host.Pending(target.Stream()) }

// Shutdown passivates every stream actor (snapshot if due, release its
// lease), closes the node session and stops the actor system. Commands
// executed afterwards fail with ErrShutdown. If ctx ends first, remaining
// journal calls are cancelled and Shutdown returns an error wrapping ctx's.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	rt.erasures.stop()
	if rt.cluster != nil {
		rt.cluster.Shutdown()
	}
	return rt.host.Shutdown(ctx)
}

// Target names the stream a command goes to: the aggregate's stream with tag
// "<Aggregate>:<ID>" in Partition ("" means journal.DefaultPartition).
type Target struct {
	Aggregate string
	ID        string
	Partition string
}

// Stream returns the target's stream ID.
func (t Target) Stream() journal.StreamID {
	return journal.StreamID{Partition: t.Partition, Tag: journal.NewTag(t.Aggregate, t.ID)}.Normalize()
}

// ExecuteOption adjusts one Execute.
type ExecuteOption func(*journal.Metadata)

// WithIdempotencyKey makes the command execute at most once per stream: a
// repeat with the same key appends nothing and returns the first result
// (Result.Duplicate set), also after restarts.
func WithIdempotencyKey(key string) ExecuteOption {
	return func(m *journal.Metadata) { m.IdempotencyKey = key }
}

// WithMetadata sets the metadata stored with the command's events
// (correlation, causation, user, scopes). The runtime sets the partition,
// created-at (when zero) and the trace context; a key set with
// WithIdempotencyKey wins over md.IdempotencyKey only when given after it.
func WithMetadata(md journal.Metadata) ExecuteOption {
	return func(m *journal.Metadata) { *m = md }
}

// Result is the outcome of an executed command.
type Result[S any] struct {
	// Stream is the command's stream.
	Stream journal.StreamID
	// Records are the events the command appended (none if it decided none),
	// as stored: positions, per-tag versions, hash links.
	Records []journal.Record
	// Version is the stream's version after the command.
	Version uint64
	// State is the aggregate state after the command. For a duplicate it is
	// the state right after the first execution (rebuilt from the journal).
	State S
	// Duplicate reports that the idempotency key had already been executed
	// with the same command: Records, Version and State are the first
	// execution's. The same key with a different command fails with
	// ErrIdempotencyKeyReused instead.
	Duplicate bool
}

// Execute sends command to target's stream actor and waits until it is
// decided and its events are durable. A domain error returned by the
// aggregate's Decide is returned as is (errors.Is works).
//
// Context: if ctx ends before the command is decided, the command is never
// executed and Execute returns ctx.Err(). If ctx ends after it was decided,
// the caller cannot know whether its events were stored: the error matches
// both ctx.Err() and journal.ErrOutcomeUnknown. Execute the command again with
// the same idempotency key (WithIdempotencyKey) to find out: a stored first
// attempt comes back with Duplicate set. Without a deadline on ctx, Execute
// waits at most Config.RequestTimeout.
//
// Other errors: ErrUnknownAggregate; journal.ErrOpenTimeout (another live
// node holds the stream); journal.ErrSessionExpired (the lease was lost; the
// command was not acknowledged); ErrPanic (the aggregate's code panicked;
// only this command failed); ErrShutdown.
func (rt *Runtime) Execute(ctx context.Context, target Target, command any, opts ...ExecuteOption) (Result[any], error) {
	return execute[any](ctx, rt, target, command, opts)
}

// ExecuteTyped is Execute returning the state as S, the aggregate's state
// type; a different S is an error.
func ExecuteTyped[S any](ctx context.Context, rt *Runtime, target Target, command any, opts ...ExecuteOption) (Result[S], error) {
	if m := rt.reg.model(target.Aggregate); m != nil {
		if _, ok := m.(*aggregateModel[S]); !ok {
			return Result[S]{}, fmt.Errorf("runtime: ExecuteTyped[%s] on aggregate %q, whose state has another type; use the aggregate's state type", reflect.TypeFor[S](), target.Aggregate)
		}
	}
	return execute[S](ctx, rt, target, command, opts)
}

// checkTarget reports a target that names no registered aggregate, has no
// ID, or makes a stream tag over the journal's limit.
func (rt *Runtime) checkTarget(target Target) error {
	if rt.reg.model(target.Aggregate) == nil {
		return fmt.Errorf("%w %q; register it with runtime.RegisterAggregate", ErrUnknownAggregate, target.Aggregate)
	}
	if target.ID == "" {
		return fmt.Errorf("runtime: Target.ID is empty for aggregate %q; name the aggregate instance", target.Aggregate)
	}
	if tag := target.Stream().Tag; len(tag) > journal.MaxTagLength {
		return fmt.Errorf("runtime: the stream tag of aggregate %q with ID %q is %d bytes long, over the limit of %d; use a shorter ID", target.Aggregate, abbreviate(target.ID, 32), len(tag), journal.MaxTagLength)
	}
	return nil
}

func execute[S any](ctx context.Context, rt *Runtime, target Target, command any, opts []ExecuteOption) (Result[S], error) {
	if err := rt.checkTarget(target); err != nil {
		return Result[S]{}, err
	}
	stream := target.Stream()
	var md journal.Metadata
	for _, o := range opts {
		o(&md)
	}
	if md.IdempotencyKey != "" && md.CommandHash == "" {
		md.CommandHash = commandHash(rt.cfg.Codec, command)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rt.cfg.RequestTimeout)
		defer cancel()
	}
	var res actors.Result
	var err error
	if rt.cluster != nil {
		res, err = rt.cluster.Execute(ctx, stream, actors.Command{Payload: command, Metadata: md})
	} else {
		res, err = rt.host.Execute(ctx, stream, actors.Command{Payload: command, Metadata: md})
	}
	if err == nil && res.Duplicate {
		res, err = rt.firstOutcome(ctx, stream, md, res)
	}
	out := Result[S]{Stream: stream, Records: res.Records, Version: res.Version, Duplicate: res.Duplicate}
	if s, ok := res.State.(S); ok {
		out.State = s
	}
	return out, rt.twin(err)
}

// abbreviate shortens s to at most n bytes (cut on a rune boundary) for an
// error message, marking the cut.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
