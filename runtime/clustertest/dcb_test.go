// Two members in one process: see inprocess_test.go for why this needs a
// race-free build.

//go:build !race

package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

// DCB transfers between accounts hosted by different members, executed on
// both members, mixed with deposits and withdrawals: the tags are reserved
// at their hosting members' actors, so money is conserved, no balance goes
// negative, and each account's state equals the fold of its events.
func TestInProcessDCBAcrossMembers(t *testing.T) {
	j := memory.New()
	rts := startInProcess(t, 2, j)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	transfers := make([]*runtime.DCBCommand[Transfer, transferState], len(rts))
	for i, rt := range rts {
		var err error
		transfers[i], err = runtime.RegisterDCB(rt, transferDCB())
		require.NoError(t, err)
	}
	// Accounts hosted by each member, each opened with 1000.
	a0 := hostedBy(t, ctx, rts[0], rts[1])
	a1 := hostedBy(t, ctx, rts[1], rts[0])
	accounts := []string{a0, a1}
	for len(accounts) < 8 {
		accounts = append(accounts, fmt.Sprintf("extra-%d", len(accounts)))
	}
	for _, a := range accounts {
		_, err := rts[0].Execute(ctx, acct(a), Deposit{Amount: 1000})
		require.NoError(t, err)
	}

	// One transfer from a member-1 account to a member-0 account, executed on member 0.
	before, err := runtime.ExecuteTyped[Account](ctx, rts[1], acct(a1), Withdraw{Amount: 0})
	require.NoError(t, err)
	res, err := transfers[0].Execute(ctx, Transfer{From: a1, To: a0, Amount: 100})
	require.NoError(t, err)
	require.Len(t, res.Records, 2)
	got, err := runtime.ExecuteTyped[Account](ctx, rts[0], acct(a1), Deposit{Amount: 1})
	require.NoError(t, err)
	require.Equal(t, before.State.Balance-100+1, got.State.Balance, "the hosting actor adopted the transfer")
	_, err = transfers[1].Execute(ctx, Transfer{From: a0, To: a1, Amount: 1 << 40})
	require.ErrorIs(t, err, errInsufficient, "a domain error of a DCB decided from remote reservations")

	balances := func() int64 {
		var sum int64
		for _, a := range accounts {
			st, err := runtime.ExecuteTyped[Account](ctx, rts[1], acct(a), Withdraw{Amount: 0})
			require.NoError(t, err)
			sum += st.State.Balance
		}
		return sum
	}
	total := balances()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				from, to := accounts[(w+i)%len(accounts)], accounts[(w+3*i+1)%len(accounts)]
				m := (w + i) % 2
				if from == to {
					_, err := rts[m].Execute(ctx, acct(from), Deposit{Amount: 2})
					require.NoError(t, err)
					mu.Lock()
					total += 2
					mu.Unlock()
					continue
				}
				_, err := transfers[m].Execute(ctx, Transfer{From: from, To: to, Amount: int64(1 + (w*i)%40)})
				if err != nil {
					require.ErrorIs(t, err, errInsufficient)
				}
			}
		}()
	}
	wg.Wait()

	var sum int64
	for _, a := range accounts {
		var folded int64
		var version uint64
		stream := acct(a).Stream()
		for rec, err := range j.ReadStream(ctx, stream, 1, 0) {
			require.NoError(t, err)
			version++
			require.Equal(t, version, rec.Version(stream.Tag))
			var ev struct {
				Amount int64 `json:"amount"`
			}
			require.NoError(t, jsonUnmarshal(rec.Data, &ev))
			switch rec.Type {
			case "Deposited", "TransferredIn":
				folded += ev.Amount
			default:
				folded -= ev.Amount
			}
			require.GreaterOrEqual(t, folded, int64(0))
		}
		st, err := runtime.ExecuteTyped[Account](ctx, rts[1], acct(a), Withdraw{Amount: 0})
		require.NoError(t, err)
		require.Equal(t, folded, st.State.Balance, "account %s: the actor's state equals the fold of its events", a)
		sum += folded
	}
	require.Equal(t, total, sum, "money conserved: transfers move money, only deposits add it")
}
