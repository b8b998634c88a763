package bank_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
)

func TestValidateAccountID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "alice", "Bob_2", "x-y", strings.Repeat("z", 64), "0"} {
		require.NoError(t, bank.ValidateAccountID(id), id)
	}
	for _, id := range []string{"", strings.Repeat("z", 65), "a b", "a/b", "a:b", "é", "a.b", "a\x00"} {
		err := bank.ValidateAccountID(id)
		require.Error(t, err, id)
		require.ErrorIs(t, err, bank.ErrInvalidRequest, id)
		require.Equal(t, bank.CodeInvalidRequest, bank.CodeOf(err))
	}
	// The message names the offending character as the client wrote it, not
	// one byte of it read as a character of its own.
	require.ErrorContains(t, bank.ValidateAccountID("caf\u00e9"), `the character 'é' at byte 3`)
	require.ErrorContains(t, bank.ValidateAccountID("a\xffb"), "the byte 0xFF (not valid UTF-8) at byte 1")
}

func TestParseAmount(t *testing.T) {
	t.Parallel()
	ok := map[string]int64{"1": 1, "100": 100, "1000000000000": bank.MaxAmount}
	for raw, want := range ok {
		got, err := bank.ParseAmount([]byte(raw))
		require.NoError(t, err, raw)
		require.Equal(t, want, got)
	}
	for _, raw := range []string{"", "null", "0", "-1", "-", "1.5", "1e3", "1000000000001", `"100"`, "true", "99999999999999999999999", "1.0"} {
		_, err := bank.ParseAmount([]byte(raw))
		require.Error(t, err, raw)
		require.ErrorIs(t, err, bank.ErrInvalidAmount, raw)
	}
}

func TestErrorsMatchByCode(t *testing.T) {
	t.Parallel()
	err := bank.NotFound("alice")
	require.ErrorIs(t, err, bank.ErrAccountNotFound)
	require.NotErrorIs(t, err, bank.ErrAccountExists)
	require.Contains(t, err.Error(), "alice")
	wrapped := errors.Join(errors.New("context"), err)
	require.Equal(t, bank.CodeAccountNotFound, bank.CodeOf(wrapped))
	require.Equal(t, bank.Code(""), bank.CodeOf(errors.New("plain")))
}

// apply decides cmd against a and, on success, evolves a with the events.
func apply(t *testing.T, a bank.Account, cmd bank.Command) (bank.Account, error) {
	t.Helper()
	events, err := bank.Decide(a, cmd)
	if err != nil {
		require.Nil(t, events)
		return a, err
	}
	for _, e := range events {
		a = bank.Evolve(a, e)
	}
	return a, nil
}

func TestAccountLifecycle(t *testing.T) {
	t.Parallel()
	var a bank.Account
	_, err := apply(t, a, bank.DepositMoney{AccountID: "alice", Amount: 5})
	require.ErrorIs(t, err, bank.ErrAccountNotFound)
	_, err = apply(t, a, bank.WithdrawMoney{AccountID: "alice", Amount: 5})
	require.ErrorIs(t, err, bank.ErrAccountNotFound)

	a, err = apply(t, a, bank.OpenAccount{AccountID: "alice"})
	require.NoError(t, err)
	require.Equal(t, bank.Account{ID: "alice", Open: true}, a)

	_, err = apply(t, a, bank.OpenAccount{AccountID: "alice"})
	require.ErrorIs(t, err, bank.ErrAccountExists)

	a, err = apply(t, a, bank.DepositMoney{AccountID: "alice", Amount: 100})
	require.NoError(t, err)
	require.EqualValues(t, 100, a.Balance)

	_, err = apply(t, a, bank.WithdrawMoney{AccountID: "alice", Amount: 101})
	require.ErrorIs(t, err, bank.ErrInsufficientFunds)
	require.Contains(t, err.Error(), "100")

	a, err = apply(t, a, bank.WithdrawMoney{AccountID: "alice", Amount: 100})
	require.NoError(t, err)
	require.EqualValues(t, 0, a.Balance)

	for _, amount := range []int64{0, -1, bank.MaxAmount + 1} {
		_, err = apply(t, a, bank.DepositMoney{AccountID: "alice", Amount: amount})
		require.ErrorIs(t, err, bank.ErrInvalidAmount)
		_, err = apply(t, a, bank.WithdrawMoney{AccountID: "alice", Amount: amount})
		require.ErrorIs(t, err, bank.ErrInvalidAmount)
	}
	_, err = apply(t, a, bank.DepositMoney{AccountID: "bob", Amount: 1})
	require.ErrorIs(t, err, bank.ErrInvalidRequest, "a command for another account")
	_, err = apply(t, a, bank.OpenAccount{AccountID: "not valid"})
	require.ErrorIs(t, err, bank.ErrInvalidRequest)
}

