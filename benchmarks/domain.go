package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/scribe-es/scribe/journal"
)

// The benchmark's domain: a counter (an account that only receives deposits)
// for the hot, spread and skewed scenarios, and accounts with transfers for the
// transfer scenario. Every mode runs exactly these pure functions and appends
// exactly these events, so the modes differ only in how they coordinate writers.

const (
	counterGroup      = "counter"
	accountGroup      = "account"
	depositedType     = "Deposited"
	transferredType   = "MoneyTransferred"
	eventSchema       = 1
	openingBalance    = int64(1_000_000_000)
	maxCounterBalance = int64(1) << 53
)

// payloadNote pads each event's JSON payload to about 100 bytes, the size the
// benchmark's claims are stated for.
const payloadNote = "benchmark payload padding to one hundred bytes"

// errRejected is returned by the decide functions for a command the state does
// not allow; the benchmark's commands are built so that it never happens, so
// every rejection shows up as an error in the results.
var errRejected = errors.New("command rejected by decide")

// counterState is a counter stream folded from its events.
type counterState struct {
	Balance int64
	Version uint64 // number of events folded in: the stream's version
}

// deposit is the counter command.
type deposit struct {
	Amount int64
}

// deposited is the counter event; it records the new balance and sequence so
// that a decision depends on the state it was made against.
type deposited struct {
	Amount  int64  `json:"amount"`
	Balance int64  `json:"balance"`
	Seq     uint64 `json:"seq"`
	Note    string `json:"note"`
}

// decideDeposit is the counter's pure decision.
func decideDeposit(s counterState, c deposit) (deposited, error) {
	if c.Amount <= 0 {
		return deposited{}, fmt.Errorf("%w: deposit amount %d must be positive", errRejected, c.Amount)
	}
	if s.Balance > maxCounterBalance-c.Amount {
		return deposited{}, fmt.Errorf("%w: balance %d would overflow", errRejected, s.Balance)
	}
	return deposited{Amount: c.Amount, Balance: s.Balance + c.Amount, Seq: s.Version + 1, Note: payloadNote}, nil
}

// evolveCounter folds one event into the counter's state.
func evolveCounter(s counterState, e deposited) counterState {
	s.Balance += e.Amount
	s.Version++
	return s
}

// transfer is the DCB command: move Amount from account From to account To.
type transfer struct {
	From, To journal.Tag
	Amount   int64
}

// transferred is the transfer event; it carries the tags of both accounts.
type transferred struct {
	From   journal.Tag `json:"from"`
	To     journal.Tag `json:"to"`
	Amount int64       `json:"amount"`
	Note   string      `json:"note"`
}

// Tags makes the event carry both accounts' tags when the runtime encodes it.
func (e transferred) Tags() []journal.Tag { return []journal.Tag{e.From, e.To} }

// transferState holds the balances of the two accounts a transfer touches.
type transferState struct {
	From, To               journal.Tag
	FromBalance, ToBalance int64
}

// newTransferState is the state of two accounts before any transfer.
func newTransferState(from, to journal.Tag) transferState {
	return transferState{From: from, To: to, FromBalance: openingBalance, ToBalance: openingBalance}
}

// decideTransfer is the transfer's pure decision.
func decideTransfer(s transferState, c transfer) (transferred, error) {
	switch {
	case c.From == c.To:
		return transferred{}, fmt.Errorf("%w: transfer from %s to itself", errRejected, c.From)
	case c.Amount <= 0:
		return transferred{}, fmt.Errorf("%w: transfer amount %d must be positive", errRejected, c.Amount)
	case s.From != c.From || s.To != c.To:
		return transferred{}, fmt.Errorf("%w: state of %s→%s used for a transfer %s→%s", errRejected, s.From, s.To, c.From, c.To)
	case s.FromBalance < c.Amount:
		return transferred{}, fmt.Errorf("%w: %s has %d, cannot transfer %d", errRejected, c.From, s.FromBalance, c.Amount)
	}
	return transferred{From: c.From, To: c.To, Amount: c.Amount, Note: payloadNote}, nil
}

// evolveTransfer folds one transfer event into the balances of the two accounts.
func evolveTransfer(s transferState, e transferred) transferState {
	apply := func(acct journal.Tag, bal *int64) {
		if e.From == acct {
			*bal -= e.Amount
		}
		if e.To == acct {
			*bal += e.Amount
		}
	}
	apply(s.From, &s.FromBalance)
	apply(s.To, &s.ToBalance)
	return s
}

// counterTag names counter stream i.
func counterTag(i int) journal.Tag { return journal.NewTag(counterGroup, strconv.Itoa(i)) }

// accountTag names account i.
func accountTag(i int) journal.Tag { return journal.NewTag(accountGroup, strconv.Itoa(i)) }

// transferQuery is the DCB query of a transfer: every event of either account.
func transferQuery(from, to journal.Tag) journal.Query {
	return journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{from}}, {Tags: []journal.Tag{to}}}}
}

// depositEvent encodes a deposited event for stream tag.
func depositEvent(tag journal.Tag, e deposited) (journal.Event, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return journal.Event{}, fmt.Errorf("encode %s: %w", depositedType, err)
	}
	return journal.Event{ID: journal.NewEventID(), Type: depositedType, SchemaVersion: eventSchema, Tags: []journal.Tag{tag}, Data: data}, nil
}

// transferEvent encodes a transferred event carrying both accounts' tags.
func transferEvent(e transferred) (journal.Event, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return journal.Event{}, fmt.Errorf("encode %s: %w", transferredType, err)
	}
	return journal.Event{ID: journal.NewEventID(), Type: transferredType, SchemaVersion: eventSchema, Tags: []journal.Tag{e.From, e.To}, Data: data}, nil
}

// foldCounter folds a stored record into the counter state.
func foldCounter(s counterState, r journal.Record) (counterState, error) {
	if r.Type != depositedType {
		return s, fmt.Errorf("stream %s: unexpected event type %q", r.Tags, r.Type)
	}
	var e deposited
	if err := json.Unmarshal(r.Data, &e); err != nil {
		return s, fmt.Errorf("decode %s %s: %w", depositedType, r.ID, err)
	}
	return evolveCounter(s, e), nil
}

// foldTransfer folds a stored record into the two accounts' balances.
func foldTransfer(s transferState, r journal.Record) (transferState, error) {
	if r.Type != transferredType {
		return s, fmt.Errorf("accounts %s/%s: unexpected event type %q", s.From, s.To, r.Type)
	}
	var e transferred
	if err := json.Unmarshal(r.Data, &e); err != nil {
		return s, fmt.Errorf("decode %s %s: %w", transferredType, r.ID, err)
	}
	return evolveTransfer(s, e), nil
}
