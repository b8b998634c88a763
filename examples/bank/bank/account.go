package bank

import "fmt"

// Account is the state of the account aggregate. The zero Account is the
// state of a stream with no events: not open, no ID, balance 0.
type Account struct {
	ID      string `json:"id"`
	Open    bool   `json:"open"`
	Balance int64  `json:"balance"`
	// Customer is the account's customer, nil when it was opened without
	// one. After the customer's erasure its Name and Email are empty.
	Customer *Customer `json:"customer,omitempty"`
}

// Customer is the holder of an account. ID identifies the customer (and is
// the data subject of erasure); Name and Email are personal data.
type Customer struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

// Command is a command to the account aggregate: OpenAccount, DepositMoney or
// WithdrawMoney.
type Command interface {
	// Account returns the ID of the account the command addresses.
	Account() string
}

// OpenAccount opens account AccountID with a zero balance, for the customer
// CustomerID (optional; validated by ValidateCustomer) with its name and
// email.
type OpenAccount struct {
	AccountID     string
	CustomerID    string
	CustomerName  string
	CustomerEmail string
}

// DepositMoney credits Amount to account AccountID.
type DepositMoney struct {
	AccountID string
	Amount    int64
}

// WithdrawMoney debits Amount from account AccountID.
type WithdrawMoney struct {
	AccountID string
	Amount    int64
}

// Account implements Command.
func (c OpenAccount) Account() string { return c.AccountID }

// Account implements Command.
func (c DepositMoney) Account() string { return c.AccountID }

// Account implements Command.
func (c WithdrawMoney) Account() string { return c.AccountID }

// Decide is the account aggregate's decision: given the current state and a
// command, it returns the events to append or a domain error (*Error). It is
// pure and never mutates a. A command whose AccountID does not match an open
// account's ID is a programming error and is reported as invalid_request.
func Decide(a Account, cmd Command) ([]Event, error) {
	if err := ValidateAccountID(cmd.Account()); err != nil {
		return nil, err
	}
	if a.ID != "" && a.ID != cmd.Account() {
		return nil, errorf(CodeInvalidRequest, "command for account %q sent to the stream of account %q", cmd.Account(), a.ID)
	}
	switch c := cmd.(type) {
	case OpenAccount:
		if a.Open {
			return nil, errorf(CodeAccountExists, "account %q already exists; choose another ID", c.AccountID)
		}
		if c.CustomerID != "" || c.CustomerName != "" || c.CustomerEmail != "" {
			if err := ValidateCustomer(Customer{ID: c.CustomerID, Name: c.CustomerName, Email: c.CustomerEmail}); err != nil {
				return nil, err
			}
		}
		return []Event{AccountOpened(c)}, nil
	case DepositMoney:
		if err := ValidateAmount(c.Amount); err != nil {
			return nil, err
		}
		if !a.Open {
			return nil, NotFound(c.AccountID)
		}
		if a.Balance > MaxBalance-c.Amount {
			return nil, errorf(CodeBalanceLimit, "depositing %d would raise the balance of account %q above %d; deposit less", c.Amount, c.AccountID, MaxBalance)
		}
		return []Event{MoneyDeposited(c)}, nil
	case WithdrawMoney:
		if err := ValidateAmount(c.Amount); err != nil {
			return nil, err
		}
		if !a.Open {
			return nil, NotFound(c.AccountID)
		}
		if a.Balance < c.Amount {
			return nil, errorf(CodeInsufficientFunds, "account %q has %d, not enough to withdraw %d; withdraw at most the balance", c.AccountID, a.Balance, c.Amount)
		}
		return []Event{MoneyWithdrawn(c)}, nil
	}
	return nil, errorf(CodeInvalidRequest, "unknown account command %T", cmd)
}

