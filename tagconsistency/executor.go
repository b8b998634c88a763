package tagconsistency

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// Journal is what the executor needs from the event store: stream reads,
// event lookups (idempotency) and appends with conditions. journal.Journal satisfies it.
type Journal interface {
	journal.Appender
	ReadStream(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error]
	ReadEvent(ctx context.Context, id uuid.UUID) (journal.Record, error)
}

// DefaultEndTimeout is the default of Config.EndTimeout.
const DefaultEndTimeout = 5 * time.Second

// Config configures an Executor.
type Config struct {
	// Journal stores and reads the events. Required.
	Journal Journal
	// Owners grants reservations of tag streams (in Scribe: the stream
	// actors). Required.
	Owners TagOwners
	// EndTimeout bounds each Confirm and Cancel call. They run even when
	// the caller's context has ended, because the owners must learn the
	// outcome. Default 5 s (DefaultEndTimeout).
	EndTimeout time.Duration
	// TracerProvider receives the spans execute, reserve (one per tag, with
	// the wait time), read, decide, append, confirm and cancel. Default: no
	// tracing.
	TracerProvider trace.TracerProvider
	// FoldCacheSize bounds how many folded command states the executor keeps
	// between executions (least recently used evicted). A command whose name
	// and query match a cached fold reads only the events appended since it,
	// so the cost of a command does not grow with its tags' history. The
	// executor also keeps the newest events of recently used tags (the ones
	// it appended or read), so such a fold often reads nothing at all.
	// Negative disables both caches. Default 4096 (DefaultFoldCacheSize).
	FoldCacheSize int
	// Gate, when set, admits the executor's commands so that none holds a
	// reservation while it waits for another (see Gate). Give every
	// executor of a process the same one. Default: none (each command
	// reserves its tags in order and may hold one while it queues for the
	// next).
	Gate *Gate
	// MeterProvider receives the metrics scribe.dcb.commands (by outcome),
	// scribe.dcb.reservation.wait (seconds), scribe.dcb.gate.wait (seconds,
	// with a Gate) and scribe.dcb.conflicts.
	// Default: no metrics.
	MeterProvider metric.MeterProvider
}

// Executor runs DCB commands: reserve every tag of the command at its owner in
// sorted order, read and fold the matching events, decide, append once, and
// confirm or cancel. Safe for concurrent use; commands on disjoint tags run in
// parallel, commands sharing a tag queue at that tag's owner.
type Executor struct {
	journal    Journal
	owners     TagOwners
	endTimeout time.Duration
	cache      *foldCache
	tails      *tailCache
	gate       *Gate
	tel        telemetry
}

// New validates cfg, applies its defaults and returns an Executor.
func New(cfg Config) (*Executor, error) {
	if cfg.Journal == nil {
		return nil, errors.New("tagconsistency: Config.Journal is nil; pass the journal the tags' owners write to")
	}
	if cfg.Owners == nil {
		return nil, errors.New("tagconsistency: Config.Owners is nil; pass the tag owners (the runtime's stream actors)")
	}
	if cfg.EndTimeout < 0 {
		return nil, fmt.Errorf("tagconsistency: Config.EndTimeout is negative (%s); use 0 for the default (%s) or a positive duration", cfg.EndTimeout, DefaultEndTimeout)
	}
	if cfg.EndTimeout == 0 {
		cfg.EndTimeout = DefaultEndTimeout
	}
	if cfg.FoldCacheSize == 0 {
		cfg.FoldCacheSize = DefaultFoldCacheSize
	}
	tel, err := newTelemetry(cfg.TracerProvider, cfg.MeterProvider)
	if err != nil {
		return nil, err
	}
	return &Executor{
		journal:    cfg.Journal,
		owners:     cfg.Owners,
		endTimeout: cfg.EndTimeout,
		cache:      newFoldCache(cfg.FoldCacheSize),
		tails:      newTailCache(cfg.FoldCacheSize > 0),
		gate:       cfg.Gate,
		tel:        tel,
	}, nil
}

// Streams returns the tag streams cmd reserves, in reservation order
// (ascending partition, then tag): every tag of every query item and every
// tag of cmd.Tags, in the query's partition. It fails with ErrInvalidCommand
// when the command is malformed.
func Streams[S any](cmd Command[S]) ([]journal.StreamID, error) {
	if err := validate(cmd); err != nil {
		return nil, err
	}
	return streamsOf(cmd.Query, cmd.Tags), nil
}

