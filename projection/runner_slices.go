package projection

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// A runner works like this, for every layout (an unsliced projection is one
// slice):
//
//   - Membership: every LeaseTTL/10 it joins the live runners (Store.Join,
//     lasting LeaseTTL/2, so a dead runner leaves the list before its slice
//     leases lapse) and derives its range of slices from the sorted list
//     (Slicing.Share); while lists differ, the slice's lease decides. The
//     one slice of an unsliced projection is held by whichever claimed it.
//   - Ownership: between batches it releases the slices it holds outside
//     its range, claims the free or expired ones inside it (every
//     LeaseTTL/40 while short of its share) and renews the rest, so no
//     slice stays unowned much longer than LeaseTTL.
//   - Reading: the layout's reader reads the held slices, each from its
//     checkpoint; a record is kept for each held slice that has not applied
//     it, so a slice taken over loses and repeats nothing. A slice that
//     reads records it is not delivered (partition × tag slice) passes over
//     them (Lease.Passed). The reading restarts when the held set changes.
//   - Committing: a batch commits under the leases of the slices it
//     touches (Store.Commit), renewed every LeaseTTL/3 while it is applied.

// tagFeed reads a sliced projection's tag slices.
type tagFeed struct {
	src journal.SliceSubscriber
	s   Slicing
}

func (f tagFeed) layout() Layout { return f.s.Layout() }

// read subscribes to the held slices from the oldest of their checkpoints.
func (f tagFeed) read(ctx context.Context, held map[int]*Lease, feed chan<- item, wg *sync.WaitGroup) {
	owned := slices.Sorted(maps.Keys(held))
	from := held[owned[0]].Checkpoint
	for _, s := range owned {
		if cp := held[s].Checkpoint; cp.Before(from) {
			from = cp
		}
	}
	wg.Go(func() { forward(ctx, f.src.SubscribeSlices(ctx, f.s.query(owned), from), feed, nil) })
}

func (f tagFeed) deliver(it item, held map[int]*Lease) ([]int, bool) {
	var out []int
	for _, s := range f.s.slicesOf(&it.rec) {
		if l, ok := held[s]; ok && it.rec.Position.After(l.Checkpoint) {
			out = append(out, s)
		}
	}
	return out, false
}

func (f tagFeed) caughtUp(ctx context.Context, sts []SliceStatus) (bool, error) {
	if len(sts) != f.s.Count {
		return false, nil
	}
	for _, st := range sts {
		for _, err := range f.src.ReadSlices(ctx, f.s.query([]int{st.Slice}), st.Checkpoint, 1) {
			if err != nil {
				return false, err
			}
			return false, nil
		}
	}
	return true, nil
}

// delivery is a record's event ID and a slice it is delivered for.
type delivery struct {
	id    uuid.UUID
	slice int
}

// passMark is a record a slice passed over: its position on member, and
// its event ID.
type passMark struct {
	pos    journal.Position
	id     uuid.UUID
	member string
}

// holder is the state of one runner's period of holding slices: from its
// join to the error that ends it.
type holder[Tx any] struct {
	r *Runner[Tx]
	// layout is the joined layout, count the number of the projection's
	// slices (Share divides them).
	layout Layout
	count  int
	held   map[int]*Lease
	last   journal.Position    // newest position committed, for Progress
	short  bool                // holds less than its share: rebalance sooner
	from   map[delivery]string // the member each pending delivery was read from
	// passed is, by slice, the last record passed over after the slice's
	// pending deliveries: the commit of the last of them (or one of its
	// own) moves the slice's checkpoint there.
	passed map[int]passMark

	feed     chan item
	stopFeed func()
}

