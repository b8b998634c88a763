package projection

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/scribe-es/scribe/journal"
)

// Source is what a runner reads: the journal's feed (Subscribe) and DCB reads
// (Read, to tell when the projection has caught up). Every journal.Journal is
// a Source.
type Source interface {
	journal.Subscriber
	Read(ctx context.Context, q journal.Query, opts journal.ReadOptions) iter.Seq2[journal.Record, error]
}

// Options tune a Runner. The zero value is valid.
type Options struct {
	// Owner names this runner in leases and status; default host-pid-random.
	// Two runners must not share an owner.
	Owner string
	// BatchSize is the most records one handler call receives. Default 512.
	BatchSize int
	// LeaseTTL is how long the lease lasts without a commit or renewal; a
	// standby takes over at most about this long after the active runner
	// died. The runner renews every LeaseTTL/3. Default 10s.
	LeaseTTL time.Duration
	// MaxAttempts is how many times one record is tried before the projection
	// stops with a *FailedError. Default 5.
	MaxAttempts int
	// Backoff is the pause before the first retry; it doubles up to
	// MaxBackoff. Defaults 100ms and 10s.
	Backoff, MaxBackoff time.Duration
	// NoTakeOver keeps the runner from making its version the active one
	// when it has caught up (by default the runners of older versions then
	// stop with ErrSuperseded).
	NoTakeOver bool
	// Logger receives state changes and failures. Default: discard.
	Logger *slog.Logger
	// MeterProvider records scribe.projection.* metrics. Default: no-op; the
	// library never reads the OpenTelemetry globals.
	MeterProvider metric.MeterProvider
	// ReplayInterval is how often a runner holding the lease looks for dead
	// letters whose replay was requested, when its projection has Replay
	// and its store is a DeadLetterReplayer. Default 5s.
	ReplayInterval time.Duration
	// Committed, when set, is called after each batch committed, on the
	// runner's goroutine (the next batch waits for it), before Progress and
	// WaitFor show the batch: to wake readers of the read model.
	Committed func(b Batch)
}

