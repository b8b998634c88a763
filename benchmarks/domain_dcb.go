package main

import (
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// dcbTransferState is a transfer's state as the DCB executor folds it: the two
// balances, and the first event that could not be decoded (which fails the
// decision rather than being skipped).
type dcbTransferState struct {
	transferState
	Err error
}

// transferCommand is a transfer as a DCB command for the actor mode: the same
// query, fold, decision and event as the OCC transfer loop.
func transferCommand(c transfer) tagconsistency.Command[dcbTransferState] {
	return tagconsistency.Command[dcbTransferState]{
		Name:    "Transfer",
		Query:   transferQuery(c.From, c.To),
		Initial: func() dcbTransferState { return dcbTransferState{transferState: newTransferState(c.From, c.To)} },
		Evolve: func(s dcbTransferState, r journal.Record) dcbTransferState {
			if s.Err != nil {
				return s
			}
			s.transferState, s.Err = foldTransfer(s.transferState, r)
			return s
		},
		Decide: func(s dcbTransferState) ([]journal.Event, error) {
			if s.Err != nil {
				return nil, s.Err
			}
			e, err := decideTransfer(s.transferState, c)
			if err != nil {
				return nil, err
			}
			ev, err := transferEvent(e)
			if err != nil {
				return nil, err
			}
			return []journal.Event{ev}, nil
		},
	}
}
