package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// ErrNoKeyStore is returned by Erase on a runtime without Config.KeyStore.
var ErrNoKeyStore = errors.New("runtime: no key store configured")

// Erase erases a data subject's personal data (crypto-shredding, see
// package erasure): it destroys the subject's data key in Config.KeyStore
// (recording by, who asked, and when), appends the erasure record (an
// untagged erasure.RecordType event, the same for every repeat) to the
// journal, deletes the snapshots of the streams bound to the subject and
// stops their actors on this runtime without snapshotting them. Every other
// runtime on the journal (every cluster member) does the same for its own
// actors and key cache when the record reaches it through the journal feed;
// so does this one, for erasures made elsewhere (another runtime, the
// `scribe erase` command).
//
// Afterwards the subject's events still load, verify and fold: their
// personal fields decode to zero values (Decoded.Erased names them), and
// executing a command that would store new personal data for the subject
// fails with erasure.ErrSubjectErased.
//
// Erase is idempotent: a repeat returns the original erasure with Repeat
// set. If it fails midway (the error says where), call it again. Subject
// and by are identifiers, not personal data: they are stored in clear.
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

func (rt *Runtime) followErasures(ctx context.Context, after journal.Position) {
	backoff := 100 * time.Millisecond
	failures := 0
	for ctx.Err() == nil {
		started := time.Now()
		for rec, err := range rt.cfg.Journal.Subscribe(ctx, erasure.RecordQuery(), after) {
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// One warning per outage; the retries of the same outage
				// log at debug level. A subscription that ran for a while
				// before failing starts a new outage.
				if time.Since(started) > 10*time.Second {
					failures = 0
				}
				failures++
				level := slog.LevelDebug
				if failures == 1 {
					level = slog.LevelWarn
				}
				rt.cfg.Logger.Log(ctx, level, "following erasure records failed; retrying until the journal answers", "error", err, "retry_in", backoff)
				break
			}
			backoff, failures = 100*time.Millisecond, 0
			d, ok, err := erasure.ParseRecord(&rec)
			if ok && err == nil {
				e := erasure.Erasure{Subject: d.Subject, By: d.By, At: d.ErasedAt}
				for {
					err := rt.dropErased(ctx, e)
					if err == nil || ctx.Err() != nil {
						break
					}
					rt.cfg.Logger.Warn("dropping the state of an erased subject failed; retrying", "position", rec.Position.String(), "error", err)
					if !sleepCtx(ctx, time.Second) {
						return
					}
				}
			} else if err != nil {
				rt.cfg.Logger.Error("skipping a malformed erasure record", "position", rec.Position.String(), "error", err)
			}
			after = rec.Position
		}
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
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