func validate[S any](cmd Command[S]) error {
	if cmd.Name == "" {
		return fmt.Errorf("%w: the command has no Name; name it for errors, spans and metrics", ErrInvalidCommand)
	}
	if cmd.Evolve == nil || cmd.Decide == nil {
		return fmt.Errorf("%w: command %q needs both Evolve and Decide", ErrInvalidCommand, cmd.Name)
	}
	if err := cmd.Query.Validate(); err != nil {
		return fmt.Errorf("%w: command %q: %w", ErrInvalidCommand, cmd.Name, err)
	}
	if cmd.Query.All {
		return fmt.Errorf("%w: command %q queries all events; a DCB command's query must name the tags it depends on so their owners can be reserved", ErrInvalidCommand, cmd.Name)
	}
	for i, it := range cmd.Query.Items {
		if len(it.Tags) == 0 {
			return fmt.Errorf("%w: command %q: query item %d names no tag; every item needs at least one tag, whose owner serializes the events the item matches", ErrInvalidCommand, cmd.Name, i)
		}
	}
	for _, t := range cmd.Tags {
		if t == "" {
			return fmt.Errorf("%w: command %q lists an empty tag in Tags", ErrInvalidCommand, cmd.Name)
		}
	}
	return nil
}

func streamsOf(q journal.Query, extra []journal.Tag) []journal.StreamID {
	partition := q.PartitionOrDefault()
	var tags []journal.Tag
	for _, it := range q.Items {
		tags = append(tags, it.Tags...)
	}
	tags = append(tags, extra...)
	slices.Sort(tags)
	tags = slices.Compact(tags)
	out := make([]journal.StreamID, len(tags))
	for i, t := range tags {
		out[i] = journal.StreamID{Partition: partition, Tag: t}
	}
	return out
}

// Execute runs cmd once:
//
//  0. with a Gate, wait there, holding nothing, until no other command of
//     the process that passed it holds any stream of cmd;
//  1. reserve every stream of cmd (see Streams) at its owner, in sorted
//     order; a busy tag queues the command, for at most the reserve timeout;
//  2. build the state (with cmd.FromStates from the owners' cached states;
//     otherwise by folding the events matching cmd.Query from the reserved
//     streams, continuing the executor's cached fold of the same Name and
//     Query when it has one) and Decide;
//  3. append the decided events in one call, expecting each reserved stream
//     at the version its owner reported, carrying the owners' leases, with
//     the AppendCondition "no event matches cmd.Query after the last position
//     read" as a backstop;
//  4. confirm each owner with the appended records carrying its tag (posted
//     without waiting for the answer to a PostingGrantor), or, on any
//     failure, cancel every reservation.
//
// With an idempotency key, an earlier execution of the same key answers
// instead: its stored events are returned (Duplicate) when this execution's
// append finds them (its event IDs derive from the key), or when this
// execution decides to append nothing or rejects the command.
//
// A domain error from Decide is returned unchanged. A rejected append
// condition or expected version means something bypassed the owners: it is
// returned as a ConflictError (ErrConflict) and never retried. A command whose
// context ends before its append starts writes nothing and returns an error
// wrapping the context's error; if it ends during the append, the outcome is
// whatever the journal reports (possibly journal.ErrOutcomeUnknown: run the
// command again with the same idempotency key to resolve it).
//
// One failure is not the caller's: an append refused because an owner's
// lease was revoked (journal.LeaseRevoked: a partition move revokes every
// lease of the partition; a stream taken over by another node) wrote
// nothing, and the owners acquire their streams again before they grant
// another reservation. The command then runs once more from step 1 (at most
// maxRevokedRuns times in all), so a live node follows a move without its
// callers seeing it.
func Execute[S any](ctx context.Context, x *Executor, cmd Command[S], opts Options) (res Result, err error) {
	if err := validate(cmd); err != nil {
		return Result{}, err
	}
	streams := streamsOf(cmd.Query, cmd.Tags)
	for run := 1; ; run++ {
		res, err = executeOnce(ctx, x, cmd, opts, streams)
		if !journal.LeaseRevoked(err) {
			return res, err
		}
		// The partition may have moved to another database, where its
		// events have other positions: forget what the caches hold of it.
		x.cache.dropPartition(cmd.Query.PartitionOrDefault())
		x.tails.dropPartition(cmd.Query.PartitionOrDefault())
		if run >= maxRevokedRuns || ctx.Err() != nil {
			return res, err
		}
	}
}

// maxRevokedRuns bounds the runs of one command whose appends are refused for
// a revoked lease: the owners acquire again after the first, so a second
// refusal means a lease was revoked again meanwhile (another move step, a
// takeover); a third run answers whatever it meets.
const maxRevokedRuns = 3

