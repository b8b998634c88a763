package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d, or until ctx ends; it reports whether ctx is still live
// (false: ctx ended, possibly before d passed). A d of zero or less
// returns at once.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Backoff yields the pauses of a retry loop: Min first, then twice the
// previous pause, never more than Max. Jitter (0 to 1) spreads each pause
// uniformly over [d·(1−Jitter), d], so that processes failing together do
// not retry in step; 0 (the default) gives d exactly. The zero Backoff is
// not useful: set Min and Max (Max below Min counts as Min). A Backoff is
// not safe for concurrent use.
type Backoff struct {
	Min, Max time.Duration
	Jitter   float64

	cur time.Duration // the last pause before jitter; 0 before the first
}

// Next returns the next pause and makes the one after it twice as long, up
// to Max.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	} else {
		b.cur = 2 * b.cur
	}
	b.cur = max(min(b.cur, b.Max), b.Min)
	d := b.cur
	if b.Jitter > 0 {
		d -= time.Duration(rand.Float64() * min(b.Jitter, 1) * float64(d))
	}
	return d
}

// Reset makes the next pause Min again (after a success).
func (b *Backoff) Reset() { b.cur = 0 }

// Wait sleeps the next pause (Next), or until ctx ends; it reports whether
// ctx is still live.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }
