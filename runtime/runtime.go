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
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime/internal/membership"
	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Bounds are the stream actors' timeouts and bounds, documented field by
// field at actors.Bounds. Unlike the errors (errors.go), Bounds is the
// engine's type itself: one struct of settings that runtime.Config embeds,
// the engine validates and the cluster member reads from the engine's
// Config, so a knob added there is one edit. (journal.Limits, what an
// append may carry, is another thing.)
type Bounds = actors.Bounds

// DefaultBounds returns the values zero Bounds fields take.
func DefaultBounds() Bounds { return actors.DefaultBounds() }

// Defaults of Config fields, stated in their comments.
const (
	defaultErasurePollInterval  = time.Second
	defaultErasureSweepInterval = 10 * time.Second
	defaultKeyCacheSize         = 10000
	defaultReplicaVersionWait   = 2 * time.Second
)

// Config configures a Runtime. Only Journal is required; a zero field takes
// the default its comment names.
type Config struct {
	// Journal stores the events. Required.
	Journal journal.Journal
	// Sessions grants the node session and the stream leases fencing every
	// append. Default: Journal, if it implements it (Scribe's journals do).
	Sessions journal.Sessions
	// Snapshots stores state snapshots, saved when SnapshotPolicy says.
	// Defaults: none (streams replay from version 1); snapshots.DefaultPolicy
	// (every 100 events and on passivation).
	Snapshots      snapshots.Store
	SnapshotPolicy *snapshots.Policy
	// NodeID identifies this runtime across restarts: with the same NodeID
	// it takes its streams back at once, where others wait for the session
	// timeout. Two live runtimes with one NodeID fence each other: set it
	// when a host runs several. Default: os.Hostname().
	NodeID string
	// Logger receives operational logs. Default: discard.
	Logger *slog.Logger
	// OnStoreRewound, if set, gets each stream found rewound (see Rewinds)
	// after its ERROR log and before the stream serves again, on the
	// stream's actor: it must return quickly and not call the runtime.
	OnStoreRewound func(StoreRewind)
	// TracerProvider receives the spans (see packages actors and
	// tagconsistency), MeterProvider the metrics. Default: no-op.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Bounds: timeouts (session, open, idle, request, reservation), batch
	// and queue sizes, queue-delay shedding; zero fields take DefaultBounds.
	Bounds
	// Codec encodes event payloads and snapshot states. Default JSONCodec.
	Codec Codec
	// KeyStore keeps the data keys sealing personal fields and the snapshots
	// holding them, and destroys them on Erase (the streams then replay).
	// Default nil: registering personal data fails.
	KeyStore erasure.KeyStore
	// ErasurePollInterval is how often, with a KeyStore, the runtime reads
	// the key store's erasure feed (KeyStore.Erasures) for erasures begun
	// anywhere (`scribe erase`, another runtime, a process that crashed
	// midway): for each it drops the subject's cached key and stops the
	// actors of its streams. So within ErasurePollInterval plus one poll's
	// work (a key-store read, the evictions) of an erasure's first step,
	// this runtime serves none of the subject's personal data, whether or
	// not the erasure record ever reaches the journal: 2 s with the
	// default. A poll that fails empties the key cache, so reads ask the
	// key store (and fail while it cannot answer) instead of using keys
	// that may be destroyed. KeyCacheSize bounds each of its caches of
	// data keys, erasures and stream bindings. Defaults: 1 s; 10000.
	ErasurePollInterval time.Duration
	KeyCacheSize        int
	// ErasureSweepInterval is how often, with a KeyStore, the runtime
	// completes the erasures left pending by a process that stopped or
	// failed midway (erasure.CompletePending: the record appended, the key
	// destroyed, Snapshots of the subject's streams deleted, completion
	// recorded); it also sweeps once at New, in the background. Default
	// 10 s.
	ErasureSweepInterval time.Duration
	// Replica, a read replica of the journal (postgres.NewReplica), serves
	// State's reads only; with AtLeastVersion, State waits up to
	// ReplicaVersionWait for the replica to reach the stream's version, then
	// reads Journal. (postgres.Config.ReplicaWait is the journal's own wait
	// for a position, in Replica.ReaderAt; this one is State's, for a stream
	// version: the runtime cannot see the journal's.) Defaults: none; 2 s.
	Replica            journal.Journal
	ReplicaVersionWait time.Duration
	// Cluster makes the runtime a cluster member (see Cluster). Default nil:
	// a single node, no cluster code on any path.
	Cluster Cluster
	// TolerateUnreadableTypes lets Start succeed when the journal holds
	// event type versions this build cannot read (no registration at that
	// version, no upcaster chain from it); their events then fail where they
	// are read (recovery, State, projections). Default false: Start fails
	// with ErrConfiguration naming them.
	TolerateUnreadableTypes bool
}

