// Command misuse sends a command of another aggregate to an AggregateOf's
// handle: it must not compile (scribetest's TestTypedCommandsAreCheckedAtCompileTime).
package main

import (
	"context"

	"github.com/scribe-es/scribe/runtime"
)

type Account struct{ Balance int64 }
type AccountCommand interface{ accountCommand() }
type Deposit struct{ Amount int64 }

func (Deposit) accountCommand() {}

type Order struct{ Lines int }
type OrderCommand interface{ orderCommand() }
type AddLine struct{ SKU string }

func (AddLine) orderCommand() {}

func main() {
	var accounts *runtime.Commands[Account, AccountCommand]
	_, _ = accounts.Execute(context.Background(), "42", Deposit{Amount: 1})
	_, _ = accounts.Execute(context.Background(), "42", AddLine{SKU: "x"}) // an order's command
}
