package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/scribe-es/scribe/runtime"
)

// counterAggregate is the counter as a runtime aggregate: the same pure
// decide and evolve functions as the OCC modes; the runtime's JSON codec
// encodes the same deposited events to the same bytes.
func counterAggregate() runtime.Aggregate[counterState] {
	return runtime.Aggregate[counterState]{
		Name:    counterGroup,
		Initial: func() counterState { return counterState{} },
		Decide: func(s counterState, command any) ([]any, error) {
			c, ok := command.(deposit)
			if !ok {
				return nil, fmt.Errorf("%w: counter command of type %T", errRejected, command)
			}
			e, err := decideDeposit(s, c)
			if err != nil {
				return nil, err
			}
			return []any{e}, nil
		},
		Evolve: func(s counterState, event any) counterState { return evolveCounter(s, event.(deposited)) },
	}
}

// actorMode sends every command through runtime.Execute to its stream's
// actor, the single writer that decides queued commands in order and appends
// them in one journal call (group commit).
type actorMode struct{ rt *runtime.Runtime }

func newActorMode(ctx context.Context, b *backend) (mode, error) {
	rt, err := runtime.New(ctx, runtime.Config{Journal: b.Journal, Sessions: b.Sessions, NodeID: "benchmarks"})
	if err != nil {
		return nil, fmt.Errorf("actor mode: %w", err)
	}
	if err := registerDomain(rt); err != nil {
		return nil, fmt.Errorf("actor mode: %w", errors.Join(err, rt.Shutdown(ctx)))
	}
	return &actorMode{rt: rt}, nil
}

// registerDomain registers the benchmark's events and aggregates.
func registerDomain(rt *runtime.Runtime) error {
	if err := runtime.RegisterEvent[deposited](rt, depositedType, eventSchema); err != nil {
		return err
	}
	return runtime.RegisterAggregate(rt, counterAggregate())
}

// newWorker returns the mode itself: Execute is safe for concurrent use and
// the actors keep all state.
func (m *actorMode) newWorker(int) worker { return m }

func (m *actorMode) close(ctx context.Context) error { return m.rt.Shutdown(ctx) }

func (m *actorMode) do(ctx context.Context, t target) (outcome, error) {
	res, err := m.rt.Execute(ctx, runtime.Target{Aggregate: counterGroup, ID: strconv.Itoa(t.A)}, deposit{Amount: 1})
	if err != nil {
		return outcome{}, fmt.Errorf("execute on %s: %w", counterTag(t.A), err)
	}
	return outcome{Commands: 1, Events: len(res.Records)}, nil
}
