package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// runBatch runs appends in one transaction on the fast path (see runFast), or,
// when its write statement's fence fails, on the slow path: BEGIN and every
// member's locks (one sorted set, so batches never deadlock), then each member
// inside its own savepoint with its own duplicate check, condition, claim and
// insert, then one COMMIT. A member's failure is reported to that member only;
// a broken transaction or failed COMMIT is reported to all.
func (j *Journal) runBatch(batch []*appendReq) {
	ctx := context.Background()
	j.statBatches.Add(1)
	j.statMembers.Add(int64(len(batch)))
	if j.hooks.slowPath {
		j.runBatchSlow(ctx, batch)
		return
	}
	if outcomes, fallback := j.runFast(ctx, batch); !fallback {
		for i, r := range batch {
			r.done <- outcomes[i]
		}
		return
	}
	j.runBatchSlow(ctx, batch)
}

// runBatchSlow runs appends one savepoint each; see runBatch.
func (j *Journal) runBatchSlow(ctx context.Context, batch []*appendReq) {
	if len(batch) == 1 {
		r := batch[0]
		res, _, err := j.appendDirect(ctx, r, modeTx)
		r.done <- appendOutcome{res: res, err: err}
		return
	}
	conn, err := j.pool.Acquire(ctx)
	if err != nil {
		err = j.translate("append: acquire connection", err)
		for _, r := range batch {
			r.done <- appendOutcome{err: err}
		}
		return
	}
	defer conn.Release()
	locks := map[int64]bool{}
	for _, r := range batch {
		for k, x := range r.locks {
			locks[k] = locks[k] || x
		}
	}
	prefix := &pgx.Batch{}
	prefix.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	keys, modes := lockArgs(locks)
	prefix.Queue(lockSQL, keys, modes)
	if !j.hooks.ungatedOrder {
		prefix.Queue(j.sql(lockEventsSQL))
	}
	outcomes := make([]appendOutcome, len(batch))
	for i, r := range batch {
		p := prefix
		prefix = nil
		res, memberErr, fatal, _ := j.runMember(ctx, conn, r, p, modeSavepoint)
		if fatal == nil && isIDRace(memberErr) {
			// See appendDirect: run again after the savepoint's rollback.
			res, memberErr, fatal, _ = j.runMember(ctx, conn, r, nil, modeSavepoint)
		}
		if isIDRace(memberErr) {
			memberErr = j.translate("append", memberErr)
		}
		if fatal != nil {
			err := j.fatalErr(fatal, false)
			for k, r := range batch {
				if k < i && outcomes[k].err != nil {
					r.done <- outcomes[k]
					continue
				}
				r.done <- appendOutcome{err: err}
			}
			return
		}
		outcomes[i] = appendOutcome{res: res, err: memberErr}
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		err = j.fatalErr(err, isConnErr(err) && !pgconn.SafeToRetry(err))
		for i := range outcomes {
			if outcomes[i].err == nil {
				outcomes[i] = appendOutcome{err: err}
			}
		}
	}
	for i, r := range batch {
		r.done <- outcomes[i]
	}
}
