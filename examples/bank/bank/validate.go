package bank

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of account IDs and amounts.
const (
	// MaxIDLength is the longest account ID, in bytes.
	MaxIDLength = 64
	// MinAmount and MaxAmount bound a single deposit, withdrawal or transfer,
	// in minor units.
	MinAmount int64 = 1
	MaxAmount int64 = 1_000_000_000_000
	// MaxBalance is the largest balance an account can hold.
	MaxBalance int64 = math.MaxInt64
)

// MaxCustomerFieldLength bounds a customer's name and email, in bytes.
const MaxCustomerFieldLength = 256

// ValidateCustomer checks a customer: its ID is 1 to MaxIDLength characters
// of [A-Za-z0-9_-] (like an account ID), its name and email at most
// MaxCustomerFieldLength bytes of UTF-8 each. The error has code
// invalid_request and never repeats the name or email (personal data).
func ValidateCustomer(c Customer) error {
	if err := ValidateAccountID(c.ID); err != nil {
		var be *Error
		if errors.As(err, &be) {
			return errorf(CodeInvalidRequest, "customer %s", strings.Replace(be.Message, "account ID", "ID", 1))
		}
		return err
	}
	for _, f := range []struct{ name, v string }{{"name", c.Name}, {"email", c.Email}} {
		if len(f.v) > MaxCustomerFieldLength {
			return errorf(CodeInvalidRequest, "customer %s is %d bytes long; use at most %d bytes", f.name, len(f.v), MaxCustomerFieldLength)
		}
		if !utf8.ValidString(f.v) {
			return errorf(CodeInvalidRequest, "customer %s is not valid UTF-8", f.name)
		}
	}
	return nil
}

// ValidateAccountID checks that id is 1 to MaxIDLength characters of
// [A-Za-z0-9_-]. The error has code invalid_request.
func ValidateAccountID(id string) error {
	if id == "" {
		return errorf(CodeInvalidRequest, "account ID is empty; use 1 to %d characters of A-Z, a-z, 0-9, '_' and '-'", MaxIDLength)
	}
	if len(id) > MaxIDLength {
		return errorf(CodeInvalidRequest, "account ID is %d characters long; use at most %d characters of A-Z, a-z, 0-9, '_' and '-'", len(id), MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return errorf(CodeInvalidRequest, "account ID %s contains %s at byte %d; use only A-Z, a-z, 0-9, '_' and '-'", strconv.Quote(id), describeChar(id[i:]), i)
		}
	}
	return nil
}

// describeChar names the character s starts with: the quoted character when
// s starts with valid UTF-8, otherwise the byte in hex (a lone byte of a
// multi-byte character is not a character of its own).
func describeChar(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("the byte 0x%02X (not valid UTF-8)", s[0])
	}
	return "the character " + strconv.QuoteRune(r)
}

// ValidateAmount checks that amount is in [MinAmount, MaxAmount]. The error
// has code invalid_amount.
func ValidateAmount(amount int64) error {
	if amount < MinAmount || amount > MaxAmount {
		return errorf(CodeInvalidAmount, "amount %d is out of range; give an integer number of minor units (cents) from %d to %d", amount, MinAmount, MaxAmount)
	}
	return nil
}

// ParseAmount reads an amount from its JSON text: an integer literal (no
// fraction, no exponent, not quoted) in [MinAmount, MaxAmount]. Empty text
// (the field was absent) and null are rejected. The error has code
// invalid_amount.
func ParseAmount(raw []byte) (int64, error) {
	s := string(raw)
	if s == "" || s == "null" {
		return 0, errorf(CodeInvalidAmount, "amount is missing; give an integer number of minor units (cents) from %d to %d", MinAmount, MaxAmount)
	}
	digits := s
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, errorf(CodeInvalidAmount, "amount %s is not an integer; give a JSON integer of minor units (cents), e.g. 100 for 1.00", s)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, errorf(CodeInvalidAmount, "amount %s is not an integer; give a JSON integer of minor units (cents), e.g. 100 for 1.00", truncate(s, 40))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errorf(CodeInvalidAmount, "amount %s is out of range; give an integer number of minor units (cents) from %d to %d", truncate(s, 40), MinAmount, MaxAmount)
	}
	if err := ValidateAmount(n); err != nil {
		return 0, err
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
