package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"github.com/scribe-es/scribe/journal"
)

// Forming a batch under load, and keeping one bad command from failing the
// others.
//
// Deadline shedding: work for a caller who has gone is waste that starves the
// callers still waiting (under overload with impatient clients almost every
// decided command would be for a caller who already left). Before a command
// joins a batch the actor compares the time left before its deadline with the
// time the stream's recent appends took for a batch of that size: the batch
// is the largest set of waiting commands that can all still be answered in
// time, and a command that could not be answered in time even by the batch
// after it is answered ErrOverloaded at once, without being decided (see
// nextBatch). Without a history (a fresh actor) nothing is shed.
//
// Queue-delay shedding, for callers without a deadline (an HTTP client that
// gives up after 50 ms sends none): CoDel (RFC 8289) adapted to group commit.
// CoDel watches the sojourn time of what leaves a queue and, when even the
// smallest sojourn over an interval stayed above a target, the queue is a
// standing one: it drops until a sojourn falls below the target again.
//
//   - What is measured (at dequeue): when a batch is sent to the journal, the
//     sojourn of its oldest command, from the moment Execute handed the
//     command to the actor until its append starts (commands decided ahead
//     into the open batch still wait for this moment). Group commit empties
//     the queue at every send, so the youngest command of a batch has always
//     waited about nothing; what says whether the stream keeps up is how long
//     the oldest waited. In a healthy stream that is about the append in
//     flight when it arrived; when batches grow until their appends outlast
//     the callers' patience, it is above the target at every send.
//   - When: the stream starts shedding when the oldest command of every batch
//     sent during Config.QueueDelayInterval waited longer than
//     Config.QueueDelayTarget (the minimum over the interval exceeds the
//     target), as CoDel does, and a caller gave up waiting (its context
//     ended before its answer) during the last interval: long waits that
//     every caller is willing to sit out (patient writers on a slow machine)
//     are throughput, not waste, and are never refused. A command arriving during an append waits for
//     it, so the target must exceed the journal's time to commit a small
//     batch: the stream uses 1.5 times its fastest append of the last one to
//     two seconds when that is longer (a distant or busy database), so a slow
//     commit neither sheds a healthy stream nor pins the cap at one command.
//     (The fastest, not the mean or the one-command appends: under a storm
//     every append is large, and a slow first append of a cold stream must
//     not stay the measure.) Measured with 2,000 impatient clients on one
//     stream (benchmarks/RESULTS.md), 5 ms held batches so small that the
//     stream served a third of its unloaded rate; 10 ms, the default, served
//     most of it with answers well within 50 ms.
//   - What is refused (at enqueue): while shedding, a new command is refused
//     at once with ErrOverloaded, before it is queued or decided, when the
//     stream already holds cap waiting commands. CoDel drops one packet per
//     interval/√count because one drop makes a TCP sender halve its rate; a
//     caller refused here retries instead, so dropping some arrivals would
//     not shorten the queue. Refusing every arrival would not do either: the
//     stream would empty within two appends, stop shedding, and admit the
//     whole crowd again at once. The cap is steered by the sojourns it
//     causes: halved when the oldest commands of all batches sent since the
//     previous cut waited longer than the target, once a command admitted
//     after that cut was among them (at most once per round, as TCP cuts its
//     window once per round trip; and by the minimum, as CoDel detects, so
//     one slow append or scheduling hiccup does not halve it), raised by an
//     eighth whenever a batch's oldest command waited less, between 1 and
//     MaxBatch. It starts at half the batch that started the shedding. So
//     batches settle at the size whose appends take about the target, every
//     command decided is answered within a few targets, at about the best
//     rate such batches allow. Commands admitted before the stream started shedding are served
//     as usual; those whose caller has gone are dropped undecided.
//   - Until when: the stream stops shedding when a batch's oldest command
//     waited less than the target and no command was refused for a whole
//     interval: the crowd has gone. While it stays, the stream keeps its cap
//     (its batches' oldest commands then wait less than the target: that is
//     the cap's purpose), rather than stop at the first short wait, re-admit
//     everyone, and need a whole interval of late answers to notice again;
//     measured, that cycle wasted most appends on callers who had left.
//
// Config.DisableQueueDelayShedding turns it off. Reservations (DCB) are never
// refused by it: they already wait at most Config.ReservationTimeout.
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