// run holds slices and applies their batches until an error or ctx ends;
// it releases what it holds and leaves the live runners when it returns.
func (h *holder[Tx]) run(ctx context.Context, joined *bool) (err error) {
	r := h.r
	defer func() {
		h.restartFeed(ctx, false)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = r.store.Release(rctx, h.leases(nil))
		if ctx.Err() != nil || errors.Is(err, ErrSuperseded) {
			_ = r.store.Leave(rctx, r.key, r.o.Owner)
		}
	}()
	if err := h.rebalance(ctx); err != nil {
		return err
	}
	*joined = true
	tick := time.NewTicker(h.period())
	defer tick.Stop()
	activated := r.o.NoTakeOver
	var lastCheck, lastReplay time.Time
	var pending []journal.Record
	var pendingSlices []int
	take := func(it item) error {
		if it.err == nil {
			pending, pendingSlices = h.deliveries(it, pending, pendingSlices)
		}
		return it.err
	}
	for {
		if r.replayer != nil && len(h.held) > 0 && time.Since(lastReplay) >= r.o.ReplayInterval {
			if err := r.replayRequested(ctx); err != nil {
				return err
			}
			lastReplay = time.Now()
		}
		var err error
		if len(pending) == 0 {
			r.mu.Lock()
			r.oldest = time.Time{}
			r.mu.Unlock()
			if !activated && len(h.feed) == 0 && time.Since(lastCheck) > 200*time.Millisecond {
				lastCheck = time.Now()
				sts, _, err := r.store.Slices(ctx, r.key)
				if err == nil {
					activated, err = r.rd.caughtUp(ctx, sts)
				}
				if err == nil && activated {
					if err = r.store.Activate(ctx, r.key); err == nil {
						r.o.Logger.Info("projection caught up and active", "projection", r.key.String())
					}
				}
				if err != nil {
					return err
				}
			}
			var wait, replay <-chan time.Time
			if !activated {
				wait = time.After(250 * time.Millisecond)
			}
			if r.replayer != nil && len(h.held) > 0 {
				replay = time.After(r.o.ReplayInterval - time.Since(lastReplay))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
				err = h.rebalanceNow(ctx, tick)
			case <-wait:
			case <-replay:
			case it := <-h.feed:
				err = take(it)
			}
		}
	drain:
		for err == nil && len(pending) < r.o.BatchSize {
			select {
			case it := <-h.feed:
				err = take(it)
			default:
				break drain
			}
		}
		switch {
		case err != nil:
			return err
		case len(pending) == 0 && len(h.passed) > 0:
			err = h.commitPassed(ctx)
		case len(pending) > 0:
			r.mu.Lock()
			r.oldest = pending[0].RecordedAt
			r.mu.Unlock()
			if err = h.applyRenewing(ctx, pending, pendingSlices); err != nil {
				return err
			}
			pending, pendingSlices = pending[:0], pendingSlices[:0]
			select {
			case <-tick.C:
				err = h.rebalanceNow(ctx, tick)
			default:
			}
		}
		if err != nil {
			return err
		}
	}
}

// rebalanceNow rebalances (its tick fired) and sets the tick's next period.
func (h *holder[Tx]) rebalanceNow(ctx context.Context, tick *time.Ticker) error {
	err := h.rebalance(ctx)
	tick.Reset(h.period())
	return err
}

// applyRenewing applies pending (applyAll) while renewing the held leases
// every LeaseTTL/3, so that retries and back-off do not let them lapse;
// a lease found lost ends the batch with ErrFenced.
func (h *holder[Tx]) applyRenewing(ctx context.Context, pending []journal.Record, sl []int) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ls := h.leases(nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(h.r.o.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := h.renew(actx, ls); errors.Is(err, ErrFenced) || errors.Is(err, ErrSuperseded) {
					cancel(err)
					return
				}
			}
		}
	})
	err := h.r.applyAll(actx, h, pending, sl)
	close(done)
	wg.Wait()
	if c := context.Cause(actx); c != nil && ctx.Err() == nil {
		return c
	}
	return err
}

// period is the time to the next rebalance: LeaseTTL/10, or LeaseTTL/40
// while the runner holds less than its share (another runner has not
// released it yet, or it waits for a dead runner's leases to lapse).
func (h *holder[Tx]) period() time.Duration {
	if h.short {
		return max(h.r.o.LeaseTTL/40, time.Millisecond)
	}
	return h.r.o.LeaseTTL / 10
}

