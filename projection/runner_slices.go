package projection

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// A sliced runner (Projection.Slicing) works like this:
//
//   - Membership: every LeaseTTL/10 it joins the projection's live runners
//     in the store (SliceStore.JoinSlices, a lease of its own) and derives
//     the range of slices it should own from the sorted list
//     (Slicing.Share). Every runner computes the same ranges from the same
//     list; while lists differ (a runner just joined or died) two runners
//     may want one slice, and the slice's lease decides.
//   - Ownership: it releases the slices it holds outside its range (between
//     batches, so never inside a commit), claims the free or expired slices
//     of its range, and renews the rest. A runner that joins gets its share
//     once the others have seen it (one period) and released (their next
//     batch boundary; the joining runner retries every LeaseTTL/40 until
//     it holds its share). A runner's membership lasts LeaseTTL/2, so a
//     runner that died leaves the list before its slice leases lapse and
//     the others claim its slices within LeaseTTL/40 of their lapsing: no
//     slice stays unowned much longer than LeaseTTL. (A runner whose batch
//     takes longer than LeaseTTL/2 drops out of the list meanwhile; the
//     others want its slices but cannot claim them while it renews, and it
//     rejoins at its next batch boundary.)
//   - Reading: one SubscribeSlices over the tag slices of the slices it
//     holds, from the oldest of their checkpoints; a record is kept for each
//     of its slices that the runner holds and whose checkpoint is before
//     it, so a slice taken over with an older checkpoint loses and repeats
//     nothing. The subscription restarts whenever the held set changes.
//   - Committing: a batch commits under the leases of the slices it
//     touches (SliceStore.CommitSlices), each fenced by epoch, expiry and
//     checkpoint in the store, in the transaction of the read model: the
//     guarantees of an unsliced projection hold per slice.

// newSliced checks a sliced projection's configuration for NewRunner.
func (r *Runner[Tx]) newSliced() error {
	sl, err := r.p.Slicing.withDefaults()
	if err != nil {
		return fmt.Errorf("projection %s: %w", r.key, err)
	}
	r.p.Slicing = &sl
	if q := r.p.Query; q.Partition != "" || q.All || len(q.Items) > 0 {
		return fmt.Errorf("projection %s: Query is set on a sliced projection; leave it empty: Slicing selects the events (its Group, Partition and Types)", r.key)
	}
	var ok bool
	if r.slices, ok = r.store.(SliceStore[Tx]); !ok {
		return fmt.Errorf("projection %s: the store %T cannot keep sliced projections (it is not a projection.SliceStore)", r.key, r.store)
	}
	if r.sliceSrc, ok = r.src.(journal.SliceSubscriber); !ok {
		return fmt.Errorf("projection %s: the journal %T cannot be read by slice (it is not a journal.SliceSubscriber)", r.key, r.src)
	}
	return nil
}

// slicedRunner is the state of one sliced runner's active period.
type slicedRunner[Tx any] struct {
	r     *Runner[Tx]
	store SliceStore[Tx]
	src   journal.SliceSubscriber
	s     Slicing
	held  map[int]*SliceLease
	last  journal.Position // newest position committed, for Progress
	// short is set by rebalance while the runner holds less than its
	// share: it tries again sooner.
	short bool

	feed     chan item
	stopFeed func()

	// part is the feed of a projection across several databases, whose
	// slices are partitions; nil for a sliced projection.
	part *partitionFeed
}

