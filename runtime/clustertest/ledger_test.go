package clustertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
)

// The ledger aggregate: an account balance moved by deposits and withdrawals.

type Deposit struct {
	Amount int64 `json:"amount"`
}

type Withdraw struct {
	Amount int64 `json:"amount"`
}

// Slow decides after Millis milliseconds, then fails with errInsufficient
// when Fail is set (a domain error decided close to the caller's deadline).
type Slow struct {
	Millis int  `json:"millis"`
	Fail   bool `json:"fail"`
}

type Deposited struct {
	Amount int64 `json:"amount"`
}

type Withdrawn struct {
	Amount int64 `json:"amount"`
}

// TransferredOut and TransferredIn are the events of a transfer, a DCB
// command across two account tags.
type TransferredOut struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

type TransferredIn struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

func (e TransferredOut) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("account", e.Account)}
}
func (e TransferredIn) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("account", e.Account)}
}

// Transfer moves Amount from one account to another.
type Transfer struct {
	From, To string
	Amount   int64
}

// transferState is the two balances a transfer decides from.
type transferState struct{ from, to int64 }

func transferDCB() runtime.DCB[Transfer, transferState] {
	types := []string{"Deposited", "Withdrawn", "TransferredOut", "TransferredIn"}
	return runtime.DCB[Transfer, transferState]{
		Name: "transfer",
		Query: func(c Transfer) journal.Query {
			return journal.Query{Items: []journal.QueryItem{
				{Types: types, Tags: []journal.Tag{journal.NewTag("account", c.From)}},
				{Types: types, Tags: []journal.Tag{journal.NewTag("account", c.To)}},
			}}
		},
		Evolve: func(c Transfer, s transferState, ev runtime.DCBEvent) transferState {
			d := amountOf(ev.Value)
			if ev.Record.HasTag(journal.NewTag("account", c.From)) {
				s.from += d
			}
			if ev.Record.HasTag(journal.NewTag("account", c.To)) {
				s.to += d
			}
			return s
		},
		FromStates: func(c Transfer, states map[journal.Tag]any) (transferState, bool) {
			from, ok1 := states[journal.NewTag("account", c.From)].(Account)
			to, ok2 := states[journal.NewTag("account", c.To)].(Account)
			return transferState{from: from.Balance, to: to.Balance}, ok1 && ok2
		},
		Decide: func(c Transfer, s transferState) ([]any, error) {
			if c.Amount > s.from {
				return nil, fmt.Errorf("%w: balance %d, transfer %d", errInsufficient, s.from, c.Amount)
			}
			return []any{TransferredOut{Account: c.From, Amount: c.Amount}, TransferredIn{Account: c.To, Amount: c.Amount}}, nil
		},
	}
}

// amountOf is an event's effect on its account's balance.
func amountOf(ev any) int64 {
	switch e := ev.(type) {
	case Deposited:
		return e.Amount
	case Withdrawn:
		return -e.Amount
	case TransferredOut:
		return -e.Amount
	case TransferredIn:
		return e.Amount
	}
	return 0
}

type Account struct {
	Balance int64 `json:"balance"`
}

var errInsufficient = errors.New("ledger: insufficient funds")

func ledger() runtime.Aggregate[Account] {
	return runtime.Aggregate[Account]{
		Name:    "account",
		Initial: func() Account { return Account{} },
		Decide: func(s Account, cmd any) ([]any, error) {
			switch c := cmd.(type) {
			case Deposit:
				if c.Amount <= 0 {
					return nil, fmt.Errorf("ledger: deposit of %d: amounts are positive", c.Amount)
				}
				return []any{Deposited(c)}, nil
			case Withdraw:
				if c.Amount > s.Balance {
					return nil, fmt.Errorf("%w: balance %d, withdrawal %d", errInsufficient, s.Balance, c.Amount)
				}
				return []any{Withdrawn(c)}, nil
			case Slow:
				time.Sleep(time.Duration(c.Millis) * time.Millisecond) // simulates slow user code
				if c.Fail {
					return nil, fmt.Errorf("%w: slow check failed", errInsufficient)
				}
				return nil, nil
			}
			return nil, fmt.Errorf("ledger: unknown command %T", cmd)
		},
		Evolve: func(s Account, ev any) Account {
			s.Balance += amountOf(ev)
			return s
		},
	}
}

func registerLedger(rt *runtime.Runtime) error {
	if err := runtime.RegisterEvent[Deposited](rt, "Deposited", 1); err != nil {
		return err
	}
	if err := runtime.RegisterEvent[Withdrawn](rt, "Withdrawn", 1); err != nil {
		return err
	}
	if err := runtime.RegisterEvent[TransferredOut](rt, "TransferredOut", 1); err != nil {
		return err
	}
	if err := runtime.RegisterEvent[TransferredIn](rt, "TransferredIn", 1); err != nil {
		return err
	}
	return runtime.RegisterAggregate(rt, ledger())
}

func ledgerCommands() []cluster.CommandType {
	return []cluster.CommandType{
		cluster.Command[Deposit]("ledger.Deposit"),
		cluster.Command[Withdraw]("ledger.Withdraw"),
		cluster.Command[Slow]("ledger.Slow"),
	}
}

func ledgerErrors() []cluster.ErrorCode {
	return []cluster.ErrorCode{{Code: "ledger.insufficient_funds", Err: errInsufficient}}
}
