package bank

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

// Event type names, as stored in the journal.
const (
	TypeAccountOpened    = "AccountOpened"
	TypeMoneyDeposited   = "MoneyDeposited"
	TypeMoneyWithdrawn   = "MoneyWithdrawn"
	TypeMoneyTransferred = "MoneyTransferred"
)

// EventTypes lists every event type of the domain.
var EventTypes = []string{TypeAccountOpened, TypeMoneyDeposited, TypeMoneyWithdrawn, TypeMoneyTransferred}

// TagGroupAccount is the tag group of account streams.
const TagGroupAccount = "account"

// AccountTag returns the tag of account id's stream: "account:<id>".
func AccountTag(id string) journal.Tag { return journal.NewTag(TagGroupAccount, id) }

// Event is a domain event. Its JSON encoding is the stored event's Data.
type Event interface {
	// EventType returns the stored type name (one of EventTypes).
	EventType() string
	// Tags returns the tags the stored event carries (it implements the
	// runtime's Tagged interface: a transfer is tagged with both accounts).
	Tags() []journal.Tag
}

// AccountOpened records that an account was opened with a zero balance,
// for a customer when CustomerID is set. CustomerName and CustomerEmail are
// personal data of the customer (the data subject CustomerID): the bank's
// runtime seals them before they reach the journal, and they read as empty
// once the customer is erased.
type AccountOpened struct {
	AccountID     string `json:"accountId"`
	CustomerID    string `json:"customerId,omitempty"`
	CustomerName  string `json:"customerName,omitempty"`
	CustomerEmail string `json:"customerEmail,omitempty"`
}

// MoneyDeposited records a credit of Amount to an account.
type MoneyDeposited struct {
	AccountID string `json:"accountId"`
	Amount    int64  `json:"amount"`
}

// MoneyWithdrawn records a debit of Amount from an account.
type MoneyWithdrawn struct {
	AccountID string `json:"accountId"`
	Amount    int64  `json:"amount"`
}

// MoneyTransferred records a transfer of Amount from one account to another:
// one event in both accounts' streams.
type MoneyTransferred struct {
	TransferID string `json:"transferId"`
	From       string `json:"from"`
	To         string `json:"to"`
	Amount     int64  `json:"amount"`
}

// EventType implements Event.
func (AccountOpened) EventType() string { return TypeAccountOpened }

// EventType implements Event.
func (MoneyDeposited) EventType() string { return TypeMoneyDeposited }

// EventType implements Event.
func (MoneyWithdrawn) EventType() string { return TypeMoneyWithdrawn }

// EventType implements Event.
func (MoneyTransferred) EventType() string { return TypeMoneyTransferred }

// Tags implements Event: the account's tag.
func (e AccountOpened) Tags() []journal.Tag { return []journal.Tag{AccountTag(e.AccountID)} }

// Tags implements Event: the account's tag.
func (e MoneyDeposited) Tags() []journal.Tag { return []journal.Tag{AccountTag(e.AccountID)} }

// Tags implements Event: the account's tag.
func (e MoneyWithdrawn) Tags() []journal.Tag { return []journal.Tag{AccountTag(e.AccountID)} }

// Tags implements Event: both accounts' tags. The transfer ID is in the
// data, not a tag: a tag would be one more stream to reserve per transfer.
func (e MoneyTransferred) Tags() []journal.Tag {
	return []journal.Tag{AccountTag(e.From), AccountTag(e.To)}
}

// DecodeEvent decodes a stored event's Data given its type. Unknown types and
// data that does not match the type's fields are errors.
func DecodeEvent(eventType string, data []byte) (Event, error) {
	switch eventType {
	case TypeAccountOpened:
		return decodeInto[AccountOpened](eventType, data)
	case TypeMoneyDeposited:
		return decodeInto[MoneyDeposited](eventType, data)
	case TypeMoneyWithdrawn:
		return decodeInto[MoneyWithdrawn](eventType, data)
	case TypeMoneyTransferred:
		return decodeInto[MoneyTransferred](eventType, data)
	}
	return nil, fmt.Errorf("bank: unknown event type %q; known types are %v", eventType, EventTypes)
}

func decodeInto[E Event](eventType string, data []byte) (Event, error) {
	var e E
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("bank: decode %s event: %w", eventType, err)
	}
	return e, nil
}