// queueDelay is the stream actor's queue-delay shedding state (CoDel).
// Actor-owned; the stream's entry publishes the cap to deliver (shedAt).
type queueDelay struct {
	// firstAbove is when the oldest command of the batches sent since has
	// waited longer than the target for a whole interval (zero: the last
	// batch's did not).
	firstAbove time.Time
	shedding   bool
	cap        int       // while shedding: waiting commands admitted
	cutAt      time.Time // when cap was last halved
	// belowSinceCut: a batch sent since the last cut waited less than the
	// target (then the next cut waits for a whole round above it).
	belowSinceCut bool
	refusedAt     time.Time // when the actor last saw commands refused by cap
	gaveUpAt      time.Time // when the actor last saw callers give up
	// fastest holds the shortest append of the current window (since
	// windowAt) and of the one before: the journal's time to commit a
	// small batch, at most a window or two old.
	fastest  [2]time.Duration
	windowAt time.Time
}

// appendWindow is how long an append's duration counts toward the fastest.
const appendWindow = time.Second

// observeAppend records the duration of an append that ended at now.
func (q *queueDelay) observeAppend(now time.Time, took time.Duration) {
	if took <= 0 {
		return
	}
	if now.Sub(q.windowAt) >= appendWindow {
		q.fastest = [2]time.Duration{0, q.fastest[0]}
		q.windowAt = now
	}
	if q.fastest[0] == 0 || took < q.fastest[0] {
		q.fastest[0] = took
	}
}

// target is the queueing delay tolerated: Config.QueueDelayTarget, or 1.5
// times the fastest recent append when that is longer.
func (q *queueDelay) target(configured time.Duration) time.Duration {
	fastest := q.fastest[0]
	if f := q.fastest[1]; f > 0 && (fastest == 0 || f < fastest) {
		fastest = f
	}
	return max(configured, fastest*3/2)
}

// queueClock reads the clock queue delays are measured with (a test's, when
// its hooks set one).
func (h *Host) queueClock() time.Time {
	if h.hooks != nil && h.hooks.now != nil {
		return h.hooks.now()
	}
	return time.Now()
}

// observeQueueDelay measures the sojourn of b's oldest command as b is sent,
// and starts, steers or stops the shedding.
func (a *streamActor) observeQueueDelay(b *batch) {
	cfg := &a.host.cfg
	if cfg.DisableQueueDelayShedding || len(b.entries) == 0 {
		return
	}
	now := a.host.queueClock()
	oldest := b.entries[0].req.enqueued
	for _, e := range b.entries[1:] {
		if e.req.enqueued.Before(oldest) {
			oldest = e.req.enqueued
		}
	}
	sojourn := now.Sub(oldest)
	q := &a.qdelay
	if a.entry.refused.Swap(0) > 0 {
		q.refusedAt = now
	}
	if a.entry.gaveUp.Swap(0) > 0 {
		q.gaveUpAt = now
	}
	target := q.target(cfg.QueueDelayTarget)
	above := sojourn >= target
	switch {
	case !q.shedding && !above:
		q.firstAbove = time.Time{}
		return
	case !q.shedding && q.firstAbove.IsZero():
		q.firstAbove = now.Add(cfg.QueueDelayInterval)
		return
	case !q.shedding && (now.Before(q.firstAbove) || q.gaveUpAt.IsZero() || now.Sub(q.gaveUpAt) >= cfg.QueueDelayInterval):
		return
	case !q.shedding:
		q.shedding, q.cap, q.cutAt = true, max(1, len(b.entries)/2), now
		a.host.logs.log(cfg.Logger, slog.LevelWarn, "a stream sheds commands by queueing delay: its batches' oldest commands waited longer than the target for a whole interval",
			"stream", a.stream.String(), "sojourn", sojourn, "target", target, "interval", cfg.QueueDelayInterval)
	case !above && now.Sub(q.refusedAt) >= cfg.QueueDelayInterval:
		*q = queueDelay{fastest: q.fastest, windowAt: q.windowAt, gaveUpAt: q.gaveUpAt}
		a.entry.shedAt.Store(0)
		a.host.logs.log(cfg.Logger, slog.LevelInfo, "a stream stopped shedding commands by queueing delay", "stream", a.stream.String())
		return
	case above:
		if oldest.After(q.cutAt) {
			if !q.belowSinceCut {
				q.cap = max(1, q.cap/2)
			}
			q.cutAt, q.belowSinceCut = now, false
		}
	default:
		q.cap = min(cfg.MaxBatch, q.cap+max(1, q.cap/8))
		q.belowSinceCut = true
	}
	a.entry.shedAt.Store(int64(q.cap))
}

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

