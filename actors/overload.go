package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// Forming a batch under load, and keeping one bad command from failing the
// others.
//
// Deadline shedding: work for a caller who has gone is waste that starves the
// callers still waiting (under overload with impatient clients almost every
// decided command would be for a caller who already left). Before a command
// joins a batch the actor compares the time left before its deadline with the
// time the stream's recent appends took for a batch of that size; a command
// that cannot make it even alone is answered ErrOverloaded without being
// decided, and a batch stops growing before it would outlast the tightest
// deadline among its commands. Without a history (a fresh actor) nothing is
// shed.
//
// Failure isolation: every command's events are validated against the
// journal's limits before they join a batch (decide), so an invalid command
// fails alone. If an append still fails for a reason one command can cause
// (splittable), the actor does not fail the batch: it puts the commands back
// at the head of the queue, undecided, and appends them again in halves; the
// half that fails is halved again, until the one command that causes the
// failure fails alone and every other command succeeds.

// shedFactor widens the append-time estimate: a command is admitted to a batch
// only if its deadline leaves shedFactor times the expected append time.
const shedFactor = 1.25

// maxDecideRetries bounds how often one command is decided again after an
// append that wrote nothing because the stream had moved (a version
// mismatch: something bypassed the actor), before it fails.
const maxDecideRetries = 2

// appendCost estimates how long an append of n events takes on this stream,
// as base + perEvent·n fitted over recent appends with exponentially weighted
// moments (a least-squares line that forgets). Actor-owned.
type appendCost struct {
	samples          int
	mn, md, mnn, mnd float64 // weighted means of n, d, n², n·d (d in ns)
	base, perEvent   float64
}

const costWeight = 0.2

func (c *appendCost) observe(d time.Duration, events int) {
	if events <= 0 || d <= 0 {
		return
	}
	n, x := float64(events), float64(d)
	if c.samples == 0 {
		c.mn, c.md, c.mnn, c.mnd = n, x, n*n, n*x
	} else {
		w := costWeight
		c.mn += w * (n - c.mn)
		c.md += w * (x - c.md)
		c.mnn += w * (n*n - c.mnn)
		c.mnd += w * (n*x - c.mnd)
	}
	c.samples++
	varN := c.mnn - c.mn*c.mn
	if varN > 0.25 {
		c.perEvent = max(0, (c.mnd-c.mn*c.md)/varN)
		c.base = max(0, c.md-c.perEvent*c.mn)
	} else {
		// All recent batches had about one size: no slope to fit, charge the
		// mean per event (conservative for smaller batches).
		c.perEvent, c.base = c.md/c.mn, 0
	}
}

// estimate returns the expected duration of an append of n events, and false
// before any append was observed.
func (c *appendCost) estimate(n int) (time.Duration, bool) {
	if c.samples == 0 {
		return 0, false
	}
	return time.Duration(shedFactor * (c.base + c.perEvent*float64(n))), true
}

// splitState narrows batches after an append failed for a reason one command
// can cause: while suspects (the failed batch's commands, requeued at the
// head) remain, batches hold at most limit commands.
type splitState struct {
	limit    int
	suspects int
}

// settled accounts for a batch of n commands that got their answers.
func (s *splitState) settled(n int) {
	if s.suspects == 0 {
		return
	}
	s.suspects -= n
	if s.suspects <= 0 {
		*s = splitState{}
	}
}

// splittable reports whether err can be caused by one command of a batch
// (its events or metadata rejected by the backend), as opposed to the stream,
// the lease or the store: then retrying the batch in parts isolates it.
func splittable(err error) bool {
	for _, s := range []error{journal.ErrSessionExpired, journal.ErrInvalidSession, journal.ErrVersionMismatch,
		journal.ErrAppendConditionFailed, journal.ErrOutcomeUnknown, journal.ErrUnavailable, journal.ErrStoreNotOpen,
		context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, s) {
			return false
		}
	}
	return true
}

// nextBatch takes the commands of the next batch from the head of the queue
// (at most MaxBatch, or the split limit) and answers ErrOverloaded to the
// commands whose deadline is too near, removing them from the queue. The
// returned commands are still at the head of the queue.
func (a *streamActor) nextBatch() []*commandReq {
	limit := a.host.cfg.MaxBatch
	if a.split.limit > 0 {
		limit = min(limit, a.split.limit)
	}
	now := time.Now()
	tightest := time.Duration(math.MaxInt64)
	cmds := make([]*commandReq, 0, min(limit, len(a.queue)))
	kept, i := 0, 0
	for ; i < len(a.queue) && len(cmds) < limit; i++ {
		r, ok := a.queue[i].(*commandReq)
		if !ok {
			break
		}
		if deadline, ok := r.ctx.Deadline(); ok && !r.abandoned() {
			left := deadline.Sub(now)
			if alone, known := a.cost.estimate(1); known {
				if left < alone {
					a.shed(r, left, alone)
					continue
				}
				need, _ := a.cost.estimate(len(cmds) + 1)
				if need > min(left, tightest) {
					break
				}
				tightest = min(tightest, left)
			}
		}
		cmds = append(cmds, r)
		a.queue[kept] = r
		kept++
	}
	if kept < i {
		a.queue = append(a.queue[:kept], a.queue[i:]...)
	}
	return cmds
}

// shed answers ErrOverloaded to a command whose deadline leaves less time than
// an append takes: deciding it would be work for a caller who will have gone.
func (a *streamActor) shed(r *commandReq, left, need time.Duration) {
	if !r.take() {
		return
	}
	a.reply(r, Result{}, fmt.Errorf("%w: the command on stream %s has %s left before its deadline, less than the stream's appends take now (about %s); it was not decided: retry after a back-off or with a longer deadline",
		ErrOverloaded, a.stream, left.Round(time.Microsecond), need.Round(time.Microsecond)), OutcomeOverloaded)
}

// requeue puts the commands of a batch that wrote nothing back at the head of
// the queue, undecided, in their order. Commands decided again too often after
// version mismatches fail with failure instead. It reports how many were
// put back.
func (a *streamActor) requeue(b *batch, mismatch bool, failure error) int {
	back := make([]any, 0, len(b.entries)+len(a.queue))
	for _, e := range b.entries {
		if mismatch {
			e.req.retries++
			if e.req.retries > maxDecideRetries {
				a.reply(e.req, Result{}, failure, OutcomeError)
				continue
			}
		}
		back = append(back, e.req)
	}
	a.queue = append(back, a.queue...)
	return len(back)
}
