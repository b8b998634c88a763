package runtime

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// StateResult is an aggregate's state read by State.
type StateResult[S any] struct {
	// State is the folded state at Version; Exists reports Version > 0 (a
	// stream without events has its aggregate's Initial at 0).
	State   S
	Version uint64
	Exists  bool
}

// StateOption configures State.
type StateOption func(*stateOptions)

type stateOptions struct {
	minVersion uint64
	poll       time.Duration
}

// AtLeastVersion makes State wait until the stream reaches version v (the
// Version an Execute returned, to read your own writes), polling every 1 ms
// at first, 50 ms at most; if ctx ends first, the error wraps ctx's and
// names the version reached. With Config.Replica, State polls it up to
// Config.ReplicaVersionWait, then Journal, and folds from the one that reached v.
func AtLeastVersion(v uint64) StateOption {
	return func(o *stateOptions) { o.minVersion = v }
}

// State returns the state of target's stream (S is the aggregate's state
// type) folded as its actor recovers it, from its newest usable snapshot and
// the journal, but with no actor or lease: it writes nothing and runs on any
// node, also while another owns the stream. It includes every append
// acknowledged before the call; with Config.Replica, only those its replay
// reached (AtLeastVersion reads your own writes there).
func State[S any](ctx context.Context, rt *Runtime, target Target, opts ...StateOption) (StateResult[S], error) {
	if err := rt.checkTarget(target); err != nil {
		return StateResult[S]{}, err
	}
	m := rt.reg.model(target.Aggregate)
	if _, ok := m.(*aggregateModel[S]); !ok {
		return StateResult[S]{}, fmt.Errorf("runtime: State[%s] of aggregate %q, whose state has another type; use the aggregate's state type", reflect.TypeFor[S](), target.Aggregate)
	}
	stream := target.Stream()
	o := stateOptions{poll: time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	src := rt.cfg.Journal
	var fallback <-chan time.Time // the replica's wait for minVersion ran out
	if rt.cfg.Replica != nil {
		src = rt.cfg.Replica
		if o.minVersion > 0 {
			t := time.NewTimer(rt.cfg.ReplicaVersionWait)
			defer t.Stop()
			fallback = t.C
		}
	}
	if o.minVersion > 0 {
		var seen uint64 // the version the last poll read
		for polls := 0; ; polls++ {
			sum, err := src.TagSummary(ctx, stream)
			if err != nil && fallback != nil && ctx.Err() == nil {
				// The replica cannot answer yet (it may not have replayed
				// the schema's creation, or be unreachable): it has not
				// reached the version; wait for it up to ReplicaVersionWait like
				// for a lagging replay, then read Journal.
				sum, err = journal.TagSummary{}, nil
			}
			if err != nil {
				if polls > 0 && ctx.Err() != nil {
					// ctx ended during a poll, not between two: it is the
					// same wait that ran out.
					return StateResult[S]{}, fmt.Errorf("runtime: State of %s: the stream is at version %d, waited for %d: %w", stream, seen, o.minVersion, ctx.Err())
				}
				return StateResult[S]{}, fmt.Errorf("runtime: State of %s: reading its version: %w", stream, err)
			}
			seen = sum.Version
			if sum.Version >= o.minVersion {
				break
			}
			t := time.NewTimer(o.poll)
			select {
			case <-ctx.Done():
				t.Stop()
				return StateResult[S]{}, fmt.Errorf("runtime: State of %s: the stream is at version %d, waited for %d: %w", stream, sum.Version, o.minVersion, ctx.Err())
			case <-fallback:
				t.Stop()
				src, fallback, o.poll = rt.cfg.Journal, nil, time.Millisecond
				continue
			case <-t.C:
			}
			o.poll = min(2*o.poll, 50*time.Millisecond)
		}
	}
	st, v, _, err := rt.host.FoldFrom(ctx, src, stream, m)
	if err != nil {
		return StateResult[S]{}, fmt.Errorf("runtime: State of %s: %w", stream, translate(err))
	}
	s, _ := st.(S)
	return StateResult[S]{State: s, Version: v, Exists: v > 0}, nil
}
