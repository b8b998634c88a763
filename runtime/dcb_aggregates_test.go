package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
)

// walletTransferDCB is the wallet transfer over the wallets' own aggregate
// states: no fold of its own, no map, no type assertion.
func walletTransferDCB(wallets runtime.AggregateState[Wallet]) runtime.DCB[Transfer, runtime.DCBStates] {
	return runtime.DCB[Transfer, runtime.DCBStates]{
		Name:  "TransferUsingWallets",
		Uses:  []runtime.AggregateUse{wallets},
		Query: func(c Transfer) journal.Query { return journal.Query{Items: wallets.Items(c.From, c.To)} },
		Decide: func(c Transfer, s runtime.DCBStates) ([]any, error) {
			from, fromExists := wallets.Lookup(s, c.From)
			_, toExists := wallets.Lookup(s, c.To)
			if !fromExists || !toExists {
				return nil, fmt.Errorf("transfer %s→%s: %w", c.From, c.To, errWalletClosed)
			}
			if from.Balance < c.Amount {
				return nil, fmt.Errorf("transfer %d from %s (balance %d): %w", c.Amount, c.From, from.Balance, errNoFunds)
			}
			return []any{WalletTransferred{From: c.From, To: c.To, Amount: c.Amount}}, nil
		},
	}
}

func usesWallets(t *testing.T, a *dcbApp) (runtime.AggregateState[Wallet], *runtime.DCBCommand[Transfer, runtime.DCBStates]) {
	t.Helper()
	wallets, err := runtime.Uses[Wallet](a.rt, "wallet")
	require.NoError(t, err)
	cmd, err := runtime.RegisterDCB(a.rt, walletTransferDCB(wallets))
	require.NoError(t, err)
	return wallets, cmd
}

// A DCB command with Uses decides from the states the wallets' aggregate
// folds (the same states State reads), interleaved with aggregate commands
// on the same streams, and its result holds both states after the transfer.
func TestDCBUsesAggregateStates(t *testing.T) {
	t.Parallel()
	a := startDCB(t, memoryEnv())
	ctx := context.Background()
	a.openWallets(t, 3, 100)
	wallets, transfer := usesWallets(t, a)

	res, err := transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 30})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, Wallet{ID: "0", Balance: 70}, wallets.Of(res.States, "0"))
	require.Equal(t, Wallet{ID: "1", Balance: 130}, wallets.Of(res.States, "1"))
	require.EqualValues(t, 3, wallets.Version(res.States, "0"), "opened, credited, then the transfer")
	_, ok := wallets.Lookup(res.States, "2")
	require.False(t, ok, "the result holds the reserved streams only")

	// An aggregate command between two transfers is seen by the next one.
	_, err = a.rt.Execute(ctx, wallet("0"), DebitWallet{Amount: 60})
	require.NoError(t, err)
	_, err = transfer.Execute(ctx, Transfer{From: "0", To: "2", Amount: 20})
	require.ErrorIs(t, err, errNoFunds, "wallet 0 holds 10 after the debit")
	require.ErrorContains(t, err, "balance 10")
	_, err = transfer.Execute(ctx, Transfer{From: "0", To: "missing", Amount: 1})
	require.ErrorIs(t, err, errWalletClosed, "a stream without events does not exist (Lookup)")

	// Concurrent transfers in both directions: the states stay the folds.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			from, to := fmt.Sprint(1+i%2), fmt.Sprint(2-i%2)
			if _, err := transfer.Execute(ctx, Transfer{From: from, To: to, Amount: 1}); err != nil {
				t.Errorf("transfer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	res, err = transfer.Execute(ctx, Transfer{From: "1", To: "2", Amount: 5})
	require.NoError(t, err)
	for _, id := range []string{"1", "2"} {
		st, err := runtime.State[Wallet](ctx, a.rt, wallet(id))
		require.NoError(t, err)
		require.Equal(t, st.State, wallets.Of(res.States, id), "the result's state of wallet %s is the aggregate's", id)
		require.Equal(t, a.foldWallet(t, id), st.State)
		require.Equal(t, st.Version, res.Records[0].Version(walletTag(id)))
	}
	require.Equal(t, int64(230), wallets.Of(res.States, "1").Balance+wallets.Of(res.States, "2").Balance, "money is conserved")
	require.Zero(t, a.conflicts(t))
}

// The states are the aggregate's fold from its newest snapshot, as the
// stream's actor and State recover it: a snapshot planted at the stream's
// version is what a fresh runtime's transfer decides from. The actor
// recovered from a snapshot at its head still reports the stream's last
// position, where the transfer's append condition starts (it reported none,
// and every command deciding from states conflicted after a restart).
func TestDCBUsesSnapshots(t *testing.T) {
	t.Parallel()
	e := memoryEnv()
	ctx := context.Background()
	first := startDCB(t, e)
	first.openWallets(t, 2, 10)
	require.NoError(t, first.rt.Shutdown(ctx))

	// Wallet 0 is at version 2 (opened, credited 10); its snapshot says 500.
	state, err := runtime.SnapshotState(nil, Wallet{ID: "0", Balance: 500})
	require.NoError(t, err)
	require.NoError(t, e.snaps.Save(ctx, snapshots.Snapshot{Stream: journal.Stream(walletTag("0")), Version: 2, SchemaVersion: 1, State: state}))

	a := startDCB(t, e)
	wallets, transfer := usesWallets(t, a)
	st, err := runtime.State[Wallet](ctx, a.rt, wallet("0"))
	require.NoError(t, err)
	require.Equal(t, int64(500), st.State.Balance, "State folds from the snapshot")
	res, err := transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 200})
	require.NoError(t, err, "the transfer decides from the snapshot's 500, not the events' 10")
	require.Equal(t, int64(300), wallets.Of(res.States, "0").Balance)
	require.Equal(t, int64(210), wallets.Of(res.States, "1").Balance)

	// The raw form's FromStates decides from the same actors' states.
	_, err = a.transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 300})
	require.NoError(t, err)
	require.Zero(t, a.conflicts(t))
}