// deliveries appends it's record once for each slice it is delivered to
// that this runner holds and has not applied it in yet, or records that
// its slice passed over it.
func (h *holder[Tx]) deliveries(it item, recs []journal.Record, sl []int) ([]journal.Record, []int) {
	to, passed := h.r.rd.deliver(it, h.held)
	if passed {
		h.passed[it.slice] = passMark{pos: it.rec.Position, id: it.rec.ID, member: it.member}
	}
	for _, s := range to {
		recs, sl = append(recs, it.rec), append(sl, s)
		delete(h.passed, s) // a later record of s: the checkpoint moves there
		if it.member != "" {
			h.from[delivery{it.rec.ID, s}] = it.member
		}
	}
	return recs, sl
}

// commitPassed moves the checkpoints of the slices that passed over
// records (and have no delivery pending) past them, in a commit that
// applies nothing.
func (h *holder[Tx]) commitPassed(ctx context.Context) error {
	if err := h.commit(ctx, Batch{}, nil, true); err != nil {
		return err
	}
	h.done(Batch{}, nil, true)
	return nil
}

// leases returns the held leases of the given slices (all when nil), by slice.
func (h *holder[Tx]) leases(of []int) []Lease {
	if of == nil {
		of = slices.Sorted(maps.Keys(h.held))
	}
	out := make([]Lease, 0, len(of))
	for _, s := range of {
		if l, ok := h.held[s]; ok {
			out = append(out, *l)
		}
	}
	return out
}

// rebalance joins the live runners, renews what it holds, releases what is
// outside its share and claims what is free inside it; the feed restarts
// when the held set changed.
func (h *holder[Tx]) rebalance(ctx context.Context) error {
	r := h.r
	// Membership lasts half a lease: a dead runner leaves the list before
	// its slice leases lapse, so the others already want its slices (and
	// retry every LeaseTTL/40) when they become free.
	l := r.rd.layout()
	members, err := r.store.Join(ctx, r.key, l, r.o.Owner, r.o.LeaseTTL/2)
	if err != nil {
		return err
	}
	switch {
	case len(l.Partitions) > 0 && (h.count == 0 || len(l.Partitions) > len(h.layout.Partitions)):
		sts, _, err := r.store.Slices(ctx, r.key)
		if err != nil {
			return err
		}
		h.count = len(sts)
	case len(l.Partitions) == 0:
		h.count = max(1, l.Count)
	}
	h.layout = l
	changed := false
	lost, err := r.store.Renew(ctx, h.leases(nil))
	if err != nil {
		return err
	}
	for _, s := range lost {
		delete(h.held, s)
		changed = true
	}
	lo, hi := Slicing{Count: h.count}.Share(members, r.o.Owner)
	if h.count == 1 {
		lo, hi = 0, 1 // one slice: whoever holds it keeps it
	}
	var out, want []int
	for s := range h.held {
		if s < lo || s >= hi {
			out = append(out, s)
		}
	}
	if len(out) > 0 {
		if err := r.store.Release(ctx, h.leases(out)); err != nil {
			return err
		}
		for _, s := range out {
			delete(h.held, s)
		}
		changed = true
	}
	for s := lo; s < hi; s++ {
		if _, ok := h.held[s]; !ok {
			want = append(want, s)
		}
	}
	if len(want) > 0 {
		got, err := r.store.Claim(ctx, r.key, r.o.Owner, r.o.LeaseTTL, want)
		if err != nil {
			return err
		}
		for _, l := range got {
			h.held[l.Slice] = &l
			changed = true
			if !h.layout.Sliced() {
				r.update(func(p *Progress) { p.Checkpoint, p.Events, p.Epoch = l.Checkpoint, l.Events, l.Epoch })
				h.last = l.Checkpoint
			}
		}
	}
	h.short = len(want) > 0 && len(h.held) < hi-lo && h.count > 1
	if changed || h.stopFeed == nil {
		h.restartFeed(ctx, true)
		if len(h.held) > 0 {
			r.o.Logger.Info("projection slices held", "projection", r.key.String(), "owner", r.o.Owner, "slices", len(h.held), "share", fmt.Sprintf("[%d,%d)", lo, hi), "runners", len(members))
		}
	}
	if len(h.held) > 0 {
		r.setState(StateRunning)
	} else {
		r.setState(StateStandby)
	}
	return nil
}

