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

	"github.com/scribe-es/scribe/erasure"
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
//
// Customers: the read model keeps an account's customer ID and the sealed
// AccountOpened data (ciphertext: the read model never stores a customer's
// name or email in clear) and opens it when it serves GET /accounts. When a
// customer's erasure record reaches it through the feed, it deletes what it
// derived from the customer (the sealed data) and marks the accounts'
// customer erased.

// readModelName and readModelVersion name the projection. Bump the version
// when the handler changes: the new version rebuilds beside the old one
// (its own table) and takes over when it has caught up.
const (
	readModelName    = "bank-accounts"
	readModelVersion = 2 // 2: customers
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
	// customerID and sealed are set by the account's AccountOpened with a
	// customer: sealed is that event's stored (sealed) data.
	customerID string
	sealed     []byte
}

// foldBatch decodes a batch of the bank's events into per-account deltas:
// the balance change (by the domain's own bank.Evolve, applied to each
// account the event is tagged with, from a zero balance), the account
// stream's newest version and the account's customer; and the customers
// whose erasure records the batch holds, in feed order (after every
// account opening of theirs: no personal data is sealed for an erased
// customer).
func foldBatch(ctx context.Context, svc *bankService, recs []journal.Record) (map[string]*accountDelta, []string, error) {
	out := map[string]*accountDelta{}
	var erased []string
	for _, rec := range recs {
		if d, ok, err := erasure.ParseRecord(&rec); ok {
			if err != nil {
				return nil, nil, err
			}
			erased = append(erased, d.Subject)
			continue
		}
		ev, err := svc.decode(ctx, rec)
		if err != nil {
			return nil, nil, fmt.Errorf("event %s at %s: %w", rec.ID, rec.Position, err)
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
			if o, ok := ev.(bank.AccountOpened); ok && o.CustomerID != "" {
				d.customerID, d.sealed = o.CustomerID, rec.Data
			}
		}
	}
	return out, erased, nil
}

// customerView opens the sealed AccountOpened data a read model row keeps.
func customerView(ctx context.Context, svc *bankService, customerID string, sealed []byte, erased bool) (*CustomerView, error) {
	if customerID == "" {
		return nil, nil
	}
	if erased || len(sealed) == 0 {
		return &CustomerView{ID: customerID, Erased: true}, nil
	}
	d, err := svc.rt.DecodeRecord(ctx, journal.Record{Event: journal.Event{Type: bank.TypeAccountOpened, SchemaVersion: 1, Data: sealed}})
	if err != nil {
		return nil, err
	}
	o, _ := d.Value.(bank.AccountOpened)
	if len(d.Erased) > 0 { // erased, and the record has not reached the read model yet
		return &CustomerView{ID: customerID, Erased: true}, nil
	}
	return &CustomerView{ID: customerID, Name: o.CustomerName, Email: o.CustomerEmail}, nil
}

var readModelQuery = journal.Query{Items: []journal.QueryItem{{Types: bank.EventTypes}, {Types: []string{erasure.RecordType}}}}