// A repeat of an idempotency key decides nothing, so its result has no
// states; Of on a stream the command did not reserve fails the command
// with ErrPanic naming the stream and writes nothing.
func TestDCBUsesDuplicateAndUnreserved(t *testing.T) {
	t.Parallel()
	a := startDCB(t, memoryEnv())
	ctx := context.Background()
	a.openWallets(t, 3, 10)
	wallets, transfer := usesWallets(t, a)

	res, err := transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 1}, runtime.WithIdempotencyKey("k"))
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.Equal(t, int64(9), wallets.Of(res.States, "0").Balance)
	res, err = transfer.Execute(ctx, Transfer{From: "0", To: "1", Amount: 1}, runtime.WithIdempotencyKey("k"))
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	_, ok := wallets.Lookup(res.States, "0")
	require.False(t, ok, "a duplicate decided nothing: no states")

	def := walletTransferDCB(wallets)
	def.Name = "ReadsUnreserved"
	def.Decide = func(c Transfer, s runtime.DCBStates) ([]any, error) {
		_ = wallets.Of(s, "2")
		return []any{WalletTransferred{From: c.From, To: c.To, Amount: c.Amount}}, nil
	}
	bad, err := runtime.RegisterDCB(a.rt, def)
	require.NoError(t, err)
	_, err = bad.Execute(ctx, Transfer{From: "0", To: "1", Amount: 1})
	require.ErrorIs(t, err, runtime.ErrPanic)
	require.ErrorContains(t, err, "wallet:2")
	n, err := a.rt.TagEventCount(ctx, journal.Stream(walletTag("0")))
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "opened, credited, one transfer: nothing more")
}

