package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// The OCC retry loop's parameters: exponential backoff from 1 ms to 50 ms, at
// most 200 attempts (the loop of a transactional event primitive with OCC).
const (
	occMaxAttempts = 200
	occBackoffMin  = time.Millisecond
	occBackoffMax  = 50 * time.Millisecond
)

// occMode is the OCC loop on a journal. fast selects occ-fast: no backoff and
// state cached between attempts and commands (only the tail is read).
type occMode struct {
	j        journal.Journal
	scenario string
	fast     bool
}

func (m *occMode) newWorker(id int) worker {
	w := &occWorker{
		j:        m.j,
		fast:     m.fast,
		rng:      rand.New(rand.NewPCG(uint64(id)+101, 7)),
		counters: map[int]counterState{},
		accounts: map[journal.Tag]accountCache{},
	}
	if m.scenario == scenarioTransfer {
		return transferWorker{w}
	}
	return w
}

func (m *occMode) close(context.Context) error { return nil }

// accountCache is occ-fast's knowledge of one account: its balance including
// every event of the account up to and including position Through.
type accountCache struct {
	Balance int64
	Through journal.Position
}

// occWorker runs the OCC loop for one writer.
type occWorker struct {
	j        journal.Journal
	fast     bool
	rng      *rand.Rand
	counters map[int]counterState         // occ-fast: per stream
	accounts map[journal.Tag]accountCache // occ-fast: per account
}

// backoff waits before attempt+1: exponential from occBackoffMin, capped at
// occBackoffMax, with jitter in [d/2, d] so that retrying writers spread out.
func (w *occWorker) backoff(ctx context.Context, attempt int) error {
	d := occBackoffMax
	if attempt < 8 {
		d = min(occBackoffMax, occBackoffMin<<(attempt-1))
	}
	d = d/2 + time.Duration(w.rng.Int64N(int64(d/2)+1))
	return sleepCtx(ctx, d)
}

// do deposits 1 into counter stream t.A: read, decide, append with the
// expected version, retry on a version mismatch.
func (w *occWorker) do(ctx context.Context, t target) (outcome, error) {
	tag := counterTag(t.A)
	stream := journal.Stream(tag)
	var st counterState
	if w.fast {
		st = w.counters[t.A]
	}
	for attempt := 1; ; attempt++ {
		for r, err := range w.j.ReadStream(ctx, stream, st.Version+1, 0) {
			if err != nil {
				return outcome{}, fmt.Errorf("read %s: %w", stream, err)
			}
			if st, err = foldCounter(st, r); err != nil {
				return outcome{}, err
			}
		}
		ev, err := decideDeposit(st, deposit{Amount: 1})
		if err != nil {
			return outcome{}, err
		}
		e, err := depositEvent(tag, ev)
		if err != nil {
			return outcome{}, err
		}
		_, err = w.j.Append(ctx, []journal.Event{e}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: st.Version}})
		if err == nil {
			if w.fast {
				w.counters[t.A] = evolveCounter(st, ev)
			}
			return outcome{Commands: 1, Events: 1, Retries: attempt - 1}, nil
		}
		if !errors.Is(err, journal.ErrVersionMismatch) {
			return outcome{}, fmt.Errorf("append to %s: %w", stream, err)
		}
		if attempt == occMaxAttempts {
			return outcome{}, fmt.Errorf("append to %s: gave up after %d attempts: %w", stream, attempt, err)
		}
		if w.fast {
			continue // keep st: the next attempt reads only the tail
		}
		if err := w.backoff(ctx, attempt); err != nil {
			return outcome{}, err
		}
		st = counterState{} // the naive caller reloads the whole stream
	}
}

// transferWorker runs the DCB OCC loop: read both accounts' events, decide,
// append with an append condition, retry when the condition fails.
type transferWorker struct{ *occWorker }

func (w transferWorker) do(ctx context.Context, t target) (outcome, error) {
	from, to := accountTag(t.A), accountTag(t.B)
	q := transferQuery(from, to)
	for attempt := 1; ; attempt++ {
		st, after, err := w.load(ctx, q, from, to)
		if err != nil {
			return outcome{}, err
		}
		ev, err := decideTransfer(st, transfer{From: from, To: to, Amount: 1})
		if err != nil {
			return outcome{}, err
		}
		e, err := transferEvent(ev)
		if err != nil {
			return outcome{}, err
		}
		res, err := w.j.Append(ctx, []journal.Event{e}, journal.AppendOptions{
			Condition: &journal.AppendCondition{FailIfEventsMatch: q, After: after},
		})
		if err == nil {
			if w.fast {
				st = evolveTransfer(st, ev)
				pos := res.Last()
				w.accounts[from] = accountCache{Balance: st.FromBalance, Through: pos}
				w.accounts[to] = accountCache{Balance: st.ToBalance, Through: pos}
			}
			return outcome{Commands: 1, Events: 1, Retries: attempt - 1}, nil
		}
		if !errors.Is(err, journal.ErrAppendConditionFailed) {
			return outcome{}, fmt.Errorf("append transfer %s→%s: %w", from, to, err)
		}
		if attempt == occMaxAttempts {
			return outcome{}, fmt.Errorf("append transfer %s→%s: gave up after %d attempts: %w", from, to, attempt, err)
		}
		if !w.fast {
			if err := w.backoff(ctx, attempt); err != nil {
				return outcome{}, err
			}
		}
	}
}

// load returns the two accounts' state and the position it is current at. occ
// reads every event of both accounts; occ-fast starts from its cache and reads
// only what follows the older of the two cached positions.
func (w transferWorker) load(ctx context.Context, q journal.Query, from, to journal.Tag) (transferState, journal.Position, error) {
	cf, ct := accountCache{Balance: openingBalance}, accountCache{Balance: openingBalance}
	var start journal.Position
	if w.fast {
		if c, ok := w.accounts[from]; ok {
			cf = c
		}
		if c, ok := w.accounts[to]; ok {
			ct = c
		}
		start = cf.Through
		if ct.Through.Before(start) {
			start = ct.Through
		}
	}
	after := cf.Through
	if after.Before(ct.Through) {
		after = ct.Through
	}
	for r, err := range w.j.Read(ctx, q, journal.ReadOptions{From: start}) {
		if err != nil {
			return transferState{}, journal.Position{}, fmt.Errorf("read accounts %s, %s: %w", from, to, err)
		}
		one := func(c *accountCache, acct journal.Tag) error {
			if !r.Position.After(c.Through) || !r.HasTag(acct) {
				return nil
			}
			s, err := foldTransfer(transferState{From: acct, FromBalance: c.Balance}, r)
			if err != nil {
				return err
			}
			c.Balance = s.FromBalance
			return nil
		}
		if err := one(&cf, from); err != nil {
			return transferState{}, journal.Position{}, err
		}
		if err := one(&ct, to); err != nil {
			return transferState{}, journal.Position{}, err
		}
		if r.Position.After(after) {
			after = r.Position
		}
	}
	cf.Through, ct.Through = after, after
	if w.fast {
		w.accounts[from], w.accounts[to] = cf, ct
	}
	st := transferState{From: from, To: to, FromBalance: cf.Balance, ToBalance: ct.Balance}
	return st, after, nil
}
