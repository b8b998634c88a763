package tagconsistency

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/internal/idempotency"
	otelx "github.com/scribe-es/scribe/internal/telemetry"
	"github.com/scribe-es/scribe/journal"
)

// Journal is what the executor needs from the event store: stream reads,
// event lookups (idempotency) and appends with conditions. journal.Journal satisfies it.
type Journal interface {
	journal.Appender
	ReadStream(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error]
	ReadEvent(ctx context.Context, id uuid.UUID) (journal.Record, error)
}

// DefaultReleaseTimeout is the default of Config.ReleaseTimeout.
const DefaultReleaseTimeout = 5 * time.Second

// Config configures an Executor.
type Config struct {
	// Journal stores and reads the events. Required.
	Journal Journal
	// Owners grants reservations of tag streams (in Scribe: the stream
	// actors). Required.
	Owners TagOwners
	// ReleaseTimeout bounds each Confirm and Cancel call. They run even when
	// the caller's context has ended, because the owners must learn the
	// outcome. Default 5 s (DefaultReleaseTimeout).
	ReleaseTimeout time.Duration
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
	// MeterProvider receives the metrics scribe.dcb.commands (by outcome),
	// scribe.dcb.reservation.wait (seconds) and scribe.dcb.conflicts.
	// Default: no metrics.
	MeterProvider metric.MeterProvider
}

// Executor runs DCB commands: reserve every tag of the command at its owner in
// sorted order, read and fold the matching events, decide, append once, and
// confirm or cancel. Safe for concurrent use; commands on disjoint tags run in
// parallel, commands sharing a tag queue at that tag's owner.
type Executor struct {
	journal        Journal
	owners         TagOwners
	releaseTimeout time.Duration
	cache          *foldCache
	tails          *tailCache
	tel            telemetry
}