// Evolve applies one event to the account's state and returns the new state.
// Events that do not concern the account (another account's ID) leave it
// unchanged; the zero Account adopts the ID of the first AccountOpened. It is
// pure.
func Evolve(a Account, e Event) Account {
	switch e := e.(type) {
	case AccountOpened:
		if a.ID == "" || a.ID == e.AccountID {
			a.ID = e.AccountID
			a.Open = true
			if e.CustomerID != "" {
				a.Customer = &Customer{ID: e.CustomerID, Name: e.CustomerName, Email: e.CustomerEmail}
			}
		}
	case MoneyDeposited:
		if e.AccountID == a.ID {
			a.Balance += e.Amount
		}
	case MoneyWithdrawn:
		if e.AccountID == a.ID {
			a.Balance -= e.Amount
		}
	case MoneyTransferred:
		if e.From == a.ID {
			a.Balance -= e.Amount
		}
		if e.To == a.ID {
			a.Balance += e.Amount
		}
	}
	return a
}

// Fold applies events in order to the zero Account.
func Fold(events []Event) Account {
	var a Account
	for _, e := range events {
		a = Evolve(a, e)
	}
	return a
}

// Transfer asks to move Amount from account From to account To. TransferID
// names the transfer; it is stored in the event's data.
type Transfer struct {
	TransferID string
	From       string
	To         string
	Amount     int64
}

// Validate checks the IDs and the amount, and that From and To differ. Errors
// have code invalid_request, invalid_amount or same_account.
func (t Transfer) Validate() error {
	if err := ValidateAccountID(t.From); err != nil {
		return errorf(CodeInvalidRequest, "from: %s", err.Error())
	}
	if err := ValidateAccountID(t.To); err != nil {
		return errorf(CodeInvalidRequest, "to: %s", err.Error())
	}
	if err := ValidateAmount(t.Amount); err != nil {
		return err
	}
	if t.From == t.To {
		return errorf(CodeSameAccount, "cannot transfer from account %q to itself; give two different accounts", t.From)
	}
	if t.TransferID == "" {
		return errorf(CodeInvalidRequest, "transfer ID is empty")
	}
	return nil
}

// TransferState is the state a transfer decides from: both accounts, built by
// folding the events of both account streams (in journal order) with
// TransferState.Evolve.
type TransferState struct {
	From Account
	To   Account
}

// NewTransferState returns the initial state of transfer t: both accounts not
// open, with their IDs set.
func NewTransferState(t Transfer) TransferState {
	return TransferState{From: Account{ID: t.From}, To: Account{ID: t.To}}
}

// Evolve applies an event of either account to the state.
func (s TransferState) Evolve(e Event) TransferState {
	s.From = Evolve(s.From, e)
	s.To = Evolve(s.To, e)
	return s
}

// DecideTransfer decides transfer t from state s: both accounts must be open,
// From must hold at least Amount, and To must stay within MaxBalance. It
// returns one MoneyTransferred event or a domain error. It is pure.
func DecideTransfer(s TransferState, t Transfer) ([]Event, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if s.From.ID != t.From || s.To.ID != t.To {
		return nil, errorf(CodeInvalidRequest, "transfer %s decided from the state of accounts %q and %q", t.TransferID, s.From.ID, s.To.ID)
	}
	if !s.From.Open {
		return nil, NotFound(t.From)
	}
	if !s.To.Open {
		return nil, NotFound(t.To)
	}
	if s.From.Balance < t.Amount {
		return nil, errorf(CodeInsufficientFunds, "account %q has %d, not enough to transfer %d; transfer at most the balance", t.From, s.From.Balance, t.Amount)
	}
	if s.To.Balance > MaxBalance-t.Amount {
		return nil, errorf(CodeBalanceLimit, "transferring %d would raise the balance of account %q above %d; transfer less", t.Amount, t.To, MaxBalance)
	}
	return []Event{MoneyTransferred{TransferID: t.TransferID, From: t.From, To: t.To, Amount: t.Amount}}, nil
}

// String renders the account for logs and test failures.
func (a Account) String() string {
	return fmt.Sprintf("account %q (open=%t, balance=%d)", a.ID, a.Open, a.Balance)
}