// minCostSamples is how many appends a stream must have measured before it
// sheds by deadline: one sample says little.
const minCostSamples = 3

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
		// All recent batches had about one size: no slope to fit. Charge the
		// mean duration whatever the size, rather than extrapolating one
		// size's duration linearly: one slow append (a held lock, a database
		// hiccup) must not make every large batch look hopeless.
		c.perEvent, c.base = 0, c.md
	}
}

// estimate returns the expected duration of an append of n events, and false
// before any append was observed.
func (c *appendCost) estimate(n int) (time.Duration, bool) {
	if c.samples < minCostSamples {
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
// and answers ErrOverloaded to the commands whose deadline cannot be met.
//
// Without a history of append durations it takes the first MaxBatch (or
// split-limit) commands. With one, among the commands waiting at the head it
// picks the largest batch whose members can all still be answered in time:
// with remaining times sorted in descending order r1 ≥ r2 ≥ …, the largest k
// with r_k ≥ estimate(k). Those k commands (the ones with the most time left,
// kept in arrival order) form the batch; a command that could not be answered
// even after this batch, by a batch of one, is answered ErrOverloaded now, so
// its caller can retry with a fresh deadline instead of waiting for a timeout;
// the others wait for the next batch. The batch is left at the head of the
// queue, the waiting commands behind it.
func (a *streamActor) nextBatch(limit int) []*commandReq {
	n := 0
	for n < len(a.queue) {
		if _, ok := a.queue[n].(*commandReq); !ok {
			break
		}
		n++
	}
	one, known := a.cost.estimate(1)
	if !known {
		cmds := make([]*commandReq, min(n, limit))
		for i := range cmds {
			cmds[i] = a.queue[i].(*commandReq)
		}
		return cmds
	}
	now := time.Now()
	var leftBuf, sortedBuf [8]time.Duration // small queues: no allocation
	left := leftBuf[:0]
	if n > len(leftBuf) {
		left = make([]time.Duration, 0, n)
	}
	left = left[:n]
	for i := range n {
		left[i] = time.Duration(math.MaxInt64)
		r := a.queue[i].(*commandReq)
		if deadline, ok := r.ctx.Deadline(); ok && !r.abandoned() {
			left[i] = deadline.Sub(now)
		}
	}
	sorted := append(sortedBuf[:0], left...)
	slices.SortFunc(sorted, func(x, y time.Duration) int { return cmp.Compare(y, x) })
	k := 0
	for k < n && k < limit {
		need, _ := a.cost.estimate(k + 1)
		if sorted[k] < need {
			break
		}
		k++
	}
	threshold := time.Duration(math.MaxInt64)
	batchTime := time.Duration(0)
	if k > 0 {
		threshold = sorted[k-1]
		batchTime, _ = a.cost.estimate(k)
	}
	cmds := make([]*commandReq, 0, k)
	waiting := make([]any, 0, n-k)
	for i := range n {
		r := a.queue[i].(*commandReq)
		switch {
		case len(cmds) < k && left[i] >= threshold:
			cmds = append(cmds, r)
		case left[i]-batchTime < one:
			a.shed(r, left[i], batchTime+one)
		default:
			waiting = append(waiting, r)
		}
	}
	if len(cmds) == n {
		// Every command taken, in queue order: the queue stays as it is.
		return cmds
	}
	rest := a.queue[n:]
	q := make([]any, 0, len(cmds)+len(waiting)+len(rest))
	for _, c := range cmds {
		q = append(q, c)
	}
	q = append(q, waiting...)
	a.queue = append(q, rest...)
	return cmds
}

// shed answers ErrOverloaded to a command whose deadline leaves less time than
// an append takes: deciding it would be work for a caller who will have gone.
func (a *streamActor) shed(r *commandReq, left, need time.Duration) {
	if !r.take() {
		return
	}
	a.reply(r, Result{}, fmt.Errorf("%w: the command on stream %s has %s left before its deadline, less than the stream's appends take now (about %s); it was not decided: retry after a back-off or with a longer deadline",
		ErrOverloaded, a.stream, left.Round(time.Microsecond), need.Round(time.Microsecond)), otelx.OutcomeOverloaded)
}

// batchLimit is the most commands the next batch may take: Config.MaxBatch,
// or fewer while a failure is being isolated.
func (a *streamActor) batchLimit() int {
	if a.split.limit > 0 {
		return min(a.host.cfg.MaxBatch, a.split.limit)
	}
	return a.host.cfg.MaxBatch
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
				a.reply(e.req, Result{}, failure, otelx.OutcomeError)
				continue
			}
		}
		back = append(back, e.req)
	}
	a.queue = append(back, a.queue...)
	return len(back)
}
