package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// The load scenario measures the read path: before each measurement one
// counter (stream counter/0) is seeded with loadEvents deposits, unmeasured;
// then every command of every writer loads it whole and checks that it
// folded loadEvents events. The modes:
//
//   - actor: runtime.State of the counter on a runtime without a snapshot
//     store, the fold every actor activation and cold start runs (the
//     journal's stream read, decoding, upcasting, evolving). The counter was
//     seeded through runtime.Execute, so its events carry the metadata the
//     runtime writes.
//   - occ: the journal alone: ReadStream from version 1 and foldCounter, what
//     occ reads on every attempt, without the runtime.
//   - hallgren: the peer's repository Get of its seeded aggregate (see
//     mode_hallgren.go).

// loadTarget is the load scenario's one aggregate.
var loadTarget = runtime.Target{Aggregate: counterGroup, ID: "0"}

// newLoadMode seeds the load scenario's aggregate for c.Mode on backend b and
// returns the mode that loads it.
func newLoadMode(ctx context.Context, c cell, o options, b *backend) (mode, error) {
	switch c.Mode {
	case modeHallgren:
		m, err := newHallgrenMode(ctx, c, o, b)
		if err != nil {
			return nil, err
		}
		return m, nil
	case modeActor, modeOCC:
	default:
		return nil, fmt.Errorf("the load scenario measures %v, not %s", loadModes, c.Mode)
	}
	if err := seedScribe(ctx, b); err != nil {
		return nil, err
	}
	if c.Mode == modeOCC {
		return journalLoadMode{j: b.Journal}, nil
	}
	rt, err := runtime.New(ctx, runtime.Config{Journal: b.Journal, Sessions: b.Sessions, NodeID: "benchmarks"})
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	m := &actorMode{rt: rt, scenario: c.Scenario}
	if err := m.register(); err != nil {
		return nil, fmt.Errorf("load: %w", errors.Join(err, rt.Shutdown(ctx)))
	}
	return stateLoadMode{m}, nil
}

// seedScribe executes loadEvents deposits on the load scenario's counter
// through a runtime of its own (10 callers of 100 commands each, so the
// actor group-commits them), then shuts that runtime down.
func seedScribe(ctx context.Context, b *backend) error {
	rt, err := runtime.New(ctx, runtime.Config{Journal: b.Journal, Sessions: b.Sessions, NodeID: "benchmarks-seed"})
	if err != nil {
		return fmt.Errorf("load: seed: %w", err)
	}
	m := &actorMode{rt: rt, scenario: scenarioLoad}
	if err := m.register(); err != nil {
		return fmt.Errorf("load: seed: %w", errors.Join(err, rt.Shutdown(ctx)))
	}
	const callers = 10
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range loadEvents / callers {
				if _, err := rt.Execute(ctx, loadTarget, deposit{Amount: 1}); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(append(errs, rt.Shutdown(ctx))...); err != nil {
		return fmt.Errorf("load: seed: %w", err)
	}
	return nil
}

// stateLoadMode loads the counter with runtime.State.
type stateLoadMode struct{ *actorMode }

func (m stateLoadMode) newWorker(int) worker { return m }

func (m stateLoadMode) do(ctx context.Context, _ target) (outcome, error) {
	st, err := runtime.State[counterState](ctx, m.rt, loadTarget)
	if err != nil {
		return outcome{}, err
	}
	if st.Version != loadEvents || st.State.Version != loadEvents {
		return outcome{}, fmt.Errorf("load: State folded version %d (%d events), want %d", st.Version, st.State.Version, loadEvents)
	}
	return outcome{Commands: 1, Events: loadEvents}, nil
}

// journalLoadMode loads the counter with the journal's ReadStream and
// foldCounter.
type journalLoadMode struct{ j journal.Journal }

func (m journalLoadMode) newWorker(int) worker { return m }

func (m journalLoadMode) close(context.Context) error { return nil }

func (m journalLoadMode) do(ctx context.Context, _ target) (outcome, error) {
	stream := journal.Stream(counterTag(0))
	var st counterState
	for r, err := range m.j.ReadStream(ctx, stream, 1, 0) {
		if err != nil {
			return outcome{}, fmt.Errorf("load: read %s: %w", stream, err)
		}
		if st, err = foldCounter(st, r); err != nil {
			return outcome{}, err
		}
	}
	if st.Version != loadEvents {
		return outcome{}, fmt.Errorf("load: read %d events of %s, want %d", st.Version, stream, loadEvents)
	}
	return outcome{Commands: 1, Events: loadEvents}, nil
}
