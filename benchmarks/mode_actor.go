package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
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

// transferDCB is a transfer as a runtime DCB command: the same query, fold,
// decision and event as the OCC transfer loop.
func transferDCB() runtime.DCB[transfer, transferState] {
	return runtime.DCB[transfer, transferState]{
		Name:    "Transfer",
		Query:   func(c transfer) journal.Query { return transferQuery(c.From, c.To) },
		Initial: func(c transfer) transferState { return newTransferState(c.From, c.To) },
		Evolve: func(_ transfer, s transferState, e runtime.DCBEvent) transferState {
			return evolveTransfer(s, e.Value.(transferred))
		},
		Decide: func(c transfer, s transferState) ([]any, error) {
			e, err := decideTransfer(s, c)
			if err != nil {
				return nil, err
			}
			return []any{e}, nil
		},
	}
}

// actorMode sends every command through the runtime: counter commands with
// runtime.Execute to their stream's actor, the single writer that decides
// queued commands in order and appends them in one journal call (group
// commit); transfers as DCB commands, which reserve both accounts' actors in
// tag order, decide once and append once.
type actorMode struct {
	rt        *runtime.Runtime
	scenario  string
	transfers *runtime.DCBCommand[transfer, transferState]
	personal  bool // actor-personal: deposited.note is sealed personal data
}

func newActorMode(ctx context.Context, c cell, b *backend) (mode, error) {
	rt, err := runtime.New(ctx, runtime.Config{Journal: b.Journal, Sessions: b.Sessions, NodeID: "benchmarks"})
	if err != nil {
		return nil, fmt.Errorf("actor mode: %w", err)
	}
	m := &actorMode{rt: rt, scenario: c.Scenario}
	if err := m.register(); err != nil {
		return nil, fmt.Errorf("actor mode: %w", errors.Join(err, rt.Shutdown(ctx)))
	}
	return m, nil
}

// newActorPersonalMode is newActorMode with erasure support: a key store
// (in memory, so the measurement is the runtime's cost: sealing, the key
// cache and the stream binding, not a key store's round trips after the
// first use of each counter) and the deposited event's note declared as
// personal data of its counter.
func newActorPersonalMode(ctx context.Context, c cell, b *backend) (mode, error) {
	rt, err := runtime.New(ctx, runtime.Config{Journal: b.Journal, Sessions: b.Sessions, NodeID: "benchmarks",
		KeyStore: erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})})
	if err != nil {
		return nil, fmt.Errorf("actor-personal mode: %w", err)
	}
	m := &actorMode{rt: rt, scenario: c.Scenario, personal: true}
	if err := m.register(); err != nil {
		return nil, fmt.Errorf("actor-personal mode: %w", errors.Join(err, rt.Shutdown(ctx)))
	}
	return m, nil
}

// register registers the benchmark's events, the counter aggregate and the
// transfer DCB command.
func (m *actorMode) register() error {
	var opts []runtime.EventOption
	if m.personal {
		opts = append(opts, runtime.WithPersonalData(runtime.PersonalData{Fields: []string{"note"}, SubjectTagGroup: counterGroup}))
	}
	if err := errors.Join(
		runtime.RegisterEvent[deposited](m.rt, depositedType, eventSchema, opts...),
		runtime.RegisterEvent[transferred](m.rt, transferredType, eventSchema),
		runtime.RegisterAggregate(m.rt, counterAggregate()),
	); err != nil {
		return err
	}
	var err error
	m.transfers, err = runtime.RegisterDCB(m.rt, transferDCB())
	return err
}

// newWorker returns a stateless worker: Execute is safe for concurrent use
// and the actors keep all state.
func (m *actorMode) newWorker(int) worker {
	if m.scenario == scenarioTransfer {
		return actorTransferWorker{m}
	}
	return m
}

func (m *actorMode) close(ctx context.Context) error { return m.rt.Shutdown(ctx) }

// transferWorker executes transfers as DCB commands.
type actorTransferWorker struct{ m *actorMode }

func (w actorTransferWorker) do(ctx context.Context, t target) (outcome, error) {
	from, to := accountTag(t.A), accountTag(t.B)
	res, err := w.m.transfers.Execute(ctx, transfer{From: from, To: to, Amount: 1})
	if err != nil {
		return outcome{}, fmt.Errorf("transfer %s→%s: %w", from, to, err)
	}
	return outcome{Commands: 1, Events: len(res.Records)}, nil
}

func (m *actorMode) do(ctx context.Context, t target) (outcome, error) {
	res, err := m.rt.Execute(ctx, runtime.Target{Aggregate: counterGroup, ID: strconv.Itoa(t.A)}, deposit{Amount: 1})
	if err != nil {
		return outcome{}, fmt.Errorf("execute on %s: %w", counterTag(t.A), err)
	}
	return outcome{Commands: 1, Events: len(res.Records)}, nil
}