func TestDepositBalanceLimit(t *testing.T) {
	t.Parallel()
	a := bank.Account{ID: "rich", Open: true, Balance: bank.MaxBalance - 10}
	_, err := apply(t, a, bank.DepositMoney{AccountID: "rich", Amount: 11})
	require.ErrorIs(t, err, bank.ErrBalanceLimit)
	a, err = apply(t, a, bank.DepositMoney{AccountID: "rich", Amount: 10})
	require.NoError(t, err)
	require.Equal(t, bank.MaxBalance, a.Balance)
}

func TestDecideDoesNotMutate(t *testing.T) {
	t.Parallel()
	a := bank.Account{ID: "alice", Open: true, Balance: 10}
	before := a
	_, err := bank.Decide(a, bank.WithdrawMoney{AccountID: "alice", Amount: 3})
	require.NoError(t, err)
	require.Equal(t, before, a)
}

func TestEvolveIgnoresOtherAccounts(t *testing.T) {
	t.Parallel()
	a := bank.Account{ID: "alice", Open: true, Balance: 10}
	require.Equal(t, a, bank.Evolve(a, bank.AccountOpened{AccountID: "bob"}))
	require.Equal(t, a, bank.Evolve(a, bank.MoneyDeposited{AccountID: "bob", Amount: 3}))
	require.Equal(t, a, bank.Evolve(a, bank.MoneyWithdrawn{AccountID: "bob", Amount: 3}))
	require.Equal(t, a, bank.Evolve(a, bank.MoneyTransferred{TransferID: "t", From: "bob", To: "carol", Amount: 3}))
	require.EqualValues(t, 7, bank.Evolve(a, bank.MoneyTransferred{TransferID: "t", From: "alice", To: "bob", Amount: 3}).Balance)
	require.EqualValues(t, 13, bank.Evolve(a, bank.MoneyTransferred{TransferID: "t", From: "bob", To: "alice", Amount: 3}).Balance)
}

func TestTransferDecision(t *testing.T) {
	t.Parallel()
	tr := bank.Transfer{TransferID: "t1", From: "alice", To: "bob", Amount: 25}
	s := bank.NewTransferState(tr)

	_, err := bank.DecideTransfer(s, tr)
	require.ErrorIs(t, err, bank.ErrAccountNotFound)
	require.Contains(t, err.Error(), `"alice"`)

	history := []bank.Event{
		bank.AccountOpened{AccountID: "alice"},
		bank.MoneyDeposited{AccountID: "alice", Amount: 30},
		bank.AccountOpened{AccountID: "carol"}, // not part of this transfer
	}
	for _, e := range history {
		s = s.Evolve(e)
	}
	_, err = bank.DecideTransfer(s, tr)
	require.ErrorIs(t, err, bank.ErrAccountNotFound)
	require.Contains(t, err.Error(), `"bob"`)

	s = s.Evolve(bank.AccountOpened{AccountID: "bob"})
	events, err := bank.DecideTransfer(s, tr)
	require.NoError(t, err)
	require.Equal(t, []bank.Event{bank.MoneyTransferred{TransferID: "t1", From: "alice", To: "bob", Amount: 25}}, events)
	s = s.Evolve(events[0])
	require.EqualValues(t, 5, s.From.Balance)
	require.EqualValues(t, 25, s.To.Balance)

	_, err = bank.DecideTransfer(s, tr)
	require.ErrorIs(t, err, bank.ErrInsufficientFunds)

	same := bank.Transfer{TransferID: "t2", From: "alice", To: "alice", Amount: 1}
	_, err = bank.DecideTransfer(bank.NewTransferState(same), same)
	require.ErrorIs(t, err, bank.ErrSameAccount)

	bad := bank.Transfer{TransferID: "t3", From: "alice", To: "bob", Amount: 0}
	_, err = bank.DecideTransfer(s, bad)
	require.ErrorIs(t, err, bank.ErrInvalidAmount)

	badID := bank.Transfer{TransferID: "t4", From: "al ice", To: "bob", Amount: 1}
	require.ErrorIs(t, badID.Validate(), bank.ErrInvalidRequest)
	require.Contains(t, badID.Validate().Error(), "from")

	full := bank.TransferState{From: bank.Account{ID: "alice", Open: true, Balance: 5}, To: bank.Account{ID: "bob", Open: true, Balance: bank.MaxBalance}}
	_, err = bank.DecideTransfer(full, bank.Transfer{TransferID: "t5", From: "alice", To: "bob", Amount: 1})
	require.ErrorIs(t, err, bank.ErrBalanceLimit)

	_, err = bank.DecideTransfer(s, bank.Transfer{TransferID: "t6", From: "bob", To: "alice", Amount: 1})
	require.ErrorIs(t, err, bank.ErrInvalidRequest, "state built for another pair")
}

