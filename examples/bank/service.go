package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/scribe-es/scribe/examples/bank/bank"
)

// AccountView is an account as the API returns it: its ID, its balance in
// minor units, its version (the number of events in its stream) and its
// customer, if it was opened for one.
type AccountView struct {
	ID       string        `json:"id"`
	Balance  int64         `json:"balance"`
	Version  uint64        `json:"version"`
	Customer *CustomerView `json:"customer,omitempty"`
}

// CustomerView is an account's customer as the API returns it. Once the
// customer is erased, Name and Email are gone and Erased is true.
type CustomerView struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Email  string `json:"email,omitempty"`
	Erased bool   `json:"erased,omitempty"`
}

// TransferView is the result of a transfer: its ID and both accounts right
// after it.
type TransferView struct {
	ID   string      `json:"id"`
	From AccountView `json:"from"`
	To   AccountView `json:"to"`
}

// EventView is one stored event of an account's stream.
type EventView struct {
	// Position is the event's global journal position ("commit.seq").
	Position string `json:"position"`
	// Version is the event's version within the account's stream.
	Version    uint64          `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	RecordedAt time.Time       `json:"recordedAt"`
}

// CommandOptions carry the per-request context of a command.
type CommandOptions struct {
	// IdempotencyKey, when set, makes the command idempotent across process
	// restarts: executing it again with the same key appends nothing and
	// returns the first result, or fails with code idempotency_key_reused
	// when the key was first used for a different command.
	IdempotencyKey string
	// CorrelationID is stored in the events' metadata.
	CorrelationID string
}

// Service is the bank's application service: what the HTTP layer calls.
// Every method is safe for concurrent use. Errors a client caused are
// *bank.Error values (with a code); any other error is a server fault.
type Service interface {
	// CreateAccount opens account id with a zero balance, for customer when
	// it is not nil.
	CreateAccount(ctx context.Context, id string, customer *bank.Customer, opts CommandOptions) (AccountView, error)
	// EraseCustomer erases customer id's personal data (its name and email
	// on every account): idempotent; a customer never seen is a
	// customer_not_found error.
	EraseCustomer(ctx context.Context, id string) error
	// Deposit credits amount to account id.
	Deposit(ctx context.Context, id string, amount int64, opts CommandOptions) (AccountView, error)
	// Withdraw debits amount from account id.
	Withdraw(ctx context.Context, id string, amount int64, opts CommandOptions) (AccountView, error)
	// Transfer moves amount from account from to account to, atomically.
	Transfer(ctx context.Context, from, to string, amount int64, opts CommandOptions) (TransferView, error)
	// Account returns account id as of every command acknowledged before the call.
	Account(ctx context.Context, id string) (AccountView, error)
	// Events returns one page of account id's stream: the events with
	// version ≥ from (from ≥ 1), at most limit of them (1..maxEventsPage), in
	// version order. more reports whether the stream has events after the
	// page. An account without events is a not-found error; an existing
	// account read beyond its last version gives an empty page. The returned
	// slice is owned by the caller.
	Events(ctx context.Context, id string, from uint64, limit int) (page []EventView, more bool, err error)
}

// Paging of Service.Events and GET /accounts/{id}/events.
const (
	// defaultEventsPage is the page size when the request gives no limit.
	defaultEventsPage = 1000
	// maxEventsPage is the largest page size a request may ask for.
	maxEventsPage = 10_000
)
