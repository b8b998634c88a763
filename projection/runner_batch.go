package projection

import (
	"context"
	"errors"
	"time"

	"github.com/scribe-es/scribe/internal/backoff"
	"github.com/scribe-es/scribe/journal"
)

// applyAll commits pending in batches under t's leases (slices[i] is the
// slice pending[i] is delivered for). After a handler error it
// retries record by record, so that a failure is pinned to one record,
// backing off between attempts of that record.
func (r *Runner[Tx]) applyAll(ctx context.Context, t *holder[Tx], pending []journal.Record, slices []int) error {
	single := false
	attempt := 1
	delay := r.o.Backoff
	for len(pending) > 0 {
		n := min(len(pending), r.o.BatchSize)
		if single {
			n = 1
		}
		chunk := pending[:n]
		b := Batch{Records: chunk, Attempt: attempt, Epoch: t.epoch()}
		if t.layout.Sliced() {
			b.Slices = slices[:n]
		}
		err := r.prepare(ctx, t, &b)
		final := n == len(pending)
		if err == nil {
			err = t.commit(ctx, b, slices[:n], final)
		}
		if err == nil {
			t.done(b, slices[:n], final)
			pending, slices = pending[n:], slices[n:]
			attempt, delay = 1, r.o.Backoff
			lag := time.Since(chunk[n-1].RecordedAt)
			r.applied.Add(context.WithoutCancel(ctx), int64(n), r.attrs)
			r.lagHist.Record(context.WithoutCancel(ctx), lag.Seconds(), r.attrs)
			// The hook runs before the batch's progress is published, so
			// that WaitFor (and Progress) never report a batch whose
			// Committed has not returned.
			if r.o.Committed != nil {
				r.o.Committed(b)
			}
			r.update(func(p *Progress) {
				p.Checkpoint = t.last
				p.Events += uint64(n)
				p.LastLag = lag
				p.Error = ""
			})
			r.mu.Lock()
			if len(pending) > 0 {
				r.oldest = pending[0].RecordedAt
			}
			r.mu.Unlock()
			continue
		}
		var herr *HandlerError
		if !errors.As(err, &herr) {
			// The store failed (not the handler): retry the same records
			// under the same lease while it lasts.
			if ctx.Err() == nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrSuperseded) && r.backOff(ctx, err, &delay) {
				continue
			}
			return err
		}
		r.failures.Add(context.WithoutCancel(ctx), 1, r.attrs)
		r.update(func(p *Progress) { p.Error = herr.Err.Error() })
		if n > 1 {
			single = true // find the record that fails; no attempt is counted
			continue
		}
		if attempt >= r.o.MaxAttempts {
			failed := &FailedError{Key: r.key, At: chunk[0].Position, EventID: chunk[0].ID.String(), Attempts: attempt, Err: herr.Err}
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if ferr := t.fail(fctx, chunk[0].Position, failed.Error()); ferr != nil {
				r.o.Logger.Error("projection failure could not be recorded in the store", "projection", r.key.String(), "error", ferr)
			}
			cancel()
			return failed
		}
		r.o.Logger.Warn("projection handler failed; retrying", "projection", r.key.String(), "at", chunk[0].Position.String(), "attempt", attempt, "in", delay.String(), "error", herr.Err)
		if !sleep(ctx, delay) {
			return ctx.Err()
		}
		attempt++
		delay = min(2*delay, r.o.MaxBackoff)
	}
	return nil
}

// prepare runs the projection's Prepare, if any, after checking that the
// lease is still held (so that a runner that lost it does not start outside
// effects).
func (r *Runner[Tx]) prepare(ctx context.Context, t *holder[Tx], b *Batch) error {
	if r.p.Prepare == nil {
		return nil
	}
	if err := t.renew(ctx, t.leases(nil)); err != nil {
		return err
	}
	if err := r.p.Prepare(ctx, b); err != nil {
		return &HandlerError{At: b.Records[0].Position, Err: err}
	}
	return nil
}

// sleep waits d or until ctx ends (backoff.Sleep); it reports whether ctx
// is still live.
func sleep(ctx context.Context, d time.Duration) bool { return backoff.Sleep(ctx, d) }
