package postgres

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

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
// own outcome. The transaction's statements are traced (see Tracer) as
// children of the first append's span: the batch serves every caller, and
// none of their cancellations.
func (j *Journal) runBatch(batch []*appendReq) {
	ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(batch[0].ctx))
	outcomes, _ := j.run(ctx, batch, false)
	for i, r := range batch {
		r.done <- outcomes[i]
	}
}
