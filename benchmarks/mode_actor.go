package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

// counterModel is the counter aggregate as the stream actor sees it: the same
// pure decide and evolve functions and the same event encoding as the OCC modes.
type counterModel struct{}

func (counterModel) Name() string { return counterGroup }
func (counterModel) Initial() any { return counterState{} }

func (counterModel) Decide(state any, command any) ([]any, error) {
	e, err := decideDeposit(state.(counterState), command.(deposit))
	if err != nil {
		return nil, err
	}
	return []any{e}, nil
}

func (counterModel) Evolve(state any, event any) any {
	return evolveCounter(state.(counterState), event.(deposited))
}

func (counterModel) EncodeEvent(event any) (journal.Event, error) {
	data, err := json.Marshal(event.(deposited))
	if err != nil {
		return journal.Event{}, fmt.Errorf("encode %s: %w", depositedType, err)
	}
	return journal.Event{Type: depositedType, SchemaVersion: eventSchema, Data: data}, nil
}

func (counterModel) DecodeEvent(rec *journal.Record) (any, error) {
	var e deposited
	if err := json.Unmarshal(rec.Data, &e); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", depositedType, rec.ID, err)
	}
	return e, nil
}

func (counterModel) StateSchemaVersion() int { return 1 }

func (counterModel) EncodeState(state any) ([]byte, error) { return json.Marshal(state.(counterState)) }

func (counterModel) DecodeState(data []byte) (any, error) {
	var s counterState
	err := json.Unmarshal(data, &s)
	return s, err
}

// actorMode sends every command to its stream's actor, the single writer that
// decides queued commands in order and appends them in one journal call.
type actorMode struct{ h *actors.Host }

func newActorMode(ctx context.Context, b *backend) (mode, error) {
	h, err := actors.NewHost(ctx, actors.Config{
		Journal: b.Journal, Sessions: b.Sessions, NodeID: "benchmarks",
		Resolve: func(group string) actors.Model {
			if group == counterGroup {
				return counterModel{}
			}
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("actor mode: %w", err)
	}
	return &actorMode{h: h}, nil
}

// newWorker returns the mode itself: Execute is safe for concurrent use and
// the actor keeps all state.
func (m *actorMode) newWorker(int) worker { return m }

func (m *actorMode) close(ctx context.Context) error { return m.h.Shutdown(ctx) }

func (m *actorMode) do(ctx context.Context, t target) (outcome, error) {
	res, err := m.h.Execute(ctx, journal.Stream(counterTag(t.A)), actors.Command{Payload: deposit{Amount: 1}})
	if err != nil {
		return outcome{}, fmt.Errorf("execute on %s: %w", counterTag(t.A), err)
	}
	return outcome{Commands: 1, Events: len(res.Records)}, nil
}