func (o Options) withDefaults() (Options, error) {
	if o.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	o.BatchSize, o.LeaseTTL, o.MaxAttempts = cmp.Or(o.BatchSize, 512), cmp.Or(o.LeaseTTL, 10*time.Second), cmp.Or(o.MaxAttempts, 5)
	o.Backoff, o.MaxBackoff = cmp.Or(o.Backoff, 100*time.Millisecond), cmp.Or(o.MaxBackoff, 10*time.Second)
	o.ReplayInterval = cmp.Or(o.ReplayInterval, 5*time.Second)
	switch {
	case o.BatchSize < 0:
		return o, fmt.Errorf("projection: Options.BatchSize is %d; use a positive number or 0 for the default 512", o.BatchSize)
	case o.LeaseTTL < 10*time.Millisecond:
		return o, fmt.Errorf("projection: Options.LeaseTTL is %s; use at least 10ms (or 0 for the default 10s)", o.LeaseTTL)
	case o.MaxAttempts < 0:
		return o, fmt.Errorf("projection: Options.MaxAttempts is %d; use a positive number or 0 for the default 5", o.MaxAttempts)
	case o.Backoff < 0 || o.MaxBackoff < o.Backoff:
		return o, fmt.Errorf("projection: Options.Backoff %s and MaxBackoff %s: both must be positive and Backoff ≤ MaxBackoff", o.Backoff, o.MaxBackoff)
	case o.ReplayInterval < 0:
		return o, fmt.Errorf("projection: Options.ReplayInterval is %s; use a positive duration or 0 for the default 5s", o.ReplayInterval)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MeterProvider == nil {
		o.MeterProvider = metricnoop.NewMeterProvider()
	}
	return o, nil
}

// Progress is a runner's own view of its projection.
type Progress struct {
	State State
	// Checkpoint and Events are as of the runner's last commit.
	Checkpoint journal.Position
	Events     uint64
	Epoch      uint64
	// Lag is how long the oldest record the runner has read but not yet
	// applied has waited since it was recorded; zero when nothing waits.
	Lag time.Duration
	// LastLag is the age of the newest record of the last applied batch when
	// that batch committed (end-to-end delay of the live path).
	LastLag time.Duration
	// Error is the last failure (handler or infrastructure), "" after a
	// success; FailedAt is the record the projection stopped at.
	Error    string
	FailedAt journal.Position
}

// Runner feeds one projection from the journal. Several runners of one
// projection (in one or many processes) may run at once: the store's slice
// leases let one apply each slice while the others stand by and take over
// when it dies or lets its lease lapse.
type Runner[Tx any] struct {
	src   Source
	store Store[Tx]
	p     Projection[Tx]
	key   Key
	// replayer is the store's DeadLetterReplayer when the projection has
	// Replay, else nil.
	replayer DeadLetterReplayer[Tx]
	o        Options
	attrs    metric.MeasurementOption

	applied  metric.Int64Counter
	failures metric.Int64Counter
	lagHist  metric.Float64Histogram

	// rd reads the projection's slices: the whole feed, tag slices or
	// partitions.
	rd reader

	// setUp is set once Store.Setup succeeded; used by Run's goroutine only.
	setUp bool

	mu       sync.Mutex
	progress Progress
	oldest   time.Time // RecordedAt of the oldest unapplied record read, zero if none
	changed  chan struct{}
}

// NewRunner checks p and o and returns a runner; Run starts it.
func NewRunner[Tx any](src Source, store Store[Tx], p Projection[Tx], o Options) (*Runner[Tx], error) {
	key := Key{Name: p.Name, Version: p.Version}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if src == nil || store == nil {
		return nil, fmt.Errorf("projection %s: the journal and the store must not be nil", key)
	}
	if p.Handle == nil {
		return nil, fmt.Errorf("projection %s: Handle is nil; give the function that applies a batch", key)
	}
	q := p.Query
	if q.Partition == "" && !q.All && len(q.Items) == 0 {
		q = journal.Query{All: true, AllPartitions: true}
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("projection %s: %w", key, err)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m := o.MeterProvider.Meter("github.com/scribe-es/scribe/projection")
	r := &Runner[Tx]{src: src, store: store, p: p, key: key, o: o, changed: make(chan struct{}),
		attrs: metric.WithAttributes(attribute.String("scribe.projection.name", key.Name), attribute.Int("scribe.projection.version", key.Version))}
	r.progress.State = StateIdle
	if r.rd, err = newReader(src, &r.p, q); err != nil {
		return nil, fmt.Errorf("projection %s: %w", key, err)
	}
	if rp, ok := store.(DeadLetterReplayer[Tx]); ok && p.Replay != nil {
		r.replayer = rp
	}
	if r.applied, err = m.Int64Counter("scribe.projection.events", metric.WithUnit("{event}"),
		metric.WithDescription("Events applied by the projection's handler and committed with its checkpoint.")); err != nil {
		return nil, err
	}
	if r.failures, err = m.Int64Counter("scribe.projection.failures", metric.WithUnit("{failure}"),
		metric.WithDescription("Failed batch attempts (handler or store).")); err != nil {
		return nil, err
	}
	if r.lagHist, err = m.Float64Histogram("scribe.projection.lag", metric.WithUnit("s"),
		metric.WithDescription("Age of a batch's newest event when the batch committed.")); err != nil {
		return nil, err
	}
	return r, nil
}

// Key returns the projection's name and version.
func (r *Runner[Tx]) Key() Key { return r.key }

// Owner returns the name this runner uses in leases.
func (r *Runner[Tx]) Owner() string { return r.o.Owner }

// Progress returns the runner's current view.
func (r *Runner[Tx]) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.progress
	if !r.oldest.IsZero() {
		p.Lag = max(0, time.Since(r.oldest))
	}
	return p
}

// Behind counts the journal's events after this runner's checkpoint: its
// lag in events. For a projection whose query selects only some events it
// is an upper bound (events of other types count too). It needs a source
// that is also a journal.Inspector (every journal.Journal is).
func (r *Runner[Tx]) Behind(ctx context.Context) (uint64, error) {
	in, ok := r.src.(journal.Inspector)
	if !ok {
		return 0, fmt.Errorf("projection %s: the source %T cannot count events (it is not a journal.Inspector)", r.key, r.src)
	}
	return in.CountAfter(ctx, r.Progress().Checkpoint)
}

// WaitFor blocks until this runner has applied the record at pos (its
// checkpoint is at or after pos, and Options.Committed has returned for the
// batch that carried it), the projection stops, or ctx ends. pos should be
// a record the projection's query selects. A sliced runner's checkpoint is
// the newest it committed in any slice: to wait for a record of any slice,
// watch Store.Slices.
func (r *Runner[Tx]) WaitFor(ctx context.Context, pos journal.Position) error {
	for {
		r.mu.Lock()
		p, ch := r.progress, r.changed
		r.mu.Unlock()
		if !p.Checkpoint.Before(pos) {
			return nil
		}
		switch p.State {
		case StateFailed, StateSuperseded:
			return fmt.Errorf("projection %s is %s at %s: %s", r.key, p.State, p.Checkpoint, p.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (r *Runner[Tx]) update(f func(p *Progress)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.progress)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Runner[Tx]) setState(s State) {
	r.update(func(p *Progress) {
		if p.State != s {
			r.o.Logger.Info("projection state", "projection", r.key.String(), "owner", r.o.Owner, "state", string(s), "checkpoint", p.Checkpoint.String())
		}
		p.State = s
	})
}

// Run joins the projection's live runners in the store and holds a share
// of its slices (an unsliced projection's one slice, or a standby),
// applying batches until ctx ends (Run returns nil), a newer version takes
// over (ErrSuperseded), or the handler fails MaxAttempts times on one
// record (a *FailedError; the store records the failure). A lost lease
// sends the runner back to claiming; store and journal outages are retried
// with backoff for as long as they last.
//
// Run fails fast on configuration: until its first join succeeds, a store
// not usable as configured (journal.ErrStoreNotOpen or ErrConfiguration, a
// version stored with another layout: ErrSlicingChanged), or a read model
// whose Setup fails so (the Postgres store classifies a missing schema or
// table and a missing privilege as journal.ErrConfiguration), is not
// retried: Run returns at once an error matching journal.ErrConfiguration
// that says what to do.
func (r *Runner[Tx]) Run(ctx context.Context) error {
	delay := r.o.Backoff
	joined := false
	for {
		err := r.setup(ctx)
		if err == nil {
			h := &holder[Tx]{r: r, held: map[int]*Lease{}, from: map[delivery]string{}, passed: map[int]passMark{}}
			err = h.run(ctx, &joined)
		}
		if ctx.Err() != nil {
			return r.stopped()
		}
		if !joined && misconfigured(err) {
			return r.cannotStart(err)
		}
		if r.ended(err) {
			return err
		}
		switch {
		case errors.Is(err, ErrPaused):
			r.setState(StatePaused)
			if !sleep(ctx, r.o.LeaseTTL/4) {
				return r.stopped()
			}
		case errors.Is(err, ErrFenced):
			r.o.Logger.Warn("projection lease lost; claiming again", "projection", r.key.String(), "owner", r.o.Owner, "error", err)
			r.setState(StateStandby)
		default:
			if !r.backOff(ctx, err, &delay) {
				return r.stopped()
			}
			continue
		}
		delay = r.o.Backoff
	}
}

// backOff records a store or journal error, waits *delay (false: ctx ended
// first) and doubles *delay up to Options.MaxBackoff.
func (r *Runner[Tx]) backOff(ctx context.Context, err error, delay *time.Duration) bool {
	r.update(func(p *Progress) { p.Error = err.Error() })
	r.o.Logger.Warn("projection retrying after an error", "projection", r.key.String(), "in", delay.String(), "error", err)
	r.failures.Add(context.WithoutCancel(ctx), 1, r.attrs)
	if !sleep(ctx, *delay) {
		return false
	}
	*delay = min(2*(*delay), r.o.MaxBackoff)
	return true
}

// setup runs the projection's Store.Setup once per runner, before its first
// batch; a failure is retried like any store error, unless it is a
// configuration error (misconfigured), which ends Run.
func (r *Runner[Tx]) setup(ctx context.Context) error {
	if r.setUp {
		return nil
	}
	if err := r.store.Setup(ctx, r.key, r.p.readModelKind(), r.p.Setup); err != nil {
		return err
	}
	r.setUp = true
	return nil
}

// misconfigured reports whether err says that the store or the read model
// cannot be used as configured, which no retry mends.
func misconfigured(err error) bool {
	return errors.Is(err, journal.ErrStoreNotOpen) || errors.Is(err, journal.ErrConfiguration) || errors.Is(err, ErrSlicingChanged)
}

// cannotStart records and returns the error of a misconfigured runner,
// matching journal.ErrConfiguration.
func (r *Runner[Tx]) cannotStart(err error) error {
	if !errors.Is(err, journal.ErrConfiguration) {
		err = fmt.Errorf("%w: %w", journal.ErrConfiguration, err)
	}
	err = fmt.Errorf("projection %s cannot start: %w", r.key, err)
	r.update(func(p *Progress) { p.Error = err.Error() })
	r.setState(StateStopped)
	r.o.Logger.Error("projection cannot start: its store or read model is not usable as configured", "projection", r.key.String(), "error", err)
	return err
}

// ended reports whether err ends Run: a record failed MaxAttempts times
// (state failed, logged) or a newer version became active (superseded).
func (r *Runner[Tx]) ended(err error) bool {
	var failed *FailedError
	switch {
	case errors.As(err, &failed):
		r.update(func(p *Progress) { p.State, p.FailedAt, p.Error = StateFailed, failed.At, failed.Err.Error() })
		r.o.Logger.Error("projection stopped", "projection", r.key.String(), "at", failed.At.String(), "event", failed.EventID, "attempts", failed.Attempts, "error", failed.Err)
		return true
	case errors.Is(err, ErrSuperseded):
		r.setState(StateSuperseded)
		return true
	}
	return false
}

func (r *Runner[Tx]) stopped() error {
	r.setState(StateStopped)
	return nil
}

// item is what a runner's feed delivers: a record, or the error that
// ended the feed; a partitioned feed adds its slice and member.
type item struct {
	rec    journal.Record
	err    error
	slice  int
	member string
}

// reader is how a runner reads the slices of its projection's layout.
// Its methods run on the runner's goroutine.
type reader interface {
	// layout returns the layout the runner joins with.
	layout() Layout
	// read starts reading the held slices (the leases are the runner's
	// own, not to be changed) into feed, each from its checkpoint, on
	// goroutines counted in wg that end with ctx.
	read(ctx context.Context, held map[int]*Lease, feed chan<- item, wg *sync.WaitGroup)
	// deliver returns the slices among held that it is delivered for and
	// have not applied it yet, and whether the slice it was read for
	// (item.slice) holds it and passes over it instead: its checkpoint
	// moves past it without applying it (Lease.Passed).
	deliver(it item, held map[int]*Lease) (to []int, passed bool)
	// caughtUp reports whether no slice of sts has a record after its
	// checkpoint (the version becomes active when all of it caught up).
	caughtUp(ctx context.Context, sts []SliceStatus) (bool, error)
}

// newReader returns the reader of p on src, whose query is q: by
// partition (with Slicing, partition × tag slice) across several
// databases, by tag slice, or the whole feed. It fills p.Slicing's
// defaults.
func newReader[Tx any](src Source, p *Projection[Tx], q journal.Query) (reader, error) {
	ps, byPartition := src.(PartitionedSource)
	byPartition = byPartition && len(ps.FeedPartitions()) > 0
	switch {
	case p.Slicing == nil && byPartition:
		return partitionFeed{src: ps, q: q}, nil
	case p.Slicing == nil:
		return wholeFeed{src: src, q: q}, nil
	case p.Query.Partition != "" || p.Query.All || len(p.Query.Items) > 0:
		return nil, errors.New("Query is set on a sliced projection; leave it empty: Slicing selects the events (its Group, Partition and Types)")
	}
	q = journal.Query{All: true, AllPartitions: true} // across several databases: every partition, unless Slicing names one
	if p.Slicing.Partition != "" {
		q = journal.Query{All: true, Partition: p.Slicing.Partition}
	}
	sl, err := p.Slicing.withDefaults()
	if err != nil {
		return nil, err
	}
	p.Slicing = &sl
	if byPartition {
		return partitionFeed{src: ps, q: q, s: &sl}, nil
	}
	ss, ok := src.(journal.SliceSubscriber)
	if !ok {
		return nil, fmt.Errorf("the journal %T cannot be read by slice (it is not a journal.SliceSubscriber)", src)
	}
	return tagFeed{src: ss, s: sl}, nil
}

// wholeFeed reads an unsliced projection: one slice, the journal's feed
// of what the projection's Query selects.
type wholeFeed struct {
	src Source
	q   journal.Query
}

func (wholeFeed) layout() Layout { return Layout{} }

func (f wholeFeed) read(ctx context.Context, held map[int]*Lease, feed chan<- item, wg *sync.WaitGroup) {
	from := held[0].Checkpoint
	wg.Go(func() { forward(ctx, f.src.Subscribe(ctx, f.q, from), feed, nil) })
}

func (wholeFeed) deliver(it item, held map[int]*Lease) ([]int, bool) {
	if l, ok := held[0]; ok && it.rec.Position.After(l.Checkpoint) {
		return []int{0}, false
	}
	return nil, false
}

func (f wholeFeed) caughtUp(ctx context.Context, sts []SliceStatus) (bool, error) {
	if len(sts) != 1 {
		return false, nil
	}
	checkpoint := sts[0].Checkpoint
	for rec, err := range f.src.Read(ctx, f.q, journal.ReadOptions{From: checkpoint, Limit: 2}) {
		if err != nil {
			return false, err
		}
		if rec.Position.After(checkpoint) {
			return false, nil
		}
	}
	return true, nil
}

// forward sends recs to feed, each item completed by tag when not nil,
// until ctx ends or an error, which it sends last.
func forward(ctx context.Context, recs iter.Seq2[journal.Record, error], feed chan<- item, tag func(*item)) {
	for rec, err := range recs {
		it := item{rec: rec, err: err}
		if tag != nil {
			tag(&it)
		}
		select {
		case feed <- it:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// replayRequested replays the dead letters whose replay was requested, in
// position order. A letter whose replay fails is kept by the store (with
// its request cleared) and logged; only a store error is returned.
func (r *Runner[Tx]) replayRequested(ctx context.Context) error {
	for {
		letters, err := r.replayer.ReplayRequests(ctx, r.key, 64)
		if err != nil || len(letters) == 0 {
			return err
		}
		if err := replay(ctx, r.replayer, r.key, letters, r.p.Replay, func(d DeadLetter, herr *HandlerError) {
			if herr == nil {
				r.o.Logger.Info("dead letter replayed", "projection", r.key.String(), "at", d.Record.Position.String(), "event", d.Record.ID.String())
				return
			}
			r.failures.Add(context.WithoutCancel(ctx), 1, r.attrs)
			r.o.Logger.Warn("dead letter replay failed; the letter is kept", "projection", r.key.String(), "at", d.Record.Position.String(), "event", d.Record.ID.String(), "error", herr.Err)
		}); err != nil {
			return err
		}
	}
}
