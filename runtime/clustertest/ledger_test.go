package clustertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/runtime"
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
			switch e := ev.(type) {
			case Deposited:
				s.Balance += e.Amount
			case Withdrawn:
				s.Balance -= e.Amount
			}
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
	return runtime.RegisterAggregate(rt, ledger())
}

func ledgerCommands() []runtime.CommandType {
	return []runtime.CommandType{
		runtime.ClusterCommand[Deposit]("ledger.Deposit"),
		runtime.ClusterCommand[Withdraw]("ledger.Withdraw"),
		runtime.ClusterCommand[Slow]("ledger.Slow"),
	}
}

func ledgerErrors() []runtime.ErrorCode {
	return []runtime.ErrorCode{{Code: "ledger.insufficient_funds", Err: errInsufficient}}
}