// runSliced is Run for a sliced projection.
func (r *Runner[Tx]) runSliced(ctx context.Context) error {
	delay := r.o.Backoff
	joined := false
	for {
		err := r.setup(ctx)
		if err == nil {
			sr := &slicedRunner[Tx]{r: r, store: r.slices, src: r.sliceSrc, held: map[int]*SliceLease{}, part: r.part}
			if r.p.Slicing != nil {
				sr.s = *r.p.Slicing
			}
			err = sr.run(ctx, &joined)
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
			r.o.Logger.Warn("projection slice lease lost; claiming again", "projection", r.key.String(), "owner", r.o.Owner, "error", err)
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

// run holds slices and applies their batches until an error or ctx ends;
// it releases what it holds and leaves the live runners when it returns.
func (sr *slicedRunner[Tx]) run(ctx context.Context, joined *bool) (err error) {
	r := sr.r
	defer func() {
		sr.restartFeed(ctx, false)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = sr.store.ReleaseSlices(rctx, sr.leases(nil))
		if ctx.Err() != nil || errors.Is(err, ErrSuperseded) {
			_ = sr.store.LeaveSlices(rctx, r.key, r.o.Owner)
		}
	}()
	if err := sr.rebalance(ctx); err != nil {
		return err
	}
	*joined = true
	tick := time.NewTicker(sr.period())
	defer tick.Stop()
	activated := r.o.NoTakeOver
	var lastCheck, lastReplay time.Time
	var pending []journal.Record
	var pendingSlices []int
	for {
		if r.replayer != nil && len(sr.held) > 0 && time.Since(lastReplay) >= r.o.ReplayInterval {
			if err := r.replayRequested(ctx); err != nil {
				return err
			}
			lastReplay = time.Now()
		}
		if len(pending) == 0 {
			r.mu.Lock()
			r.oldest = time.Time{}
			r.mu.Unlock()
			if !activated && len(sr.feed) == 0 && time.Since(lastCheck) > 200*time.Millisecond {
				lastCheck = time.Now()
				caught, err := sr.caughtUp(ctx)
				if err != nil {
					return err
				}
				if caught {
					if err := r.store.Activate(ctx, r.key); err != nil {
						return err
					}
					activated = true
					r.o.Logger.Info("sliced projection caught up and active", "projection", r.key.String())
				}
			}
			var wait, replay <-chan time.Time
			if !activated {
				wait = time.After(250 * time.Millisecond)
			}
			if r.replayer != nil && len(sr.held) > 0 {
				replay = time.After(r.o.ReplayInterval - time.Since(lastReplay))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
				if err := sr.rebalance(ctx); err != nil {
					return err
				}
				tick.Reset(sr.period())
				continue
			case <-wait:
				continue
			case <-replay:
				continue
			case it := <-sr.feed:
				if it.err != nil {
					return it.err
				}
				pending, pendingSlices = sr.deliveries(it, pending, pendingSlices)
			}
		}
	drain:
		for len(pending) < r.o.BatchSize {
			select {
			case it := <-sr.feed:
				if it.err != nil {
					return it.err
				}
				pending, pendingSlices = sr.deliveries(it, pending, pendingSlices)
			default:
				break drain
			}
		}
		if len(pending) == 0 {
			continue
		}
		r.mu.Lock()
		r.oldest = pending[0].RecordedAt
		r.mu.Unlock()
		if err := r.applyAll(ctx, sr.target(), pending, pendingSlices); err != nil {
			return err
		}
		pending, pendingSlices = pending[:0], pendingSlices[:0]
		select {
		case <-tick.C:
			if err := sr.rebalance(ctx); err != nil {
				return err
			}
			tick.Reset(sr.period())
		default:
		}
	}
}

// period is the time to the next rebalance: LeaseTTL/10, or LeaseTTL/40
// while the runner holds less than its share (another runner has not
// released it yet, or it waits for a dead runner's leases to lapse).
func (sr *slicedRunner[Tx]) period() time.Duration {
	if sr.short {
		return max(sr.r.o.LeaseTTL/40, time.Millisecond)
	}
	return sr.r.o.LeaseTTL / 10
}

// deliveries appends it's record once for each slice it is delivered to
// that this runner holds and has not applied it in yet; a partitioned
// feed's record once, for its partition's slice.
func (sr *slicedRunner[Tx]) deliveries(it item, recs []journal.Record, sl []int) ([]journal.Record, []int) {
	rec := it.rec
	if sr.part != nil {
		if _, ok := sr.held[it.slice]; ok {
			sr.part.from[rec.ID] = it.member
			recs, sl = append(recs, rec), append(sl, it.slice)
		}
		return recs, sl
	}
	for _, s := range sr.s.slicesOf(&rec) {
		if l, ok := sr.held[s]; ok && rec.Position.After(l.Checkpoint) {
			recs, sl = append(recs, rec), append(sl, s)
		}
	}
	return recs, sl
}

// leases returns the held leases of the given slices (all when nil), by slice.
func (sr *slicedRunner[Tx]) leases(of []int) []SliceLease {
	if of == nil {
		of = slices.Sorted(maps.Keys(sr.held))
	}
	out := make([]SliceLease, 0, len(of))
	for _, s := range of {
		if l, ok := sr.held[s]; ok {
			out = append(out, *l)
		}
	}
	return out
}

// rebalance joins the live runners, renews what it holds, releases what is
// outside its share and claims what is free inside it; the feed restarts
// when the held set changed.
func (sr *slicedRunner[Tx]) rebalance(ctx context.Context) error {
	r := sr.r
	// Membership lasts half a lease: a dead runner leaves the list before
	// its slice leases lapse, so the others already want its slices (and
	// retry every LeaseTTL/40) when they become free.
	var members []string
	var err error
	if sr.part != nil {
		members, err = sr.joinPartitions(ctx)
	} else {
		members, err = sr.store.JoinSlices(ctx, r.key, sr.s, r.o.Owner, r.o.LeaseTTL/2)
	}
	if err != nil {
		return err
	}
	changed := false
	lost, err := sr.store.RenewSlices(ctx, sr.leases(nil))
	if err != nil {
		return err
	}
	for _, s := range lost {
		delete(sr.held, s)
		changed = true
	}
	lo, hi := sr.s.Share(members, r.o.Owner)
	var out, want []int
	for s := range sr.held {
		if s < lo || s >= hi {
			out = append(out, s)
		}
	}
	if len(out) > 0 {
		if err := sr.store.ReleaseSlices(ctx, sr.leases(out)); err != nil {
			return err
		}
		for _, s := range out {
			delete(sr.held, s)
		}
		changed = true
	}
	for s := lo; s < hi; s++ {
		if _, ok := sr.held[s]; !ok {
			want = append(want, s)
		}
	}
	if len(want) > 0 {
		got, err := sr.store.ClaimSlices(ctx, r.key, r.o.Owner, r.o.LeaseTTL, want)
		if err != nil {
			return err
		}
		for _, l := range got {
			sr.held[l.Slice] = &l
			changed = true
		}
	}
	sr.short = len(want) > 0 && len(sr.held) < hi-lo
	if changed || sr.stopFeed == nil {
		sr.restartFeed(ctx, true)
		if len(sr.held) > 0 {
			r.o.Logger.Info("projection slices held", "projection", r.key.String(), "owner", r.o.Owner, "slices", len(sr.held), "share", fmt.Sprintf("[%d,%d)", lo, hi), "runners", len(members))
		}
	}
	if len(sr.held) > 0 {
		r.setState(StateRunning)
	} else {
		r.setState(StateStandby)
	}
	return nil
}

// restartFeed stops the current subscription and, with start and slices
// held, subscribes to the held slices from the oldest of their checkpoints.
func (sr *slicedRunner[Tx]) restartFeed(ctx context.Context, start bool) {
	if sr.stopFeed != nil {
		sr.stopFeed()
		sr.stopFeed, sr.feed = nil, nil
	}
	if !start {
		return
	}
	if len(sr.held) == 0 {
		sr.stopFeed = func() {}
		return
	}
	if sr.part != nil {
		fctx, cancel := context.WithCancel(ctx)
		feed := make(chan item, 2*sr.r.o.BatchSize)
		var wg sync.WaitGroup
		sr.startPartitions(fctx, feed, &wg)
		sr.feed = feed
		sr.stopFeed = func() { cancel(); wg.Wait() }
		return
	}
	owned := slices.Sorted(maps.Keys(sr.held))
	from := sr.held[owned[0]].Checkpoint
	for _, s := range owned {
		if cp := sr.held[s].Checkpoint; cp.Before(from) {
			from = cp
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	feed := make(chan item, 2*sr.r.o.BatchSize)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rec, err := range sr.src.SubscribeSlices(fctx, sr.s.query(owned), from) {
			select {
			case feed <- item{rec: rec, err: err}:
			case <-fctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	sr.feed = feed
	sr.stopFeed = func() { cancel(); wg.Wait() }
}

// target stores batches under the leases of the slices they touch.
func (sr *slicedRunner[Tx]) target() batchTarget {
	r := sr.r
	touched := func(b Batch) []int {
		s := slices.Clone(b.Slices)
		slices.Sort(s)
		return slices.Compact(s)
	}
	return batchTarget{
		renew: func(ctx context.Context) error {
			lost, err := sr.store.RenewSlices(ctx, sr.leases(nil))
			if err == nil && len(lost) > 0 {
				err = fmt.Errorf("%w: slices %v of %s", ErrFenced, lost, r.key)
			}
			return err
		},
		commit: func(ctx context.Context, b Batch) error {
			ls := sr.leases(touched(b))
			if sr.part != nil {
				sr.setMembers(ls, b)
			}
			return sr.store.CommitSlices(ctx, ls, b.Records, b.Slices, func(ctx context.Context, tx Tx) error {
				return r.p.Handle(ctx, tx, b)
			})
		},
		done: func(b Batch) {
			for i, s := range b.Slices {
				l := sr.held[s]
				l.Checkpoint, l.EventID = b.Records[i].Position, b.Records[i].ID
				l.Events++
				if sr.part != nil {
					l.Member = sr.part.from[b.Records[i].ID]
					delete(sr.part.from, b.Records[i].ID)
				}
			}
			if p := b.Records[len(b.Records)-1].Position; p.After(sr.last) {
				sr.last = p
			}
		},
		checkpoint: func() journal.Position { return sr.last },
		fail: func(ctx context.Context, pos journal.Position, msg string) error {
			ls := sr.leases(nil)
			if len(ls) == 0 {
				return fmt.Errorf("%w: %s holds no slice", ErrFenced, r.key)
			}
			return sr.store.FailSlice(ctx, ls[0], pos, msg)
		},
	}
}

// caughtUp reports whether no slice of the projection has a record after
// its checkpoint (every slice, not only the held ones: the version becomes
// active only when all of it has caught up).
func (sr *slicedRunner[Tx]) caughtUp(ctx context.Context) (bool, error) {
	if sr.part != nil {
		return sr.partitionsCaughtUp(ctx)
	}
	sts, _, err := sr.store.SliceStatuses(ctx, sr.r.key)
	if err != nil {
		return false, err
	}
	if len(sts) != sr.s.Count {
		return false, nil
	}
	for _, st := range sts {
		for _, err := range sr.src.ReadSlices(ctx, sr.s.query([]int{st.Slice}), st.Checkpoint, 1) {
			if err != nil {
				return false, err
			}
			return false, nil
		}
	}
	return true, nil
}
