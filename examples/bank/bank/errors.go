package bank

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code. The HTTP API returns it in the
// "code" field of every error body; clients branch on it, never on the text.
type Code string

// The domain's error codes.
const (
	// CodeInvalidRequest: the request is malformed (bad JSON, unknown field,
	// invalid account ID, bad query parameter, ...). HTTP 400.
	CodeInvalidRequest Code = "invalid_request"
	// CodeInvalidAmount: the amount is missing, not an integer, or outside
	// [MinAmount, MaxAmount]. HTTP 400.
	CodeInvalidAmount Code = "invalid_amount"
	// CodeSameAccount: a transfer names one account as both source and
	// destination. HTTP 400.
	CodeSameAccount Code = "same_account"
	// CodeAccountExists: an account with that ID is already open. HTTP 409.
	CodeAccountExists Code = "account_exists"
	// CodeAccountNotFound: no account with that ID is open. HTTP 404.
	CodeAccountNotFound Code = "account_not_found"
	// CodeInsufficientFunds: the balance is smaller than the amount to take
	// out. HTTP 409.
	CodeInsufficientFunds Code = "insufficient_funds"
	// CodeBalanceLimit: the credit would raise a balance above MaxBalance.
	// HTTP 409.
	CodeBalanceLimit Code = "balance_limit"
	// CodeCustomerNotFound: no account was ever opened for that customer.
	// HTTP 404.
	CodeCustomerNotFound Code = "customer_not_found"
	// CodeCustomerErased: the customer was erased; no personal data can be
	// stored for it again: use a new customer ID. HTTP 409.
	CodeCustomerErased Code = "customer_erased"
)

// Error is a domain error: a stable Code and a message for humans that says
// what was wrong and what to do. Two Errors match with errors.Is when their
// codes are equal, so errors.Is(err, ErrInsufficientFunds) holds for every
// insufficient-funds error whatever its message.
type Error struct {
	Code    Code
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per code. Returned errors carry a specific
// message and match these by code.
var (
	ErrInvalidRequest    = &Error{Code: CodeInvalidRequest, Message: "invalid request"}
	ErrInvalidAmount     = &Error{Code: CodeInvalidAmount, Message: "invalid amount"}
	ErrSameAccount       = &Error{Code: CodeSameAccount, Message: "transfer to the same account"}
	ErrAccountExists     = &Error{Code: CodeAccountExists, Message: "account already exists"}
	ErrAccountNotFound   = &Error{Code: CodeAccountNotFound, Message: "account not found"}
	ErrInsufficientFunds = &Error{Code: CodeInsufficientFunds, Message: "insufficient funds"}
	ErrBalanceLimit      = &Error{Code: CodeBalanceLimit, Message: "balance limit exceeded"}
)

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the domain error in err's chain, or "" when err
// is not (or does not wrap) a domain error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// NotFound returns the error for an account that is not open.
func NotFound(id string) error {
	return errorf(CodeAccountNotFound, "account %q does not exist; create it first with POST /accounts", id)
}