// New validates cfg, applies its defaults and returns an Executor.
func New(cfg Config) (*Executor, error) {
	if cfg.Journal == nil {
		return nil, errors.New("tagconsistency: Config.Journal is nil; pass the journal the tags' owners write to")
	}
	if cfg.Owners == nil {
		return nil, errors.New("tagconsistency: Config.Owners is nil; pass the tag owners (the runtime's stream actors)")
	}
	if cfg.ReleaseTimeout < 0 {
		return nil, fmt.Errorf("tagconsistency: Config.ReleaseTimeout is negative (%s); use 0 for the default (%s) or a positive duration", cfg.ReleaseTimeout, DefaultReleaseTimeout)
	}
	if cfg.ReleaseTimeout == 0 {
		cfg.ReleaseTimeout = DefaultReleaseTimeout
	}
	if cfg.FoldCacheSize == 0 {
		cfg.FoldCacheSize = DefaultFoldCacheSize
	}
	tel, err := newTelemetry(cfg.TracerProvider, cfg.MeterProvider)
	if err != nil {
		return nil, err
	}
	return &Executor{
		journal:        cfg.Journal,
		owners:         cfg.Owners,
		releaseTimeout: cfg.ReleaseTimeout,
		cache:          newFoldCache(cfg.FoldCacheSize),
		tails:          newTailCache(cfg.FoldCacheSize > 0),
		tel:            tel,
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
//  4. confirm each owner with the appended records carrying its tag, or,
//     on any failure, cancel every reservation.
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
func Execute[S any](ctx context.Context, x *Executor, cmd Command[S], opts Options) (res Result, err error) {
	if err := validate(cmd); err != nil {
		return Result{}, err
	}
	streams := streamsOf(cmd.Query, cmd.Tags)

	ctx, span := x.tel.tracer.Start(ctx, SpanExecute, trace.WithAttributes(
		attribute.String("scribe.command", cmd.Name),
		attribute.Int("scribe.dcb.tags", len(streams)),
	))
	outcome := outcomeError
	defer func() {
		x.tel.finishExecute(ctx, span, cmd.Name, outcome, err)
	}()

	held := make([]*actors.Reservation, 0, len(streams))
	for _, s := range streams {
		r, err := x.reserve(ctx, cmd.Name, s)
		if err != nil {
			x.cancelAll(ctx, held, nil)
			return Result{}, err
		}
		held = append(held, r)
	}

	// From here on exactly one of confirm or cancelAll ends the reservations.
	//
	// An earlier execution with the same idempotency key is looked up only
	// where its result could differ from this one's: the events this
	// execution decides carry IDs derived from the key, so appending them
	// finds an earlier execution's events (Duplicate when they are the same,
	// ErrDuplicateMismatch when they differ); a decision that appends
	// nothing looks it up before it answers. A keyed command that is new
	// (the common case) costs no lookup.
	earlier := func() (Result, bool, error) {
		if opts.IdempotencyKey == "" {
			return Result{}, false, nil
		}
		prior, found, err := x.stored(ctx, cmd.Query.PartitionOrDefault(), cmd.Name, opts.IdempotencyKey)
		if err != nil || !found {
			return Result{}, false, err
		}
		x.cancelAll(ctx, held, nil)
		outcome = outcomeDuplicate
		return Result{Records: prior, Duplicate: true}, true, nil
	}

	key := foldKey(cmd.Name, cmd.Query)
	state, after, err := fold(ctx, x, cmd, held, key)
	if err != nil {
		x.cancelAll(ctx, held, nil)
		return Result{}, err
	}

	events, rejected, err := decide(ctx, x, cmd, state)
	if err != nil && rejected {
		if res, found, lerr := earlier(); lerr != nil || found {
			if lerr != nil {
				x.cancelAll(ctx, held, nil)
			}
			return res, lerr
		}
	}
	if err != nil {
		if rejected {
			outcome = outcomeRejected
			if cmd.FromStates == nil {
				x.cache.put(foldEntry{key: key, state: state, after: after, versions: versionsOf(held)})
			}
		}
		x.cancelAll(ctx, held, nil)
		return Result{}, err
	}
	if len(events) == 0 {
		if res, found, lerr := earlier(); lerr != nil || found {
			if lerr != nil {
				x.cancelAll(ctx, held, nil)
			}
			return res, lerr
		}
		if cmd.FromStates == nil {
			x.cache.put(foldEntry{key: key, state: state, after: after, versions: versionsOf(held)})
		}
		x.cancelAll(ctx, held, nil)
		outcome = outcomeOK
		return Result{}, nil
	}
	if err := x.prepare(ctx, cmd.Name, cmd.Query.PartitionOrDefault(), streams, events, opts); err != nil {
		x.cancelAll(ctx, held, nil)
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		x.cancelAll(ctx, held, nil)
		return Result{}, fmt.Errorf("tagconsistency: command %q not executed: %w", cmd.Name, err)
	}

	appended, err := x.append(ctx, cmd.Name, cmd.Query, held, events, after)
	if err != nil && errors.Is(err, journal.ErrDuplicateMismatch) {
		// The key's earlier execution stored other events than this one
		// decided: its result is the answer.
		if res, found, lerr := earlier(); lerr != nil || found {
			if lerr != nil {
				x.cancelAll(ctx, held, nil)
			}
			return res, lerr
		}
	}
	if err != nil {
		if errors.Is(err, ErrConflict) {
			outcome = outcomeConflict
		}
		x.cancelAll(ctx, held, err)
		return Result{}, err
	}
	if appended.Duplicate {
		outcome = outcomeDuplicate
		// Every event ID was stored before this execution reserved anything
		// (an idempotent re-run with caller-chosen IDs): the owners already
		// hold these records.
		x.cancelAll(ctx, held, nil)
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
	x.confirmAll(ctx, held, appended.Records)
	outcome = outcomeOK
	return Result{Records: appended.Records}, nil
}

func (x *Executor) reserve(ctx context.Context, command string, s journal.StreamID) (*actors.Reservation, error) {
	ctx, span := x.tel.tracer.Start(ctx, SpanReserve, trace.WithAttributes(
		attribute.String("scribe.stream", s.String()),
	))
	defer span.End()
	// How long a reservation may wait is the owner's rule (TagOwners), enforced
	// there once: the executor adds no timer of its own.
	start := time.Now()
	r, err := x.owners.Reserve(ctx, s)
	waited := time.Since(start)
	span.SetAttributes(attribute.Float64("scribe.reservation.wait_ms", float64(waited.Microseconds())/1000))
	x.tel.reservationWait.Record(ctx, waited.Seconds(), metric.WithAttributes(attribute.String("scribe.tag.group", s.Tag.Group())))
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("tagconsistency: command %q not executed while reserving tag %s: %w", command, s, ctx.Err())
		case errors.Is(err, ErrReservationTimeout):
			err = &ReservationTimeoutError{Command: command, Stream: s, Waited: waited}
		default:
			err = fmt.Errorf("tagconsistency: command %q: reserving tag %s: %w", command, s, err)
		}
		markFailed(span, err)
		return nil, err
	}
	if r.Grantor == nil {
		err := fmt.Errorf("tagconsistency: owner granted stream %s without a Grantor to end the reservation", s)
		markFailed(span, err)
		return nil, err
	}
	if r.Stream.Normalize() != s {
		// An owner that grants another stream than asked is a bug in the
		// owner; release what it granted and refuse to write.
		_ = r.Grantor.Cancel(context.WithoutCancel(ctx), nil)
		err := fmt.Errorf("tagconsistency: owner granted stream %s for a reservation of %s", r.Stream, s)
		markFailed(span, err)
		return nil, err
	}
	span.SetAttributes(attribute.Int64("scribe.stream.version", int64(r.Version)))
	return r, nil
}

// idempotentID derives the ID of the index-th event of an execution with key
// (package idempotency: the scheme aggregate commands use, in the DCB
// namespace, scoped by the command's name).
func idempotentID(partition, command, key string, index int) uuid.UUID {
	return idempotency.EventID(idempotency.DCB, partition, command, key, index)
}

// stored returns the records of an earlier execution of command with key:
// the events whose IDs were derived from the key, in index order.
func (x *Executor) stored(ctx context.Context, partition, command, key string) ([]journal.Record, bool, error) {
	var out []journal.Record
	for i := 0; ; i++ {
		r, err := x.journal.ReadEvent(ctx, idempotentID(partition, command, key, i))
		if errors.Is(err, journal.ErrNotFound) {
			return out, len(out) > 0, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("tagconsistency: command %q: looking up idempotency key %q: %w", command, key, err)
		}
		out = append(out, r)
	}
}

// fold builds the state from the events matching cmd.Query and returns it with
// the position of the last matching event (zero when none matched).
//
// Every event matching an item carries all of the item's tags, and every such
// tag is reserved, so reading one reserved stream per item finds them all;
// the streams are read with ReadStream, which shows every committed event of
// the stream (a DCB Read may hide recent commits behind its visibility gate,
// which would turn into a spurious conflict). The reserved streams do not move
// while reserved, except by writers that bypass the owners, which the append
// then rejects.
//
// The fold starts from the cached fold of key when there is one (taking it out
// of the cache) and then reads only the streams that moved since, from the
// first version it has not seen; otherwise from the owners' complete record
// caches when they cover the query; otherwise from version 1.
func fold[S any](ctx context.Context, x *Executor, cmd Command[S], held []*actors.Reservation, key string) (state S, after journal.Position, err error) {
	ctx, span := x.tel.tracer.Start(ctx, SpanRead)
	defer span.End()
	fail := func(err error) (S, journal.Position, error) {
		markFailed(span, err)
		return state, after, err
	}

	if cmd.FromStates != nil {
		states := make(map[journal.Tag]any, len(held))
		for _, r := range held {
			states[r.Stream.Tag] = r.State
			if r.LastPosition.After(after) {
				after = r.LastPosition
			}
		}
		var ok bool
		if err := guard(cmd.Name, "fromstates", func() { state, ok = cmd.FromStates(states) }); err != nil {
			return fail(err)
		}
		if ok {
			span.SetAttributes(attribute.String("scribe.dcb.source", "states"))
			return state, after, nil
		}
		var zero S
		state, after = zero, journal.Position{}
	}

	var from map[journal.Tag]uint64 // versions already folded, when cached
	if e, ok := x.cache.take(key); ok {
		if st, ok := e.state.(S); ok {
			state, after, from = st, e.after, e.versions
		}
	}
	if from == nil {
		if cmd.Initial != nil {
			if err := guard(cmd.Name, "initial", func() { state = cmd.Initial() }); err != nil {
				return fail(err)
			}
		}
		if cached, ok := fromCache(cmd.Query, held); ok {
			span.SetAttributes(attribute.String("scribe.dcb.source", "owners"), attribute.Int("scribe.dcb.events", len(cached)))
			for _, r := range cached {
				if err := guard(cmd.Name, "evolve", func() { state = cmd.Evolve(state, r) }); err != nil {
					return fail(err)
				}
				after = r.Position
			}
			return state, after, nil
		}
		span.SetAttributes(attribute.String("scribe.dcb.source", "journal"))
	} else {
		span.SetAttributes(attribute.String("scribe.dcb.source", "cache"))
	}

	var fresh []journal.Record
	seen := make(map[uuid.UUID]bool)
	tailHits := 0
	for _, r := range streamsToRead(cmd.Query, held) {
		v := from[r.Stream.Tag]
		if from != nil && v == r.Version {
			continue // nothing new in this stream
		}
		// Records up to the owner's version may come from the tail cache;
		// records past it (written behind the owner's back) make the append
		// fail on the expected version either way.
		recs, cached := x.tails.get(r.Stream, v, r.Version)
		if cached {
			tailHits++
		} else {
			recs = recs[:0]
			start := time.Now()
			for rec, rerr := range x.journal.ReadStream(ctx, r.Stream, v+1, 0) {
				if rerr != nil {
					x.tel.recordRead(ctx, time.Since(start), rerr)
					return fail(fmt.Errorf("tagconsistency: command %q: reading stream %s: %w", cmd.Name, r.Stream, rerr))
				}
				recs = append(recs, rec)
			}
			x.tel.recordRead(ctx, time.Since(start), nil)
			x.tails.add(r.Stream, recs)
		}
		for i := range recs {
			rec := &recs[i]
			if rec.Position.After(after) && !seen[rec.ID] && cmd.Query.Matches(rec) {
				seen[rec.ID] = true
				fresh = append(fresh, *rec)
			}
		}
	}
	span.SetAttributes(attribute.Int("scribe.dcb.tail_hits", tailHits))
	slices.SortFunc(fresh, func(a, b journal.Record) int { return a.Position.Compare(b.Position) })
	for _, rec := range fresh {
		if err := guard(cmd.Name, "evolve", func() { state = cmd.Evolve(state, rec) }); err != nil {
			return fail(err)
		}
		after = rec.Position
	}
	span.SetAttributes(attribute.Int("scribe.dcb.events", len(fresh)))
	return state, after, nil
}

// streamsToRead picks one reserved stream per query item, the shortest of the
// item's tags, without repeats.
func streamsToRead(q journal.Query, held []*actors.Reservation) []*actors.Reservation {
	byTag := make(map[journal.Tag]*actors.Reservation, len(held))
	for _, r := range held {
		byTag[r.Stream.Tag] = r
	}
	var out []*actors.Reservation
	for _, it := range q.Items {
		var best *actors.Reservation
		for _, t := range it.Tags {
			if r := byTag[t]; best == nil || r.Version < best.Version {
				best = r
			}
		}
		if !slices.Contains(out, best) {
			out = append(out, best)
		}
	}
	return out
}

// versionsOf returns the reserved streams' versions.
func versionsOf(held []*actors.Reservation) map[journal.Tag]uint64 {
	v := make(map[journal.Tag]uint64, len(held))
	for _, r := range held {
		v[r.Stream.Tag] = r.Version
	}
	return v
}

// advance folds a successful command's own matching records into its state
// and caches the result at the streams' new versions. The append condition
// guaranteed that no other matching event lies between after and these
// records.
func advance[S any](c *foldCache, cmd Command[S], key string, state S, after journal.Position, held []*actors.Reservation, records []journal.Record) {
	if c == nil || cmd.FromStates != nil {
		return
	}
	versions := versionsOf(held)
	for _, r := range records {
		for _, l := range r.Links {
			if _, ok := versions[l.Tag]; ok {
				versions[l.Tag] = l.Version
			}
		}
		if !cmd.Query.Matches(&r) {
			continue
		}
		if guard(cmd.Name, "evolve", func() { state = cmd.Evolve(state, r) }) != nil {
			return
		}
		after = r.Position
	}
	c.put(foldEntry{key: key, state: state, after: after, versions: versions})
}

// fromCache collects the records matching q from the owners' complete record
// caches, in ascending position order. It reports false when some query item
// has no reserved tag with a complete cache (then the journal is read).
func fromCache(q journal.Query, held []*actors.Reservation) ([]journal.Record, bool) {
	byTag := make(map[journal.Tag]*actors.Reservation, len(held))
	for _, r := range held {
		if r.Complete {
			byTag[r.Stream.Tag] = r
		}
	}
	if len(byTag) == 0 {
		return nil, false
	}
	var out []journal.Record
	seen := make(map[uuid.UUID]bool)
	for _, it := range q.Items {
		var src *actors.Reservation
		for _, t := range it.Tags {
			if r, ok := byTag[t]; ok {
				src = r
				break
			}
		}
		if src == nil {
			return nil, false
		}
		for i := range src.Records {
			r := &src.Records[i]
			if !seen[r.ID] && it.Matches(&r.Event) {
				seen[r.ID] = true
				out = append(out, *r)
			}
		}
	}
	slices.SortFunc(out, func(a, b journal.Record) int { return a.Position.Compare(b.Position) })
	return out, true
}

// decide runs cmd.Decide; rejected reports that err is Decide's own (domain) error.
func decide[S any](ctx context.Context, x *Executor, cmd Command[S], state S) (events []journal.Event, rejected bool, err error) {
	_, span := x.tel.tracer.Start(ctx, SpanDecide)
	defer span.End()
	var derr error
	if err := guard(cmd.Name, "decide", func() { events, derr = cmd.Decide(state) }); err != nil {
		markFailed(span, err)
		return nil, false, err
	}
	if derr != nil {
		markRejected(span, derr)
		return nil, true, derr
	}
	span.SetAttributes(attribute.Int("scribe.dcb.decided", len(events)))
	return events, false, nil
}

// guard runs f, turning a panic into an *actors.PanicError naming the
// command and the phase.
func guard(command, phase string, f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &actors.PanicError{Command: command, Phase: phase, Value: v, Stack: debug.Stack()}
		}
	}()
	f()
	return nil
}