// Runtime runs the stream actors of the registered aggregates. Its methods
// and the functions taking a *Runtime are safe for concurrent use.
type Runtime struct {
	cfg     Config
	reg     *registry
	host    *actors.Host
	cluster membership.Member // nil in single-node mode
	// erasures follows the key store's erasure feed and sweeps pending
	// erasures; nil without a KeyStore.
	erasures *erasureWatcher
	// dcbGate admits every DCB command of this runtime to its tags' actors
	// (tagconsistency.Gate): none holds a tag while it waits for another.
	dcbGate *tagconsistency.Gate
}

// New validates cfg, applies its defaults, opens the node session and
// starts the actor system; call Shutdown when done. It fails fast with
// ErrConfiguration on a journal it cannot reach or use; afterwards that is
// an outage (journal.ErrUnavailable, retryable).
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
	if cfg.ReplicaVersionWait < 0 {
		return nil, fmt.Errorf("runtime: Config.ReplicaVersionWait is %s; use 0 for the default (%s) or a positive duration", cfg.ReplicaVersionWait, defaultReplicaVersionWait)
	}
	if cfg.ReplicaVersionWait == 0 {
		cfg.ReplicaVersionWait = defaultReplicaVersionWait
	}
	if cfg.ErasurePollInterval < 0 {
		return nil, fmt.Errorf("runtime: Config.ErasurePollInterval is %s; use 0 for the default (%s) or a positive interval", cfg.ErasurePollInterval, defaultErasurePollInterval)
	}
	if cfg.ErasurePollInterval == 0 {
		cfg.ErasurePollInterval = defaultErasurePollInterval
	}
	if cfg.ErasureSweepInterval < 0 {
		return nil, fmt.Errorf("runtime: Config.ErasureSweepInterval is %s; use 0 for the default (%s) or a positive interval", cfg.ErasureSweepInterval, defaultErasureSweepInterval)
	}
	if cfg.ErasureSweepInterval == 0 {
		cfg.ErasureSweepInterval = defaultErasureSweepInterval
	}
	if cfg.KeyCacheSize < 0 {
		return nil, fmt.Errorf("runtime: Config.KeyCacheSize is %d; use 0 for the default (%d) or a positive size", cfg.KeyCacheSize, defaultKeyCacheSize)
	}
	if cfg.KeyCacheSize == 0 {
		cfg.KeyCacheSize = defaultKeyCacheSize
	}
	keys := newKeyring(cfg.KeyStore, cfg.KeyCacheSize)
	rt := &Runtime{reg: newRegistry(cfg.Codec, keys)}
	snaps := cfg.Snapshots
	if snaps != nil && keys != nil {
		// Snapshots of streams holding personal data are sealed too.
		snaps = sealedSnapshots{Store: snaps, keys: keys}
	}
	hostCfg := actors.Config{
		Journal:        cfg.Journal,
		Sessions:       cfg.Sessions,
		Snapshots:      snaps,
		SnapshotPolicy: *cfg.SnapshotPolicy,
		Resolve:        rt.reg.model,
		NodeID:         cfg.NodeID,
		Bounds:         cfg.Bounds,
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
	cfg.Bounds = host.Config().Bounds
	// A DCB command waits at the gate at most as long as at a busy tag's
	// actor, and fails the same way (ErrReservationTimeout naming the tag).
	if rt.dcbGate, err = tagconsistency.NewGate(tagconsistency.GateConfig{MaxWait: cfg.Bounds.ReservationTimeout}); err != nil {
		return nil, errors.Join(err, host.Shutdown(context.WithoutCancel(ctx)))
	}
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
		return fmt.Errorf("%w: runtime: node %q cannot start: the journal's database cannot be reached (at start a configuration error, not an outage): "+
			"check the URL's host and port and that the server runs (cause: %v)",
			ErrConfiguration, node, err)
	case errors.Is(err, journal.ErrStoreNotOpen):
		return fmt.Errorf("%w: runtime: could not open node %q's session: %w", ErrConfiguration, node, err)
	}
	return fmt.Errorf("runtime: %w", err)
}

// Config returns the runtime's configuration with every default applied.
func (rt *Runtime) Config() Config { return rt.cfg }