func TestTagsAndCodec(t *testing.T) {
	t.Parallel()
	events := []bank.Event{
		bank.AccountOpened{AccountID: "alice"},
		bank.MoneyDeposited{AccountID: "alice", Amount: 7},
		bank.MoneyWithdrawn{AccountID: "alice", Amount: 2},
		bank.MoneyTransferred{TransferID: "t1", From: "alice", To: "bob", Amount: 3},
	}
	for _, e := range events {
		data, err := json.Marshal(e)
		require.NoError(t, err)
		back, err := bank.DecodeEvent(e.EventType(), data)
		require.NoError(t, err)
		require.Equal(t, e, back)
		require.Contains(t, e.Tags(), bank.AccountTag("alice"))
	}
	require.Equal(t, []journal.Tag{"account:alice", "account:bob"}, events[3].Tags())
	require.ElementsMatch(t, bank.EventTypes, []string{events[0].EventType(), events[1].EventType(), events[2].EventType(), events[3].EventType()})

	_, err := bank.DecodeEvent("Nope", []byte(`{}`))
	require.ErrorContains(t, err, "unknown event type")
	_, err = bank.DecodeEvent(bank.TypeMoneyDeposited, []byte(`{"accountId":"a","amount":1,"extra":1}`))
	require.Error(t, err)
	_, err = bank.DecodeEvent(bank.TypeMoneyDeposited, []byte(`[]`))
	require.Error(t, err)
}

// TestRandomHistoryInvariants drives random commands and transfers over a few
// accounts through the pure functions and checks that money is conserved
// (deposits - withdrawals), no balance is ever negative, and each account's
// state equals the fold of its own events.
func TestRandomHistoryInvariants(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "c", "d"}
	state := map[string]bank.Account{}
	streams := map[string][]bank.Event{}
	var deposited, withdrawn int64
	record := func(events []bank.Event) {
		for _, e := range events {
			for _, id := range ids {
				if containsTag(e.Tags(), bank.AccountTag(id)) {
					streams[id] = append(streams[id], e)
					state[id] = bank.Evolve(state[id], e)
				}
			}
		}
	}
	for _, id := range ids {
		events, err := bank.Decide(state[id], bank.OpenAccount{AccountID: id})
		require.NoError(t, err)
		record(events)
	}
	var rejected int
	for i := range 2000 {
		id := ids[rng.IntN(len(ids))]
		amount := rng.Int64N(100) + 1
		var events []bank.Event
		var err error
		switch rng.IntN(4) {
		case 0:
			events, err = bank.Decide(state[id], bank.DepositMoney{AccountID: id, Amount: amount})
			if err == nil {
				deposited += amount
			}
		case 1:
			events, err = bank.Decide(state[id], bank.WithdrawMoney{AccountID: id, Amount: amount})
			if err == nil {
				withdrawn += amount
			}
		default:
			to := ids[rng.IntN(len(ids))]
			tr := bank.Transfer{TransferID: strconv.Itoa(i), From: id, To: to, Amount: amount}
			s := bank.NewTransferState(tr)
			// Build the DCB state from both streams in journal order.
			for _, e := range mergeStreams(streams[id], streams[to]) {
				s = s.Evolve(e)
			}
			events, err = bank.DecideTransfer(s, tr)
		}
		if err != nil {
			rejected++
			code := bank.CodeOf(err)
			require.Contains(t, []bank.Code{bank.CodeInsufficientFunds, bank.CodeSameAccount}, code, err.Error())
			continue
		}
		record(events)
		for _, id := range ids {
			require.GreaterOrEqual(t, state[id].Balance, int64(0))
		}
	}
	require.Positive(t, rejected)
	var total int64
	for _, id := range ids {
		require.Equal(t, state[id], bank.Fold(streams[id]), id)
		total += state[id].Balance
	}
	require.Equal(t, deposited-withdrawn, total)
}

func containsTag(tags []journal.Tag, tag journal.Tag) bool {
	for _, t := range tags {
		if t == tag {
			return true
		}
	}
	return false
}

// mergeStreams returns the events of two streams without duplicates (a
// transfer between them appears in both; transfer IDs are unique). Order
// within each stream is kept; for the fold of the transfer state only each
// account's own order matters.
func mergeStreams(a, b []bank.Event) []bank.Event {
	out := append([]bank.Event(nil), a...)
	seen := map[string]bool{}
	for _, e := range a {
		if tr, ok := e.(bank.MoneyTransferred); ok {
			seen[tr.TransferID] = true
		}
	}
	for _, e := range b {
		if tr, ok := e.(bank.MoneyTransferred); ok && seen[tr.TransferID] {
			continue
		}
		out = append(out, e)
	}
	return out
}