// startReadModel creates the read model on the backend's storage and starts
// its runner.
func startReadModel(ctx context.Context, b *backend, svc *bankService, nodeID string, log *slog.Logger) (*readModel, error) {
	o := projection.Options{Owner: nodeID + "-" + journal.NewEventID().String()[24:], Logger: log, LeaseTTL: 5 * time.Second}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rm := &readModel{cancel: cancel, done: make(chan struct{})}
	var run func(context.Context) error
	if b.pool == nil {
		type memAccount struct {
			view       AccountView
			customerID string
			sealed     []byte
			erased     bool
		}
		var mu sync.Mutex
		accounts := map[string]*memAccount{}
		r, err := projection.NewRunner(b.Journal, projection.NewMemoryStore(), projection.Projection[projection.NoTx]{
			Name: readModelName, Version: readModelVersion, Query: readModelQuery,
			Handle: func(ctx context.Context, _ projection.NoTx, batch projection.Batch) error {
				deltas, erased, err := foldBatch(ctx, svc, batch.Records)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				for id, d := range deltas {
					a := accounts[id]
					if a == nil {
						a = &memAccount{}
						accounts[id] = a
					}
					a.view.ID, a.view.Balance, a.view.Version = id, a.view.Balance+d.balance, max(a.view.Version, d.version)
					if d.customerID != "" {
						a.customerID, a.sealed = d.customerID, d.sealed
					}
				}
				for _, subject := range erased {
					for _, a := range accounts {
						if a.customerID == subject {
							a.sealed, a.erased = nil, true
						}
					}
				}
				return nil
			},
		}, o)
		if err != nil {
			cancel()
			return nil, err
		}
		rm.list = func(ctx context.Context, after string, limit int) ([]AccountView, error) {
			mu.Lock()
			ids := slices.Sorted(maps.Keys(accounts))
			i, _ := slices.BinarySearch(ids, after)
			if i < len(ids) && ids[i] == after {
				i++
			}
			page := make([]memAccount, 0, min(limit, len(ids)-i))
			for _, id := range ids[i:min(len(ids), i+limit)] {
				page = append(page, *accounts[id])
			}
			mu.Unlock()
			out := make([]AccountView, len(page))
			for i, a := range page {
				out[i] = a.view
				c, err := customerView(ctx, svc, a.customerID, a.sealed, a.erased)
				if err != nil {
					return nil, err
				}
				out[i].Customer = c
			}
			return out, nil
		}
		run, rm.progress, rm.waitFor = r.Run, r.Progress, r.WaitFor
	} else {
		table := pgx.Identifier{b.pgCfg.Schema, fmt.Sprintf("bank_accounts_v%d", readModelVersion)}.Sanitize()
		// customer_data is the account's sealed AccountOpened data
		// (ciphertext); NULL once the customer is erased.
		if _, err := b.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			id              text COLLATE "C" PRIMARY KEY,
			balance         bigint NOT NULL,
			version         bigint NOT NULL,
			customer_id     text COLLATE "C",
			customer_data   bytea,
			customer_erased boolean NOT NULL DEFAULT false);
			CREATE INDEX IF NOT EXISTS `+pgx.Identifier{fmt.Sprintf("bank_accounts_v%d_customer", readModelVersion)}.Sanitize()+` ON `+table+` (customer_id)`); err != nil {
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
				deltas, erased, err := foldBatch(ctx, svc, batch.Records)
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
				if err != nil {
					return err
				}
				for _, id := range ids {
					if d := deltas[id]; d.customerID != "" {
						if _, err := tx.Exec(ctx, `UPDATE `+table+` SET customer_id = $2, customer_data = $3 WHERE id = $1`, id, d.customerID, d.sealed); err != nil {
							return err
						}
					}
				}
				for _, subject := range erased {
					if _, err := tx.Exec(ctx, `UPDATE `+table+` SET customer_data = NULL, customer_erased = true WHERE customer_id = $1`, subject); err != nil {
						return err
					}
				}
				return nil
			},
		}, o)
		if err != nil {
			cancel()
			return nil, err
		}
		rm.list = func(ctx context.Context, after string, limit int) ([]AccountView, error) {
			rows, err := b.pool.Query(ctx, `SELECT id, balance, version, coalesce(customer_id, ''), customer_data, customer_erased FROM `+table+` WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
			if err != nil {
				return nil, err
			}
			type row struct {
				view       AccountView
				customerID string
				sealed     []byte
				erased     bool
			}
			page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
				var a row
				err := r.Scan(&a.view.ID, &a.view.Balance, &a.view.Version, &a.customerID, &a.sealed, &a.erased)
				return a, err
			})
			if err != nil {
				return nil, err
			}
			out := make([]AccountView, len(page))
			for i, a := range page {
				out[i] = a.view
				if out[i].Customer, err = customerView(ctx, svc, a.customerID, a.sealed, a.erased); err != nil {
					return nil, err
				}
			}
			return out, nil
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
