package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/backoff"
)

// Erase crypto-shreds a data subject's personal data (see package erasure
// and erasure.Erase for the steps): it records the erasure as pending in
// Config.KeyStore with by (who asked) and when, appends the untagged
// erasure.RecordType event, destroys the key, deletes the snapshots of the
// subject's streams from Config.Snapshots, records the erasure complete,
// and drops the cached key and the actors (unsnapshotted) of the subject's
// streams. Every runtime on the key store drops its own within its
// Config.ErasurePollInterval of the first step. The subject's events still
// load, verify and fold, their personal fields zero; a command storing new
// personal data for it fails with erasure.ErrSubjectErased. Subject and by
// are stored in clear: use identifiers.
//
// The result says whether the key store knew the subject (Known: false for
// a subject no personal data was ever stored for, a typo perhaps; it is
// blocked all the same) and where the erasure record is in the journal
// (Position: wait on it, e.g. a read model's WaitFor, before answering that
// the data is gone everywhere).
//
// If Erase fails or its process stops after the first step, the erasure
// stays pending (the key already refused everywhere) and the next sweep of
// any runtime on the key store completes it (Config.ErasureSweepInterval,
// and at every New); calling Erase again completes it too. Erase is
// idempotent: a repeat returns the first erasure with Repeat set.
func (rt *Runtime) Erase(ctx context.Context, subject, by string) (erasure.Erasure, error) {
	if rt.cfg.KeyStore == nil {
		return erasure.Erasure{}, fmt.Errorf("%w: set Config.KeyStore to the key store the subject's data was sealed with", ErrNoKeyStore)
	}
	e, err := erasure.Erase(ctx, erasure.EraseParams{Journal: rt.cfg.Journal, KeyStore: rt.cfg.KeyStore, Snapshots: rt.cfg.Snapshots, Subject: subject, By: by})
	if err != nil {
		if e.State.Begun() {
			// Pending: drop what this runtime holds now; the sweep completes the rest.
			return e, fmt.Errorf("runtime: %w", errors.Join(err, rt.dropErased(ctx, e)))
		}
		return e, fmt.Errorf("runtime: %w", err)
	}
	if err := rt.dropErased(ctx, e); err != nil {
		return e, err
	}
	return e, nil
}

// dropErased forgets the subject's cached key and stops the actors of its
// bound streams without snapshotting them; their next use rebuilds their
// state without the subject's personal data. (The erasure itself deletes
// the streams' snapshots; a snapshot this runtime saves of a state it still
// held from before is refused by sealedSnapshots.)
func (rt *Runtime) dropErased(ctx context.Context, e erasure.Erasure) error {
	rt.reg.keys.forget(e)
	streams, err := rt.cfg.KeyStore.Streams(ctx, e.Subject)
	if err != nil {
		return fmt.Errorf("runtime: erasure of subject %q: listing its streams: %w", e.Subject, err)
	}
	for _, s := range streams {
		if err := rt.host.Evict(ctx, s); err != nil {
			return fmt.Errorf("runtime: erasure of subject %q: %w", e.Subject, translate(err))
		}
	}
	rt.reg.keys.markDropped(e.Subject)
	return nil
}

// erasureWatcher follows the key store's erasure feed and sweeps pending
// erasures, each in a goroutine of its own.
type erasureWatcher struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// watchErasures starts following the erasures begun after the key store's
// current erasure head (erasures begun before it need nothing: their keys
// were refused before this runtime could read their subjects' data), and
// the sweep of pending erasures, at once and every ErasureSweepInterval.
func (rt *Runtime) watchErasures(ctx context.Context) error {
	if rt.cfg.KeyStore == nil {
		return nil
	}
	head, err := rt.cfg.KeyStore.ErasureHead(ctx)
	if err != nil {
		return fmt.Errorf("runtime: reading the key store's erasure head to follow erasures: %w", err)
	}
	rt.reg.keys.mu.Lock()
	rt.reg.keys.startSeq = head
	rt.reg.keys.mu.Unlock()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &erasureWatcher{cancel: cancel}
	w.done.Go(func() { rt.followErasures(wctx, head) })
	w.done.Go(func() { rt.sweepErasures(wctx) })
	rt.erasures = w
	return nil
}

// erasurePage bounds one read of the erasure feed.
const erasurePage = 1000

// followErasures reads the key store's erasure feed after the cursor after,
// every Config.ErasurePollInterval, and drops what this runtime holds of
// each subject whose erasure was begun (dropErased). A failed read empties
// the key cache (clearKeys): until the feed answers again, reads ask the
// key store, which refuses the keys of begun erasures.
func (rt *Runtime) followErasures(ctx context.Context, after uint64) {
	interval := rt.cfg.ErasurePollInterval
	failing := false
	for backoff.Sleep(ctx, interval) {
		failure := rt.pollErasures(ctx, &after)
		if ctx.Err() != nil {
			return
		}
		switch {
		case failure != nil && !failing:
			// One warning per outage; its further failures log at debug level.
			rt.cfg.Logger.Warn("following the key store's erasures failed; cached data keys dropped, retrying until the key store answers", "error", failure, "retry_in", interval)
			failing = true
		case failure != nil:
			rt.cfg.Logger.Debug("following the key store's erasures failed again", "error", failure)
		default:
			failing = false
		}
	}
}

// pollErasures drops what this runtime holds of every erasure after
// *after, advancing *after past each one dropped.
func (rt *Runtime) pollErasures(ctx context.Context, after *uint64) error {
	for {
		es, err := rt.cfg.KeyStore.Erasures(ctx, erasure.ErasureQuery{After: *after, Limit: erasurePage})
		if err != nil {
			rt.reg.keys.clearKeys()
			return err
		}
		for _, e := range es {
			if err := rt.dropErased(ctx, e); err != nil {
				return err // retried from this erasure at the next poll
			}
			*after = e.Sequence
		}
		if len(es) < erasurePage {
			return nil
		}
	}
}

// sweepErasures completes the pending erasures (erasure.CompletePending) at
// once and then every Config.ErasureSweepInterval.
func (rt *Runtime) sweepErasures(ctx context.Context) {
	p := erasure.CompleteParams{Journal: rt.cfg.Journal, KeyStore: rt.cfg.KeyStore, Snapshots: rt.cfg.Snapshots}
	for {
		done, err := erasure.CompletePending(ctx, p)
		if ctx.Err() != nil {
			return
		}
		for _, e := range done {
			rt.cfg.Logger.Info("completed a pending erasure", "subject", e.Subject, "erased_at", e.At, "by", e.By)
		}
		if err != nil {
			rt.cfg.Logger.Warn("completing pending erasures failed; retrying at the next sweep", "error", err, "retry_in", rt.cfg.ErasureSweepInterval)
		}
		if !backoff.Sleep(ctx, rt.cfg.ErasureSweepInterval) {
			return
		}
	}
}

func (w *erasureWatcher) stop() {
	if w == nil {
		return
	}
	w.cancel()
	w.done.Wait()
}