// prepare checks the decided events' tags and partition and fills in IDs and
// metadata defaults. The events slice is Decide's; it is modified in place.
func (x *Executor) prepare(ctx context.Context, command, partition string, streams []journal.StreamID, events []journal.Event, opts Options) error {
	reserved := make(map[journal.Tag]bool, len(streams))
	for _, s := range streams {
		reserved[s.Tag] = true
	}
	sc := trace.SpanContextFromContext(ctx)
	for i := range events {
		e := &events[i]
		for _, t := range e.Tags {
			if !reserved[t] {
				return fmt.Errorf("%w: command %q decided event %d (%s) with tag %q, which its query does not name and Command.Tags does not list; add the tag to Command.Tags so its owner is reserved", ErrInvalidCommand, command, i, e.Type, t)
			}
		}
		m := &e.Metadata
		if m.Partition == "" {
			m.Partition = partition
		}
		if m.Partition != partition {
			return fmt.Errorf("%w: command %q decided event %d (%s) in partition %q, but its query reads partition %q; DCB commands write to their query's partition", ErrInvalidCommand, command, i, e.Type, m.Partition, partition)
		}
		if e.ID == uuid.Nil {
			if opts.IdempotencyKey != "" {
				e.ID = idempotentID(partition, command, opts.IdempotencyKey, i)
			} else {
				e.ID = journal.NewEventID()
			}
		}
		d := opts.Metadata
		m.CorrelationID = cmp.Or(m.CorrelationID, d.CorrelationID)
		m.CausationID = cmp.Or(m.CausationID, d.CausationID)
		m.UserID = cmp.Or(m.UserID, d.UserID)
		m.IdempotencyKey = cmp.Or(m.IdempotencyKey, opts.IdempotencyKey, d.IdempotencyKey)
		m.CommandHash = cmp.Or(m.CommandHash, d.CommandHash)
		if m.Scopes == nil {
			m.Scopes = d.Scopes
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = d.CreatedAt
		}
		if m.TraceParent == "" {
			m.TraceParent, m.TraceState = d.TraceParent, d.TraceState
			if m.TraceParent == "" && sc.IsValid() {
				m.TraceParent = otelx.TraceParent(sc)
				m.TraceState = sc.TraceState().String()
			}
		}
	}
	return nil
}

