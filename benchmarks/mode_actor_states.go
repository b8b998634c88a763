package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// The transfer scenario's accounts as aggregates, for actor-states: the DCB
// transfer decides from the two accounts' states as their stream actors hold
// them (runtime.DCB.Uses), the form the bank example uses, instead of folding
// the accounts' events (the raw form actor measures).

// accountOpenedType names the event that gives an account aggregate its id:
// an aggregate's Evolve does not know its stream's tag, and a transfer event
// carries two accounts, so the state must know which one it is.
const accountOpenedType = "AccountOpened"

// accountOpened opens account ID with the opening balance.
type accountOpened struct {
	ID journal.Tag `json:"id"`
}

// Tags puts the opened event on its account's stream.
func (e accountOpened) Tags() []journal.Tag { return []journal.Tag{e.ID} }

// openAccount is the account aggregate's one command.
type openAccount struct{ ID journal.Tag }

// accountState is one account as its stream actor holds it.
type accountState struct {
	ID      journal.Tag
	Balance int64
}

// accountAggregate is the account as a runtime aggregate over the transfer
// scenario's account tags: opened once, then moved by transfers.
func accountAggregate() runtime.Aggregate[accountState] {
	return runtime.Aggregate[accountState]{
		Name:    accountGroup,
		Initial: func() accountState { return accountState{} },
		Decide: func(s accountState, command any) ([]any, error) {
			c, ok := command.(openAccount)
			if !ok {
				return nil, fmt.Errorf("%w: account command of type %T", errRejected, command)
			}
			if s.ID != "" {
				return nil, nil // already open
			}
			return []any{accountOpened{ID: c.ID}}, nil
		},
		Evolve: func(s accountState, event any) accountState {
			switch e := event.(type) {
			case accountOpened:
				s.ID, s.Balance = e.ID, openingBalance
			case transferred:
				if e.From == s.ID {
					s.Balance -= e.Amount
				}
				if e.To == s.ID {
					s.Balance += e.Amount
				}
			}
			return s
		},
	}
}

// transferFromStates is the transfer with Uses: the same decision as
// transferDCB, from the accounts' states.
func transferFromStates(accounts runtime.AggregateState[accountState]) runtime.DCB[transfer, runtime.DCBStates] {
	return runtime.DCB[transfer, runtime.DCBStates]{
		Name: "Transfer",
		Uses: []runtime.AggregateUse{accounts},
		Query: func(c transfer) journal.Query {
			return journal.Query{Items: accounts.Items(c.From.Value(), c.To.Value())}
		},
		Decide: func(c transfer, s runtime.DCBStates) ([]any, error) {
			from, to := accounts.Of(s, c.From.Value()), accounts.Of(s, c.To.Value())
			if from.ID != c.From || to.ID != c.To {
				return nil, fmt.Errorf("%w: transfer %s→%s between accounts that were not opened", errRejected, c.From, c.To)
			}
			e, err := decideTransfer(transferState{From: c.From, To: c.To, FromBalance: from.Balance, ToBalance: to.Balance}, c)
			if err != nil {
				return nil, err
			}
			return []any{e}, nil
		},
	}
}

// actorStatesMode measures transfers as DCB commands with Uses: reserve both
// accounts' actors, decide from their states, append once. The accounts are
// opened (one event each) before the measurement.
type actorStatesMode struct {
	rt        *runtime.Runtime
	transfers *runtime.DCBCommand[transfer, runtime.DCBStates]
}

func newActorStatesMode(ctx context.Context, c cell, b *backend) (mode, error) {
	if c.Scenario != scenarioTransfer {
		return nil, fmt.Errorf("mode %s measures only the %s scenario", modeActorStates, scenarioTransfer)
	}
	rt, err := runtime.New(ctx, runtime.Config{Journal: b.Journal, Sessions: b.Sessions, NodeID: "benchmarks"})
	if err != nil {
		return nil, fmt.Errorf("actor-states mode: %w", err)
	}
	m := &actorStatesMode{rt: rt}
	if err := m.setUp(ctx); err != nil {
		return nil, fmt.Errorf("actor-states mode: %w", errors.Join(err, rt.Shutdown(ctx)))
	}
	return m, nil
}

// setUp registers the events, the account aggregate and the transfer, and
// opens every account.
func (m *actorStatesMode) setUp(ctx context.Context) error {
	if err := errors.Join(
		runtime.RegisterEvent[accountOpened](m.rt, accountOpenedType, eventSchema),
		runtime.RegisterEvent[transferred](m.rt, transferredType, eventSchema),
		runtime.RegisterAggregate(m.rt, accountAggregate()),
	); err != nil {
		return err
	}
	accounts, err := runtime.Uses[accountState](m.rt, accountGroup)
	if err != nil {
		return err
	}
	if m.transfers, err = runtime.RegisterDCB(m.rt, transferFromStates(accounts)); err != nil {
		return err
	}
	for i := range transferAccounts {
		id := strconv.Itoa(i)
		if _, err := m.rt.Execute(ctx, runtime.Target{Aggregate: accountGroup, ID: id}, openAccount{ID: accountTag(i)}); err != nil {
			return fmt.Errorf("open account %s: %w", id, err)
		}
	}
	return nil
}

// newWorker returns a stateless worker: the actors keep all state.
func (m *actorStatesMode) newWorker(int) worker { return m }

func (m *actorStatesMode) do(ctx context.Context, t target) (outcome, error) {
	from, to := accountTag(t.A), accountTag(t.B)
	res, err := m.transfers.Execute(ctx, transfer{From: from, To: to, Amount: 1})
	if err != nil {
		return outcome{}, fmt.Errorf("transfer %s→%s: %w", from, to, err)
	}
	return outcome{Commands: 1, Events: len(res.Records)}, nil
}

func (m *actorStatesMode) close(ctx context.Context) error { return m.rt.Shutdown(ctx) }
