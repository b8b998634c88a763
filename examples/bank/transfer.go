package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// transferCommandName names the transfer DCB command in spans, metrics and
// the derivation of idempotent event IDs.
const transferCommandName = "Transfer"

// transferCommand is the transfer DCB command and the handle of the account
// aggregate whose states it decides from.
type transferCommand struct {
	accounts runtime.AggregateState[bank.Account]
	dcb      *runtime.DCBCommand[bank.Transfer, runtime.DCBStates]
}

// registerTransfer registers the transfer DCB command: it reserves both
// account tags at their stream actors (in sorted order), decides from both
// accounts' aggregate states with bank.DecideTransfer, and appends one
// MoneyTransferred event carrying both account tags. The account aggregate
// must be registered first.
func registerTransfer(rt *runtime.Runtime, parts accountPartitions) (transferCommand, error) {
	accounts, err := runtime.Uses[bank.Account](rt, bank.TagGroupAccount)
	if err != nil {
		return transferCommand{}, err
	}
	dcb, err := runtime.RegisterDCB(rt, runtime.DCB[bank.Transfer, runtime.DCBStates]{
		Name: transferCommandName,
		Uses: []runtime.AggregateUse{accounts},
		Query: func(t bank.Transfer) journal.Query {
			return journal.Query{Partition: parts.of(t.From), Items: accounts.Items(t.From, t.To)}
		},
		Decide: func(t bank.Transfer, s runtime.DCBStates) ([]any, error) {
			from, to := accounts.Of(s, t.From), accounts.Of(s, t.To)
			// An account that was never opened has the zero state.
			from.ID, to.ID = t.From, t.To
			events, err := bank.DecideTransfer(bank.TransferState{From: from, To: to}, t)
			if err != nil {
				return nil, err
			}
			out := make([]any, len(events))
			for i, e := range events {
				out[i] = e
			}
			return out, nil
		},
	})
	if err != nil {
		return transferCommand{}, err
	}
	return transferCommand{accounts: accounts, dcb: dcb}, nil
}

// transferIDSpace is the UUIDv5 namespace of transfer IDs derived from
// idempotency keys.
var transferIDSpace = uuid.MustParse("3b0f6a52-7d1e-4c59-8a63-5f0b2e9d41c7")

// Transfer implements Service: a DCB command over the tags of both accounts.
func (s *bankService) Transfer(ctx context.Context, from, to string, amount int64, opts CommandOptions) (TransferView, error) {
	// A retry with the same Idempotency-Key is the same command (the runtime
	// refuses a key reused for a different one), so its transfer ID derives
	// from the key.
	id := journal.NewEventID().String()
	if opts.IdempotencyKey != "" {
		id = uuid.NewSHA1(transferIDSpace, []byte(opts.IdempotencyKey)).String()
	}
	t := bank.Transfer{TransferID: id, From: from, To: to, Amount: amount}
	if err := t.Validate(); err != nil {
		return TransferView{}, err
	}
	if err := s.parts.sameTransfer(from, to); err != nil {
		return TransferView{}, err
	}
	res, err := s.transfer.dcb.Execute(ctx, t, metadata(opts))
	if errors.Is(err, runtime.ErrIdempotencyKeyReused) {
		return TransferView{}, keyReused(opts.IdempotencyKey)
	}
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
	// Both accounts as the transfer left them: the result's states, held
	// unless the transfer was a retry of an executed one (nothing decided).
	fromAcc, okFrom := s.transfer.accounts.Lookup(res.States, from)
	toAcc, okTo := s.transfer.accounts.Lookup(res.States, to)
	if okFrom && okTo {
		return TransferView{
			ID:   stored.TransferID,
			From: AccountView{ID: from, Balance: fromAcc.Balance, Version: fromVersion},
			To:   AccountView{ID: to, Balance: toAcc.Balance, Version: toVersion},
		}, nil
	}
	// A retry: read both accounts right after the transfer.
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