// append writes the events once, fenced by the owners' leases and versions,
// with the DCB condition as a backstop.
func (x *Executor) append(ctx context.Context, command string, q journal.Query, held []*actors.Reservation, events []journal.Event, after journal.Position) (journal.AppendResult, error) {
	ctx, span := x.tel.tracer.Start(ctx, SpanAppend, trace.WithAttributes(
		attribute.Int("scribe.dcb.events", len(events)),
	))
	defer span.End()
	opts := journal.AppendOptions{
		Expect:    make(map[journal.Tag]uint64, len(held)),
		Leases:    make([]journal.Lease, len(held)),
		Condition: &journal.AppendCondition{FailIfEventsMatch: q, After: after},
	}
	for i, r := range held {
		opts.Expect[r.Stream.Tag] = r.Version
		opts.Leases[i] = r.Lease
	}
	start := time.Now()
	res, err := x.journal.Append(ctx, events, opts)
	x.tel.recordAppend(ctx, time.Since(start), len(res.Records), err)
	if err != nil {
		if errors.Is(err, journal.ErrAppendConditionFailed) || errors.Is(err, journal.ErrVersionMismatch) {
			streams := make([]journal.StreamID, len(held))
			for i, r := range held {
				streams[i] = r.Stream
			}
			err = &ConflictError{Command: command, Streams: streams, Err: err}
			x.tel.conflicts.Add(ctx, 1, metric.WithAttributes(attribute.String("scribe.command", command)))
		} else {
			err = fmt.Errorf("tagconsistency: command %q: append: %w", command, err)
		}
		markFailed(span, err)
		return res, err
	}
	span.SetAttributes(attribute.String("scribe.position", res.Last().String()), attribute.Bool("scribe.duplicate", res.Duplicate))
	return res, nil
}