// executeOnce is one run of Execute: reserve, decide, append, confirm.
func executeOnce[S any](ctx context.Context, x *Executor, cmd Command[S], opts Options, streams []journal.StreamID) (res Result, err error) {

	ctx, span := x.tel.tracer.Start(ctx, otelx.SpanDCBExecute, trace.WithAttributes(
		attribute.String("scribe.command", cmd.Name),
		attribute.Int("scribe.dcb.tags", len(streams)),
	))
	outcome := outcomeError
	defer func() {
		x.tel.finishExecute(ctx, span, cmd.Name, outcome, err)
	}()

	leave, err := x.enterGate(ctx, span, cmd.Name, streams)
	if err != nil {
		return Result{}, err
	}
	// Deferred before the reservations' end, so it runs after it: the next
	// command admitted finds the owners confirmed or cancelled.
	defer leave()
	held := make([]*Reservation, 0, len(streams))
	for _, s := range streams {
		r, err := x.reserve(ctx, cmd.Name, s)
		if err != nil {
			x.cancelAll(ctx, held, nil)
			return Result{}, err
		}
		held = append(held, r)
	}
	// From here on the reservations end exactly once: confirmed with the
	// appended records at the end, or cancelled by this deferred call on
	// every other return (with cause when the append failed, so the owners
	// re-read their tails).
	var cause error
	confirmed := false
	defer func() {
		if !confirmed {
			x.cancelAll(ctx, held, cause)
		}
	}()

	// An earlier execution with the same idempotency key is looked up only
	// where its result could differ from this one's: the events this
	// execution decides carry IDs derived from the key, so appending them
	// finds an earlier execution's events (Duplicate when they are the same,
	// ErrDuplicateMismatch when they differ); a decision that appends
	// nothing or rejects the command looks it up before it answers. A keyed
	// command that is new (the common case) costs no lookup.
	earlier := func() (Result, bool, error) {
		if opts.IdempotencyKey == "" {
			return Result{}, false, nil
		}
		prior, found, err := x.stored(ctx, cmd.Query.PartitionOrDefault(), cmd.Name, opts.IdempotencyKey)
		if err != nil || !found {
			return Result{}, false, err
		}
		outcome = outcomeDuplicate
		return Result{Records: prior, Duplicate: true}, true, nil
	}

	key := foldKey(cmd.Name, cmd.Query)
	state, after, err := fold(ctx, x, cmd, held, key)
	if err != nil {
		return Result{}, err
	}

	events, rejected, err := decide(ctx, x, cmd, state)
	if rejected || (err == nil && len(events) == 0) {
		if res, found, lerr := earlier(); lerr != nil || found {
			return res, lerr
		}
		if cmd.FromStates == nil {
			x.cache.put(foldEntry{key: key, state: state, after: after, versions: versionsOf(held)})
		}
	}
	if err != nil {
		if rejected {
			outcome = outcomeRejected
		}
		return Result{}, err
	}
	if len(events) == 0 {
		outcome = outcomeOK
		return Result{}, nil
	}
	if err := x.stamp(ctx, cmd.Name, cmd.Query.PartitionOrDefault(), streams, events, opts); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("tagconsistency: command %q not executed: %w", cmd.Name, err)
	}

	appended, err := x.append(ctx, cmd.Name, cmd.Query, held, events, after)
	if err != nil && errors.Is(err, journal.ErrDuplicateMismatch) {
		// The key's earlier execution stored other events than this one
		// decided: its result is the answer.
		if res, found, lerr := earlier(); lerr != nil || found {
			return res, lerr
		}
	}
	if err != nil {
		if errors.Is(err, ErrConflict) {
			outcome = outcomeConflict
		}
		cause = err
		return Result{}, err
	}
	if appended.Duplicate {
		outcome = outcomeDuplicate
		// Every event ID was stored before this execution reserved anything
		// (an idempotent re-run with caller-chosen IDs): the owners already
		// hold these records.
		return Result{Records: appended.Records, Duplicate: true}, nil
	}
	// Cache the advanced fold and the new tails before the tags are freed, so
	// the next command with the same tags (queued at them) finds them.
	advance(x.cache, cmd, key, state, after, held, appended.Records)
	for _, r := range held {
		var mine []journal.Record
		for _, rec := range appended.Records {
			if rec.HasTag(r.Stream.Tag) {
				mine = append(mine, rec)
			}
		}
		if len(mine) > 0 && mine[0].Version(r.Stream.Tag) == r.Version+1 {
			x.tails.add(r.Stream, mine)
		}
	}
	confirmed = true
	x.confirmAll(ctx, held, appended.Records)
	outcome = outcomeOK
	return Result{Records: appended.Records}, nil
}