// restartFeed stops the current reading and, with start and slices held,
// reads the held slices.
func (h *holder[Tx]) restartFeed(ctx context.Context, start bool) {
	if h.stopFeed != nil {
		h.stopFeed()
		h.stopFeed, h.feed = nil, nil
	}
	if !start {
		return
	}
	if len(h.held) == 0 {
		h.stopFeed = func() {}
		return
	}
	clear(h.from)
	clear(h.passed)
	fctx, cancel := context.WithCancel(ctx)
	feed := make(chan item, 2*h.r.o.BatchSize) // read ahead while a batch commits
	var wg sync.WaitGroup
	h.r.rd.read(fctx, h.held, feed, &wg)
	h.feed = feed
	h.stopFeed = func() { cancel(); wg.Wait() }
}

// epoch is the lease epoch batches carry (Batch.Epoch): the one slice's of
// an unsliced projection, zero otherwise.
func (h *holder[Tx]) epoch() uint64 {
	if l, ok := h.held[0]; ok && !h.layout.Sliced() {
		return l.Epoch
	}
	return 0
}

// renew renews ls and fails with ErrFenced when one is no longer current.
func (h *holder[Tx]) renew(ctx context.Context, ls []Lease) error {
	lost, err := h.r.store.Renew(ctx, ls)
	if err == nil && len(lost) > 0 {
		err = fmt.Errorf("%w: slices %v of %s", ErrFenced, lost, h.r.key)
	}
	return err
}

// commit stores b under the leases of the slices it touches (sl[i] is
// b.Records[i]'s), each with the member its last record was read from;
// final (b ends what is pending) adds the slices that passed over records
// since (Lease.Passed). An empty b applies nothing.
func (h *holder[Tx]) commit(ctx context.Context, b Batch, sl []int, final bool) error {
	touched := slices.Clone(sl)
	if final {
		touched = slices.AppendSeq(touched, maps.Keys(h.passed))
	}
	slices.Sort(touched)
	ls := h.leases(slices.Compact(touched))
	for i := range ls {
		s := ls[i].Slice
		for j := len(b.Records) - 1; j >= 0; j-- {
			if sl[j] == s {
				ls[i].Member = h.from[delivery{b.Records[j].ID, s}]
				break
			}
		}
		if p, ok := h.passed[s]; ok && final {
			ls[i].Passed, ls[i].PassedID, ls[i].Member = p.pos, p.id, p.member
		}
	}
	return h.r.store.Commit(ctx, ls, b.Records, sl, func(ctx context.Context, tx Tx) error {
		if len(b.Records) == 0 {
			return nil
		}
		return h.r.p.Handle(ctx, tx, b)
	})
}

// done records a committed b (sl and final as in commit): it moves the
// held leases' checkpoints.
func (h *holder[Tx]) done(b Batch, sl []int, final bool) {
	for i, s := range sl {
		l := h.held[s]
		l.Checkpoint, l.EventID = b.Records[i].Position, b.Records[i].ID
		l.Events++
		l.Member = h.from[delivery{b.Records[i].ID, s}]
	}
	for i, rec := range b.Records {
		delete(h.from, delivery{rec.ID, sl[i]})
	}
	if final {
		for s, p := range h.passed {
			if l, ok := h.held[s]; ok {
				l.Checkpoint, l.EventID, l.Member = p.pos, p.id, p.member
			}
		}
		clear(h.passed)
	}
	if len(b.Records) == 0 {
		return
	}
	if p := b.Records[len(b.Records)-1].Position; p.After(h.last) {
		h.last = p
	}
}

// fail records that the projection stopped at pos.
func (h *holder[Tx]) fail(ctx context.Context, pos journal.Position, msg string) error {
	ls := h.leases(nil)
	if len(ls) == 0 {
		return fmt.Errorf("%w: %s holds no slice", ErrFenced, h.r.key)
	}
	return h.r.store.Fail(ctx, ls[0], pos, msg)
}
