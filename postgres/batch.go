package postgres

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// Appends and batching (the package documentation's summary, in full).
//
// Every append runs through one engine (engine.go). A batch is decided once,
// in Go, and written by one statement that makes the database check every
// stream's version, lease holder, epoch, release flag and node session (by the
// database clock) again under the batch's advisory locks, aborting via
// fence_check when any differs. When the journal remembers the heads (version
// and hash) of every stream a batch touches from its own earlier appends — the
// common case for a stream's single writer — the batch goes out in one round
// trip: BEGIN, the locks, LOCK events, each condition as an assertion, the
// write statement and COMMIT in one pipeline. Otherwise, or when that
// transaction's fence fails, the batch takes two: BEGIN, the locks and a read
// of the touched streams, lease nodes, stored event IDs and conditions; then
// the write statement and COMMIT. A fence that still fails (a node session
// expired between the read and the write) makes the batch read and decide
// again, so each append gets its own precise error.
//
// With Batching on (the default), concurrent Appends are queued; each of
// Batching.Workers workers (default 2) takes up to MaxBatch of them into one
// such transaction, waiting up to Batching.Linger (default 500µs) for the batch
// to grow only while its previous batch carried several appends. The appends
// are decided in order as if they ran one after the other (an earlier append's
// events count against a later append's expected versions and condition), and
// each failure is reported to its own caller only.
// A failed COMMIT
// fails every member; a connection lost during COMMIT is reported as
// journal.ErrOutcomeUnknown (retry with the same event IDs). Before a batch is
// sent, its pooled connection is checked for a server end that closed or
// reset it while it sat idle (a restarted database, a dropped proxy
// connection): such a connection is discarded for another, so it cannot make
// an outcome unknown (MetricDiscardedConns). The check is one non-blocking peek at
// the socket on Linux, macOS and the BSDs, and none elsewhere; a connection
// that breaks after the check still reports journal.ErrOutcomeUnknown.

// enqueue hands r to the batch workers and waits for its outcome.
func (j *Journal) enqueue(ctx context.Context, r *appendReq) (journal.AppendResult, error) {
	j.batchOnce.Do(j.startBatchers)
	select {
	case j.queue <- r:
	case <-ctx.Done():
		return journal.AppendResult{}, fmt.Errorf("postgres: append: %w", ctx.Err())
	case <-j.closed:
		return journal.AppendResult{}, j.checkOpen()
	}
	select {
	case o := <-r.done:
		return o.res, o.err
	case <-ctx.Done():
		return journal.AppendResult{}, fmt.Errorf("%w: postgres: the caller stopped waiting while its append was in flight (%w); retry the same append (same event IDs) to learn whether it was stored", journal.ErrOutcomeUnknown, ctx.Err())
	}
}

func (j *Journal) startBatchers() {
	j.queue = make(chan *appendReq)
	for range j.cfg.Batching.Workers {
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			j.batchWorker()
		}()
	}
}

// batchWorker takes one queued append, then whatever else is already queued
// (up to MaxBatch), and runs them in one transaction. With Linger set and a
// previous batch of several appends (callers are evidently concurrent), it
// waits up to Linger for the batch to reach the previous batch's size.
func (j *Journal) batchWorker() {
	prev := 0
	max := j.cfg.Batching.MaxBatch
	for {
		var first *appendReq
		select {
		case <-j.closed:
			return
		case first = <-j.queue:
		}
		batch := []*appendReq{first}
		if j.cfg.Batching.Linger > 0 && prev > 1 {
			t := time.NewTimer(j.cfg.Batching.Linger)
		wait:
			for len(batch) < min(prev, max) {
				select {
				case r := <-j.queue:
					batch = append(batch, r)
				case <-t.C:
					break wait
				case <-j.closed:
					break wait
				}
			}
			t.Stop()
		}
	drain:
		for len(batch) < max {
			select {
			case r := <-j.queue:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		prev = len(batch)
		live := batch[:0]
		for _, r := range batch {
			if err := r.ctx.Err(); err != nil {
				r.done <- appendOutcome{err: fmt.Errorf("postgres: append: %w", err)}
				continue
			}
			live = append(live, r)
		}
		if len(live) > 0 {
			j.runBatch(live)
		}
	}
}

// runBatch runs appends in one transaction (see run) and reports each its
// own outcome. The transaction's statements are traced (see pgtrace.Tracer) as
// children of the first append's span: the batch serves every caller, and
// none of their cancellations.
func (j *Journal) runBatch(batch []*appendReq) {
	ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(batch[0].ctx))
	outcomes, _ := j.run(ctx, batch, false)
	for i, r := range batch {
		r.done <- outcomes[i]
	}
}
