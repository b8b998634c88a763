package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// The accounts read model: every account's balance and version, kept by a
// projection of the bank's events and served by GET /accounts. On Postgres
// it is the table <schema>.bank_accounts, written in the transaction that
// moves the projection's checkpoint (each event counted exactly once, also
// across crashes and with several bank nodes: one runner applies, the
// others stand by). On the memory journal it is a map fed by the memory
// checkpoint store.

// readModelName and readModelVersion name the projection. Bump the version
// when the handler changes: the new version rebuilds beside the old one
// (its own table) and takes over when it has caught up.
const (
	readModelName    = "bank-accounts"
	readModelVersion = 1
)

// accountsPage bounds GET /accounts.
const (
	defaultAccountsPage = 100
	maxAccountsPage     = 1000
)

// readModel is the accounts read model and the runner that feeds it.
type readModel struct {
	// list returns up to limit accounts with IDs after after, by ID.
	list     func(ctx context.Context, after string, limit int) ([]AccountView, error)
	progress func() projection.Progress
	waitFor  func(ctx context.Context, pos journal.Position) error
	cancel   context.CancelFunc
	done     chan struct{}
}

// accountDelta is what one batch changes in one account.
type accountDelta struct {
	balance int64
	version uint64
}

// foldBatch decodes a batch of the bank's events into per-account deltas:
// the balance change (by the domain's own bank.Evolve, applied to each
// account the event is tagged with, from a zero balance) and the account
// stream's newest version.
func foldBatch(recs []journal.Record) (map[string]*accountDelta, error) {
	out := map[string]*accountDelta{}
	for _, rec := range recs {
		ev, err := bank.DecodeEvent(rec.Type, rec.Data)
		if err != nil {
			return nil, fmt.Errorf("event %s at %s: %w", rec.ID, rec.Position, err)
		}
		for _, tag := range rec.Tags {
			if tag.Group() != bank.TagGroupAccount {
				continue
			}
			id := tag.Value()
			d := out[id]
			if d == nil {
				d = &accountDelta{}
				out[id] = d
			}
			d.balance = bank.Evolve(bank.Account{ID: id, Balance: d.balance}, ev).Balance
			d.version = max(d.version, rec.Version(tag))
		}
	}
	return out, nil
}

var readModelQuery = journal.Query{Items: []journal.QueryItem{{Types: bank.EventTypes}}}

// startReadModel creates the read model on the backend's storage and starts
// its runner.
func startReadModel(ctx context.Context, b *backend, nodeID string, log *slog.Logger) (*readModel, error) {
	o := projection.Options{Owner: nodeID + "-" + journal.NewEventID().String()[24:], Logger: log, LeaseTTL: 5 * time.Second}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rm := &readModel{cancel: cancel, done: make(chan struct{})}
	var run func(context.Context) error
	if b.pool == nil {
		var mu sync.Mutex
		accounts := map[string]AccountView{}
		r, err := projection.NewRunner(b.Journal, projection.NewMemoryStore(), projection.Projection[projection.NoTx]{
			Name: readModelName, Version: readModelVersion, Query: readModelQuery,
			Handle: func(_ context.Context, _ projection.NoTx, batch projection.Batch) error {
				deltas, err := foldBatch(batch.Records)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				for id, d := range deltas {
					a := accounts[id]
					a.ID, a.Balance, a.Version = id, a.Balance+d.balance, max(a.Version, d.version)
					accounts[id] = a
				}
				return nil
			},
		}, o)
		if err != nil {
			cancel()
			return nil, err
		}
		rm.list = func(_ context.Context, after string, limit int) ([]AccountView, error) {
			mu.Lock()
			ids := slices.Sorted(maps.Keys(accounts))
			i, _ := slices.BinarySearch(ids, after)
			if i < len(ids) && ids[i] == after {
				i++
			}
			out := make([]AccountView, 0, min(limit, len(ids)-i))
			for _, id := range ids[i:min(len(ids), i+limit)] {
				out = append(out, accounts[id])
			}
			mu.Unlock()
			return out, nil
		}
		run, rm.progress, rm.waitFor = r.Run, r.Progress, r.WaitFor
	} else {
		table := pgx.Identifier{b.pgCfg.Schema, "bank_accounts"}.Sanitize()
		if _, err := b.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			id      text COLLATE "C" PRIMARY KEY,
			balance bigint NOT NULL,
			version bigint NOT NULL)`); err != nil {
			cancel()
			return nil, fmt.Errorf("create the accounts read model table %s: %w", table, err)
		}
		store, err := postgres.NewProjectionStore(b.pool, b.pgCfg)
		if err != nil {
			cancel()
			return nil, err
		}
		r, err := projection.NewRunner(b.Journal, store, projection.Projection[pgx.Tx]{
			Name: readModelName, Version: readModelVersion, Query: readModelQuery,
			Handle: func(ctx context.Context, tx pgx.Tx, batch projection.Batch) error {
				deltas, err := foldBatch(batch.Records)
				if err != nil {
					return err
				}
				ids := slices.Sorted(maps.Keys(deltas)) // a fixed lock order between batches
				balances, versions := make([]int64, len(ids)), make([]int64, len(ids))
				for i, id := range ids {
					balances[i], versions[i] = deltas[id].balance, int64(deltas[id].version)
				}
				_, err = tx.Exec(ctx, `INSERT INTO `+table+` AS a (id, balance, version)
					SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])
					ON CONFLICT (id) DO UPDATE SET balance = a.balance + EXCLUDED.balance, version = greatest(a.version, EXCLUDED.version)`,
					ids, balances, versions)
				return err
			},
		}, o)
		if err != nil {
			cancel()
			return nil, err
		}
		rm.list = func(ctx context.Context, after string, limit int) ([]AccountView, error) {
			rows, err := b.pool.Query(ctx, `SELECT id, balance, version FROM `+table+` WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(row pgx.CollectableRow) (AccountView, error) {
				var a AccountView
				err := row.Scan(&a.ID, &a.Balance, &a.Version)
				return a, err
			})
		}
		run, rm.progress, rm.waitFor = r.Run, r.Progress, r.WaitFor
	}
	go func() {
		defer close(rm.done)
		for {
			err := run(rctx)
			if rctx.Err() != nil {
				return
			}
			// Failed (the status and log say where) or superseded by a newer
			// version elsewhere: try again later, a fix may have been deployed.
			log.Error("accounts read model stopped; retrying in 30s", "error", err)
			select {
			case <-rctx.Done():
				return
			case <-time.After(30 * time.Second):
			}
		}
	}()
	return rm, nil
}

// Stop stops the runner and waits for it.
func (rm *readModel) Stop() {
	rm.cancel()
	<-rm.done
}
