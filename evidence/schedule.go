package evidence

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"
)

// ScheduleOptions shape Schedule. Every must be set unless Ticks is.
type ScheduleOptions struct {
	// Every is the time between two checkpoints, counted from the start of
	// one to the start of the next. Required unless Ticks is set.
	Every time.Duration
	// Ticks, when set, replaces the timer: Schedule makes a checkpoint each
	// time a value arrives (a service's own scheduler; a test's clock).
	// Default nil: a time.Ticker of Every.
	Ticks <-chan time.Time
	// Make shapes each checkpoint (journal label, partition, workers,
	// progress, the clock stamped into the statement). Default: Make's.
	Make MakeOptions
	// Done, when set, is called after each attempt, from the goroutine
	// that called Schedule, before it waits for the next tick. Default nil.
	Done func(Scheduled)
}

// Scheduled is the outcome of one attempt of Schedule.
type Scheduled struct {
	// Checkpoint is the signed checkpoint written (nil when Err is set).
	Checkpoint *Checkpoint
	// Name is what the sink named it (DirSink: the file's path).
	Name string
	// Took is how long the attempt took, making to writing.
	Took time.Duration
	// Err says why the attempt wrote nothing: the journal could not be
	// read, a chain does not verify (*journal.ChainError: never signed), or
	// the sink failed.
	Err error
}

// Schedule makes, signs and puts into sink one checkpoint of src at once,
// then one per interval (Every, or each value from Ticks), until ctx is
// done or Ticks is closed; then it returns nil. An attempt that fails is reported to Done
// and the next interval tries again (the database may be back by then):
// nothing is retried sooner, and a checkpoint is never half written
// (Sink's contract). A checkpoint that takes longer than the interval
// delays the next one; with Every, intervals missed meanwhile are dropped,
// never queued. It fails at once, having made nothing, when neither Every nor
// Ticks is given or priv is not an Ed25519 private key. priv stays with
// the caller; Schedule runs in the caller's goroutine and starts none
// but Make's workers.
func Schedule(ctx context.Context, src Source, priv ed25519.PrivateKey, sink Sink, opts ScheduleOptions) error {
	if src == nil || sink == nil {
		return errors.New("evidence: Schedule needs a Source and a Sink")
	}
	if len(priv) != ed25519.PrivateKeySize {
		return fmt.Errorf("evidence: the private key has %d bytes, an Ed25519 key has %d; read it with ReadPrivateKey", len(priv), ed25519.PrivateKeySize)
	}
	ticks := opts.Ticks
	if ticks == nil {
		if opts.Every <= 0 {
			return fmt.Errorf("evidence: Schedule's interval is %s; give ScheduleOptions.Every > 0 (or Ticks)", opts.Every)
		}
		t := time.NewTicker(opts.Every)
		defer t.Stop()
		ticks = t.C
	}
	for {
		res := MakeSigned(ctx, src, priv, sink, opts.Make)
		if ctx.Err() != nil {
			return nil
		}
		if opts.Done != nil {
			opts.Done(res)
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-ticks:
			if !ok {
				return nil
			}
		}
	}
}

// MakeSigned makes a checkpoint of src (Make), signs it with priv and puts
// it into sink: one attempt of Schedule, for a service that triggers
// checkpoints on demand. The result's Err says why nothing was written.
func MakeSigned(ctx context.Context, src Source, priv ed25519.PrivateKey, sink Sink, opts MakeOptions) Scheduled {
	start := time.Now()
	c, err := Make(ctx, src, opts)
	if err != nil {
		return Scheduled{Took: time.Since(start), Err: fmt.Errorf("evidence: no checkpoint written: %w", err)}
	}
	if err := c.Sign(priv); err != nil {
		return Scheduled{Took: time.Since(start), Err: err}
	}
	name, err := sink.Put(ctx, c)
	if err != nil {
		return Scheduled{Took: time.Since(start), Err: fmt.Errorf("evidence: the checkpoint was made but not stored: %w", err)}
	}
	return Scheduled{Checkpoint: c, Name: name, Took: time.Since(start)}
}