// Uses and definitions with Uses are checked at registration, each error
// saying what to do.
func TestDCBUsesRegistration(t *testing.T) {
	t.Parallel()
	a := startDCB(t, memoryEnv())
	other := startDCB(t, memoryEnv())

	_, err := runtime.Uses[Wallet](a.rt, "purse")
	require.ErrorIs(t, err, runtime.ErrRegistration)
	require.ErrorContains(t, err, `no aggregate "purse"`)
	_, err = runtime.Uses[CounterState](a.rt, "wallet")
	require.ErrorIs(t, err, runtime.ErrRegistration)
	require.ErrorContains(t, err, "runtime_test.Wallet", "the error names the aggregate's state type")

	wallets, err := runtime.Uses[Wallet](a.rt, "wallet")
	require.NoError(t, err)
	require.Equal(t, journal.Tag("wallet:7"), wallets.Tag("7"))
	foreign, err := runtime.Uses[Wallet](other.rt, "wallet")
	require.NoError(t, err)

	base := walletTransferDCB(wallets)
	cases := map[string]struct {
		mutate func(d *runtime.DCB[Transfer, runtime.DCBStates])
		want   string
	}{
		"evolve set": {func(d *runtime.DCB[Transfer, runtime.DCBStates]) {
			d.Evolve = func(_ Transfer, s runtime.DCBStates, _ runtime.DCBEvent) runtime.DCBStates { return s }
		}, "leave Initial, Evolve and FromStates nil"},
		"zero handle": {func(d *runtime.DCB[Transfer, runtime.DCBStates]) {
			d.Uses = []runtime.AggregateUse{runtime.AggregateState[Wallet]{}}
		}, "zero AggregateState"},
		"other runtime": {func(d *runtime.DCB[Transfer, runtime.DCBStates]) { d.Uses = []runtime.AggregateUse{foreign} }, "another runtime"},
		"listed twice":  {func(d *runtime.DCB[Transfer, runtime.DCBStates]) { d.Uses = []runtime.AggregateUse{wallets, wallets} }, "twice"},
		"typed query item": {func(d *runtime.DCB[Transfer, runtime.DCBStates]) {
			d.Query = func(c Transfer) journal.Query {
				return journal.Query{Items: []journal.QueryItem{{Types: []string{"WalletOpened"}, Tags: []journal.Tag{walletTag(c.From)}}}}
			}
		}, "no types"},
		"foreign group": {func(d *runtime.DCB[Transfer, runtime.DCBStates]) {
			d.Query = func(c Transfer) journal.Query {
				return journal.Query{Items: append(wallets.Items(c.From), journal.QueryItem{Tags: []journal.Tag{journal.NewTag("course", c.To)}})}
			}
		}, `group "course"`},
		"no query": {func(d *runtime.DCB[Transfer, runtime.DCBStates]) { d.Query = nil }, "Query and Decide"},
	}
	for name, c := range cases {
		d := base
		c.mutate(&d)
		_, err := runtime.RegisterDCB(a.rt, d)
		require.ErrorIs(t, err, runtime.ErrRegistration, name)
		require.ErrorContains(t, err, c.want, name)
	}

	_, err = runtime.RegisterDCB(a.rt, runtime.DCB[Transfer, Wallet]{
		Name:   "WrongState",
		Uses:   []runtime.AggregateUse{wallets},
		Query:  func(c Transfer) journal.Query { return journal.Query{Items: wallets.Items(c.From)} },
		Decide: func(Transfer, Wallet) ([]any, error) { return nil, nil },
	})
	require.ErrorIs(t, err, runtime.ErrRegistration)
	require.ErrorContains(t, err, "must be runtime.DCBStates")

	// A query whose shape depends on the command is checked at Execute.
	late := base
	late.Name = "LateForeignGroup"
	late.Query = func(c Transfer) journal.Query {
		if c.Amount == 0 {
			return journal.Query{Items: wallets.Items(c.From, c.To)}
		}
		return journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{journal.NewTag("course", c.To)}}}}
	}
	cmd, err := runtime.RegisterDCB(a.rt, late)
	require.NoError(t, err)
	_, err = cmd.Execute(context.Background(), Transfer{From: "0", To: "1", Amount: 1})
	require.ErrorIs(t, err, runtime.ErrInvalidCommand)
	require.ErrorContains(t, err, `group "course"`)
}

// Every event type a DCB query names must be registered: a misspelt type is
// an error naming it, at registration, and at Execute for a query whose
// types depend on the command; never a query that silently matches nothing.
func TestDCBQueryTypesRegistered(t *testing.T) {
	t.Parallel()
	a := startDCB(t, memoryEnv())
	typo := defineCourseDCB
	typo.Name = "DefineCourseTypo"
	typo.Query = func(c DefineCourse) journal.Query {
		return journal.Query{Items: []journal.QueryItem{{Types: []string{"CourseDefnied"}, Tags: []journal.Tag{journal.NewTag("course", c.Course)}}}}
	}
	_, err := runtime.RegisterDCB(a.rt, typo)
	require.ErrorIs(t, err, runtime.ErrRegistration)
	require.ErrorContains(t, err, `"CourseDefnied"`)
	require.ErrorContains(t, err, "not registered")

	late := defineCourseDCB
	late.Name = "DefineCourseLateTypo"
	late.Query = func(c DefineCourse) journal.Query {
		typ := "CourseDefined"
		if c.Seats > 0 {
			typ = "CourseDefnied"
		}
		return journal.Query{Items: []journal.QueryItem{{Types: []string{typ}, Tags: []journal.Tag{journal.NewTag("course", c.Course)}}}}
	}
	cmd, err := runtime.RegisterDCB(a.rt, late)
	require.NoError(t, err, "the zero command's query names registered types only")
	_, err = cmd.Execute(context.Background(), DefineCourse{Course: "go", Seats: 3})
	require.ErrorIs(t, err, runtime.ErrInvalidCommand)
	require.ErrorIs(t, err, runtime.ErrUnknownEvent)
	require.ErrorContains(t, err, `"CourseDefnied"`)
	n, err := a.rt.TagEventCount(context.Background(), journal.Stream(journal.NewTag("course", "go")))
	require.NoError(t, err)
	require.Zero(t, n, "nothing was written")

	// A Query that panics on the zero command is checked at Execute only.
	panicky := defineCourseDCB
	panicky.Name = "DefineCourseIndexes"
	panicky.Query = func(c DefineCourse) journal.Query {
		if c.Course == "" {
			panic("a course is required")
		}
		return journal.Query{Items: []journal.QueryItem{{Types: []string{"CourseDefined"}, Tags: []journal.Tag{journal.NewTag("course", c.Course)}}}}
	}
	cmd, err = runtime.RegisterDCB(a.rt, panicky)
	require.NoError(t, err)
	_, err = cmd.Execute(context.Background(), DefineCourse{Course: "rust", Seats: 3})
	require.NoError(t, err)
}