// confirmAll hands every owner the appended records that carry its tag. The
// records are durable whatever Confirm returns: a failed confirm is recorded
// on the span (the owner reloads before writing again, and the journal fences
// it meanwhile), not returned to the caller.
func (x *Executor) confirmAll(ctx context.Context, held []*actors.Reservation, records []journal.Record) {
	ctx, span := x.tel.tracer.Start(ctx, SpanConfirm, trace.WithAttributes(attribute.Int("scribe.dcb.tags", len(held))))
	defer span.End()
	x.release(ctx, span, held, "confirming", func(ctx context.Context, r *actors.Reservation) error {
		var mine []journal.Record
		for _, rec := range records {
			if rec.HasTag(r.Stream.Tag) {
				mine = append(mine, rec)
			}
		}
		return r.Grantor.Confirm(ctx, mine)
	})
}

// cancelAll releases every reservation. cause is passed to the owners (nil:
// nothing was written and their view is exact).
func (x *Executor) cancelAll(ctx context.Context, held []*actors.Reservation, cause error) {
	if len(held) == 0 {
		return
	}
	ctx, span := x.tel.tracer.Start(ctx, SpanCancel, trace.WithAttributes(
		attribute.Int("scribe.dcb.tags", len(held)),
		attribute.Bool("scribe.dcb.reload", cause != nil),
	))
	defer span.End()
	x.release(ctx, span, held, "cancelling", func(ctx context.Context, r *actors.Reservation) error {
		return r.Grantor.Cancel(ctx, cause)
	})
}

// release runs end (a Confirm or Cancel) for every reservation at once, so
// that every tag is freed one owner round trip after the command finished,
// each with its own ReleaseTimeout and regardless of the caller's context.
// Failures are recorded on span.
func (x *Executor) release(ctx context.Context, span trace.Span, held []*actors.Reservation, verb string, end func(context.Context, *actors.Reservation) error) {
	ctx = context.WithoutCancel(ctx)
	errs := make([]error, len(held))
	one := func(i int) {
		cctx, cancel := context.WithTimeout(ctx, x.releaseTimeout)
		defer cancel()
		if err := end(cctx, held[i]); err != nil {
			errs[i] = fmt.Errorf("tagconsistency: %s %s: %w", verb, held[i].Stream, err)
		}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(held); i++ {
		wg.Go(func() { one(i) })
	}
	one(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			markFailed(span, err)
		}
	}
}
