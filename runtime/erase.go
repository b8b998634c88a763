package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// Erase crypto-shreds a data subject's personal data (see package erasure):
// it destroys the subject's key in Config.KeyStore, recording by (who asked)
// and when, appends an untagged erasure.RecordType event, and drops the
// cached key and the snapshots and actors (unsnapshotted) of the subject's
// streams, as every runtime on the journal does when the event reaches it.
// The subject's events still load, verify and fold, their personal fields
// zero; a command storing new personal data for it fails with
// erasure.ErrSubjectErased. Subject and by are stored in clear: use
// identifiers. Erase is idempotent (a repeat returns the first erasure,
// Repeat set): after an error, which says where it stopped, retry.
func (rt *Runtime) Erase(ctx context.Context, subject, by string) (erasure.Erasure, error) {
	if rt.cfg.KeyStore == nil {
		return erasure.Erasure{}, fmt.Errorf("%w: set Config.KeyStore to the key store the subject's data was sealed with", ErrNoKeyStore)
	}
	e, err := erasure.Erase(ctx, erasure.EraseParams{Journal: rt.cfg.Journal, KeyStore: rt.cfg.KeyStore, Subject: subject, By: by})
	if err != nil {
		return e, fmt.Errorf("runtime: %w", err)
	}
	if err := rt.dropErased(ctx, e); err != nil {
		return e, err
	}
	return e, nil
}

// dropErased forgets the subject's cached key, stops the actors of its
// bound streams without snapshotting them, then deletes those streams'
// snapshots (after the actors stopped, so none is saved afterwards).
func (rt *Runtime) dropErased(ctx context.Context, e erasure.Erasure) error {
	rt.reg.keys.forget(e)
	streams, err := rt.cfg.KeyStore.Streams(ctx, e.Subject)
	if err != nil {
		return fmt.Errorf("runtime: erasure of subject %q: listing its streams: %w", e.Subject, err)
	}
	for _, s := range streams {
		if err := rt.host.Evict(ctx, s); err != nil {
			return fmt.Errorf("runtime: erasure of subject %q: %w", e.Subject, err)
		}
	}
	if rt.cfg.Snapshots != nil {
		if err := erasure.DropSnapshots(ctx, rt.cfg.KeyStore, rt.cfg.Snapshots, e.Subject); err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
	}
	rt.reg.keys.markDropped(e.Subject)
	return nil
}

// erasureWatcher follows the journal's erasure records and drops what this
// runtime holds of each erased subject (dropErased).
type erasureWatcher struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// watchErasures starts following erasure records appended after the
// journal's current head. Erasures older than that need nothing: this
// runtime cached no key and started no actor before it existed.
func (rt *Runtime) watchErasures(ctx context.Context) error {
	if rt.cfg.KeyStore == nil {
		return nil
	}
	head, err := rt.cfg.Journal.Head(ctx)
	if err != nil {
		return fmt.Errorf("runtime: reading the journal head to follow erasures: %w", err)
	}
	rt.reg.keys.mu.Lock()
	rt.reg.keys.startHead = head
	rt.reg.keys.mu.Unlock()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &erasureWatcher{cancel: cancel}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		rt.followErasures(wctx, head)
	}()
	rt.erasures = w
	return nil
}

// followErasures reads the journal for erasure records after after, every
// Config.ErasurePollInterval, and drops what this runtime holds of each
// erased subject. It polls rather than subscribes: a live subscription
// wakes at every commit of the journal, and an erasure can wait a second.
func (rt *Runtime) followErasures(ctx context.Context, after journal.Position) {
	interval := rt.cfg.ErasurePollInterval
	failing := false
	for sleepCtx(ctx, interval) {
		var failure error
		for rec, err := range rt.cfg.Journal.Read(ctx, erasure.RecordQuery(), journal.ReadOptions{From: after}) {
			if err != nil {
				failure = err
				break
			}
			if !rec.Position.After(after) {
				continue // From is inclusive
			}
			d, ok, err := erasure.ParseRecord(&rec)
			if !ok {
				continue
			}
			if err != nil {
				rt.cfg.Logger.Error("skipping a malformed erasure record", "position", rec.Position.String(), "error", err)
				after = rec.Position
				continue
			}
			if err := rt.dropErased(ctx, erasure.Erasure{Subject: d.Subject, By: d.By, At: d.ErasedAt}); err != nil {
				failure = err
				break // retried from this record at the next poll
			}
			after = rec.Position
		}
		if ctx.Err() != nil {
			return
		}
		switch {
		case failure != nil && !failing:
			// One warning per outage; its further failures log at debug level.
			rt.cfg.Logger.Warn("following erasure records failed; retrying until the journal answers", "error", failure, "retry_in", interval)
			failing = true
		case failure != nil:
			rt.cfg.Logger.Debug("following erasure records failed again", "error", failure)
		default:
			failing = false
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (w *erasureWatcher) stop() {
	if w == nil {
		return
	}
	w.cancel()
	w.done.Wait()
}