// Ready, a readiness probe without I/O, returns nil while the node session
// was confirmed less than SessionTimeout (minus a margin) ago and, in cluster
// mode, the member is in the cluster. Otherwise it returns the error Execute
// would: ErrLeaseLost, until a renewal succeeds and the member rejoined;
// once another live process opened the same NodeID, for good, and also
// matching journal.ErrNodeSuperseded (and ErrNodeFenced): restart the
// process with its own NodeID.
func (rt *Runtime) Ready() error {
	if rt.cluster != nil {
		if err := rt.cluster.FenceError(); err != nil {
			return translate(err)
		}
	}
	return rt.surface(rt.host.Ready())
}

// surface returns err as Execute and Ready return it: translated (see
// translate), or, once another live process opened this runtime's NodeID
// (this host's node session was superseded), the one error that says so
// (twinNodeError, wrapping err).
func (rt *Runtime) surface(err error) error {
	if err == nil {
		return nil
	}
	err = translate(err)
	var t *twinNodeError
	if errors.As(err, &t) {
		return err
	}
	if errors.Is(rt.host.Ready(), journal.ErrNodeSuperseded) {
		return &twinNodeError{node: rt.cfg.NodeID, cause: err}
	}
	return err
}

// ActiveStreams returns the number of stream actors alive.
func (rt *Runtime) ActiveStreams() int { return rt.host.ActiveActors() }

// Pending returns the number of commands queued at target's stream actor
// behind the batch in progress; 0 without an active actor.
func (rt *Runtime) Pending(target Target) int { return rt.host.Pending(target.Stream()) }

// Shutdown passivates every stream actor (snapshot if due, release its
// lease), closes the node session and stops the actor system; later
// commands fail with ErrShutdown. If ctx ends first, the remaining journal
// calls are cancelled and the error wraps ctx's.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	rt.erasures.stop()
	if rt.cluster != nil {
		rt.cluster.Shutdown()
	}
	return translate(rt.host.Shutdown(ctx))
}

// Target names the stream a command goes to: the one tagged
// "<Aggregate>:<ID>" in Partition ("" means journal.DefaultPartition).
type Target struct {
	Aggregate, ID, Partition string
}

// Stream returns the target's stream ID.
func (t Target) Stream() journal.StreamID {
	return journal.StreamID{Partition: t.Partition, Tag: journal.NewTag(t.Aggregate, t.ID)}.Normalize()
}

// ExecuteOption adjusts one Execute.
type ExecuteOption func(*journal.Metadata)

// WithIdempotencyKey makes the command execute at most once per stream (per
// name and partition for a DCB command, whose event IDs derive from the key),
// also across restarts: a repeat returns the first result with Duplicate
// set; the key with another command fails with ErrIdempotencyKeyReused.
func WithIdempotencyKey(key string) ExecuteOption {
	return func(m *journal.Metadata) { m.IdempotencyKey = key }
}

// WithMetadata sets the metadata stored with the command's events
// (correlation, causation, user, scopes), replacing the key of an earlier
// WithIdempotencyKey; the runtime sets partition, trace context and, if
// zero, created-at.
func WithMetadata(md journal.Metadata) ExecuteOption {
	return func(m *journal.Metadata) { *m = md }
}

// Result is the outcome of an executed command.
type Result[S any] struct {
	// Stream is the command's stream; Records the appended events as stored
	// (positions, per-tag versions, hash links), none if Decide returned
	// none; Version and State the stream's after them.
	Stream  journal.StreamID
	Records []journal.Record
	Version uint64
	State   S
	// Duplicate reports a repeat of an executed idempotency key: Records,
	// Version and State are the first execution's (State from the journal).
	Duplicate bool
}

// Execute sends command to target's stream actor and returns once it is
// decided and its events are durable (within Config.RequestTimeout if ctx
// has no deadline), or with Decide's domain error as is, ErrUnknownAggregate,
// journal.ErrOpenTimeout (another live node holds the stream),
// journal.ErrSessionExpired (the lease was lost, the command not
// acknowledged), ErrPanic or ErrShutdown.
//
// If ctx ends before the command is decided, it is never executed (the error
// is ctx.Err()); after, its events may be stored or not (the error matches
// ctx.Err() and journal.ErrOutcomeUnknown): Execute again with the same
// idempotency key to find out (a stored first attempt returns as Duplicate).
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
	if len(opts) > 0 {
		// Only the options see a pointer, so without options md stays on
		// the stack.
		p := new(journal.Metadata)
		for _, o := range opts {
			o(p)
		}
		md = *p
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
	return out, rt.surface(err)
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
