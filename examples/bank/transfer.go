package main

import (
	"context"
	"fmt"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// transferCommandName names the transfer DCB command in spans, metrics and
// the derivation of idempotent event IDs.
const transferCommandName = "Transfer"

// transferRequest is one execution of the transfer DCB command. decided
// receives the state the decision was made from (Decide runs once per
// execution), so the response can report both balances right after the
// transfer without reading again.
type transferRequest struct {
	bank.Transfer
	decided *bank.TransferState
}

// transferQuery is every event of either account: the executor reserves both
// account tags at their stream actors, in sorted order.
func transferQuery(r transferRequest) journal.Query {
	return journal.Query{Items: []journal.QueryItem{
		{Tags: []journal.Tag{bank.AccountTag(r.From)}},
		{Tags: []journal.Tag{bank.AccountTag(r.To)}},
	}}
}

// registerTransfer registers the transfer DCB command: it decides from both
// accounts — the states their actors hold when available, otherwise the fold
// of both streams — with bank.DecideTransfer, and appends one
// MoneyTransferred event carrying both account tags.
func registerTransfer(rt *runtime.Runtime) (*runtime.DCBCommand[transferRequest, bank.TransferState], error) {
	return runtime.RegisterDCB(rt, runtime.DCB[transferRequest, bank.TransferState]{
		Name:    transferCommandName,
		Query:   transferQuery,
		Initial: func(r transferRequest) bank.TransferState { return bank.NewTransferState(r.Transfer) },
		Evolve: func(_ transferRequest, s bank.TransferState, ev runtime.DCBEvent) bank.TransferState {
			if e, ok := ev.Value.(bank.Event); ok {
				return s.Evolve(e)
			}
			return s
		},
		FromStates: func(r transferRequest, states map[journal.Tag]any) (bank.TransferState, bool) {
			from, ok1 := states[bank.AccountTag(r.From)].(bank.Account)
			to, ok2 := states[bank.AccountTag(r.To)].(bank.Account)
			if !ok1 || !ok2 {
				return bank.TransferState{}, false
			}
			// An account that was never opened has the zero state.
			from.ID, to.ID = r.From, r.To
			return bank.TransferState{From: from, To: to}, true
		},
		Decide: func(r transferRequest, s bank.TransferState) ([]any, error) {
			events, err := bank.DecideTransfer(s, r.Transfer)
			if err != nil {
				return nil, err
			}
			*r.decided = s
			out := make([]any, len(events))
			for i, e := range events {
				out[i] = e
			}
			return out, nil
		},
	})
}

// Transfer implements Service: a DCB command over the tags of both accounts.
func (s *bankService) Transfer(ctx context.Context, from, to string, amount int64, opts CommandOptions) (TransferView, error) {
	t := bank.Transfer{TransferID: journal.NewEventID().String(), From: from, To: to, Amount: amount}
	if err := t.Validate(); err != nil {
		return TransferView{}, err
	}
	var decided bank.TransferState
	res, err := s.transfer.Execute(ctx, transferRequest{Transfer: t, decided: &decided}, metadata(opts))
	if err != nil {
		return TransferView{}, classify(err)
	}
	if len(res.Records) != 1 {
		if res.Duplicate {
			return TransferView{}, keyReused(opts.IdempotencyKey)
		}
		return TransferView{}, fmt.Errorf("bank: transfer %s stored %d events, want 1", t.TransferID, len(res.Records))
	}
	rec := res.Records[0]
	e, err := s.decode(ctx, rec)
	if err != nil {
		return TransferView{}, err
	}
	stored, ok := e.(bank.MoneyTransferred)
	if !ok || stored.From != from || stored.To != to || stored.Amount != amount {
		return TransferView{}, keyReused(opts.IdempotencyKey)
	}
	fromVersion, toVersion := rec.Version(bank.AccountTag(from)), rec.Version(bank.AccountTag(to))
	if !res.Duplicate {
		return TransferView{
			ID:   stored.TransferID,
			From: AccountView{ID: from, Balance: decided.From.Balance - amount, Version: fromVersion},
			To:   AccountView{ID: to, Balance: decided.To.Balance + amount, Version: toVersion},
		}, nil
	}
	// A retry of an executed transfer: answer with both accounts right after it.
	fv, err := s.accountAt(ctx, from, fromVersion)
	if err != nil {
		return TransferView{}, err
	}
	tv, err := s.accountAt(ctx, to, toVersion)
	if err != nil {
		return TransferView{}, err
	}
	// A transfer's answer carries no customer, the retry's neither.
	fv.Customer, tv.Customer = nil, nil
	return TransferView{ID: stored.TransferID, From: fv, To: tv}, nil
}
