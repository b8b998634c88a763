package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// transferCommandName names the transfer DCB command (in spans, metrics and
// the derivation of idempotent event IDs).
const transferCommandName = "Transfer"

// transferState is the DCB state of a transfer: both accounts, folded from
// the events of both account streams. err keeps a stored event that could
// not be decoded; Decide reports it.
type transferState struct {
	bank.TransferState
	err error
}

// transferCommand builds the DCB command of transfer t: its query is every
// event of either account (the two tags are reserved at their stream actors
// in sorted order), its decision is bank.DecideTransfer, and its one event
// carries both account tags. decided receives the state the decision was
// made from (the executor calls Decide once per execution).
func transferCommand(t bank.Transfer, decided *bank.TransferState) tagconsistency.Command[transferState] {
	from, to := bank.AccountTag(t.From), bank.AccountTag(t.To)
	return tagconsistency.Command[transferState]{
		Name: transferCommandName,
		Query: journal.Query{Items: []journal.QueryItem{
			{Tags: []journal.Tag{from}},
			{Tags: []journal.Tag{to}},
		}},
		Initial: func() transferState { return transferState{TransferState: bank.NewTransferState(t)} },
		Evolve: func(s transferState, rec journal.Record) transferState {
			if s.err != nil {
				return s
			}
			e, err := bank.DecodeEvent(rec.Type, rec.Data)
			if err != nil {
				s.err = fmt.Errorf("bank: event %s at position %s: %w", rec.ID, rec.Position, err)
				return s
			}
			s.TransferState = s.TransferState.Evolve(e)
			return s
		},
		Decide: func(s transferState) ([]journal.Event, error) {
			if s.err != nil {
				return nil, s.err
			}
			events, err := bank.DecideTransfer(s.TransferState, t)
			if err != nil {
				return nil, err
			}
			out := make([]journal.Event, len(events))
			for i, e := range events {
				data, err := json.Marshal(e)
				if err != nil {
					return nil, err
				}
				out[i] = journal.Event{Type: e.EventType(), SchemaVersion: 1, Tags: e.EventTags(), Data: data}
			}
			*decided = s.TransferState
			return out, nil
		},
	}
}

// Transfer implements Service: a DCB command over the tags of both accounts.
func (s *bankService) Transfer(ctx context.Context, from, to string, amount int64, opts CommandOptions) (TransferView, error) {
	t := bank.Transfer{TransferID: journal.NewEventID().String(), From: from, To: to, Amount: amount}
	if err := t.Validate(); err != nil {
		return TransferView{}, err
	}
	var decided bank.TransferState
	res, err := s.executeDCB(ctx, transferCommand(t, &decided), opts)
	if err != nil {
		return TransferView{}, classify(err)
	}
	if len(res.Records) != 1 {
		return TransferView{}, fmt.Errorf("bank: transfer %s stored %d events, want 1", t.TransferID, len(res.Records))
	}
	rec := res.Records[0]
	e, err := bank.DecodeEvent(rec.Type, rec.Data)
	if err != nil {
		return TransferView{}, err
	}
	stored, ok := e.(bank.MoneyTransferred)
	fromTag, toTag := bank.AccountTag(from), bank.AccountTag(to)
	if !ok || stored.From != from || stored.To != to || stored.Amount != amount {
		return TransferView{}, keyReused(opts.IdempotencyKey)
	}
	fromVersion, toVersion := rec.Version(fromTag), rec.Version(toTag)
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
	return TransferView{ID: stored.TransferID, From: fv, To: tv}, nil
}
