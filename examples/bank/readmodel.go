package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// The accounts read model: every account's balance and version, kept by a
// projection of the bank's events and served by GET /accounts. It is one
// definition (accountsProjection, a projection.RowProjection) for both
// storages: on Postgres its rows are in <schema>.projection_rows, written
// in the transaction that moves the projection's checkpoint (each event
// counted exactly once, also across crashes and with several bank nodes:
// one runner applies, the others stand by); on the memory journal the
// memory store keeps them. A rebuild (`scribe projections rebuild`)
// empties the rows with the checkpoint, so it never counts twice.
//
// Customers: the read model keeps an account's customer ID and the sealed
// AccountOpened data (ciphertext: the read model never stores a customer's
// name or email in clear) and opens it when it serves GET /accounts. When a
// customer's erasure record reaches it through the feed, it deletes what it
// derived from the customer (the sealed data) and marks the accounts'
// customer erased.

// readModelName and readModelVersion name the projection. Bump the version
// when the handler changes: the new version rebuilds beside the old one
// (its own rows) and takes over when it has caught up.
const (
	readModelName    = "bank-accounts"
	readModelVersion = 4 // 2: customers; 3: rows read model; 4: one read model across databases
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
	// rebuild empties the read model and replays the feed into it
	// (projection.Rebuild).
	rebuild func(ctx context.Context) error
	cancel  context.CancelFunc
	done    chan struct{}
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
		if !slices.Contains(bank.EventTypes, rec.Type) {
			continue // a read model over every event (readModelQueryOf)
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

// readModelQueryOf is the query of b's read model: readModelQuery, or every
// event of every partition across several databases (one slice per
// partition, see readModelAcross).
func readModelQueryOf(b *backend) journal.Query {
	if b.readAll || len(b.databases) > 0 {
		return journal.Query{All: true, AllPartitions: true}
	}
	return readModelQuery
}

// accountRow is an account's document in the read model's "accounts"
// collection.
type accountRow struct {
	Balance int64  `json:"balance"`
	Version uint64 `json:"version"`
	// CustomerID and Sealed are the account's customer and its sealed
	// AccountOpened data (ciphertext); Sealed is dropped and Erased set
	// once the customer is erased.
	CustomerID string `json:"customerId,omitempty"`
	Sealed     []byte `json:"sealed,omitempty"`
	Erased     bool   `json:"erased,omitempty"`
}

// customerRow lists a customer's accounts, so that an erasure finds them.
type customerRow struct {
	Accounts []string `json:"accounts"`
}

var (
	accountRows  = projection.Collection[accountRow]{Name: "accounts"}
	customerRows = projection.Collection[customerRow]{Name: "customers"}
)

// accountsProjection is the accounts read model, written once: the rows
// projection runs on the memory store and on Postgres (rows in the
// transaction that moves the checkpoint), and a rebuild empties its rows
// with the checkpoint.
func accountsProjection(svc *bankService, q journal.Query) projection.RowProjection {
	return projection.RowProjection{
		Name: readModelName, Version: readModelVersion, Query: q,
		Handle: func(ctx context.Context, rows projection.Rows, batch projection.Batch) error {
			deltas, erased, err := foldBatch(ctx, svc, batch.Records)
			if err != nil {
				return err
			}
			ids := slices.Sorted(maps.Keys(deltas))
			accounts, err := accountRows.GetMany(ctx, rows, ids)
			if err != nil {
				return err
			}
			for _, id := range ids {
				d, a := deltas[id], accounts[id]
				a.Balance, a.Version = a.Balance+d.balance, max(a.Version, d.version)
				if d.customerID != "" {
					a.CustomerID, a.Sealed = d.customerID, d.sealed
					c, _, err := customerRows.Get(ctx, rows, d.customerID)
					if err != nil {
						return err
					}
					if !slices.Contains(c.Accounts, id) {
						c.Accounts = append(c.Accounts, id)
						if err := customerRows.Put(ctx, rows, d.customerID, c); err != nil {
							return err
						}
					}
				}
				if err := accountRows.Put(ctx, rows, id, a); err != nil {
					return err
				}
			}
			for _, subject := range erased {
				c, _, err := customerRows.Get(ctx, rows, subject)
				if err != nil {
					return err
				}
				for _, id := range c.Accounts {
					a, ok, err := accountRows.Get(ctx, rows, id)
					if err != nil {
						return err
					}
					if !ok {
						continue
					}
					a.Sealed, a.Erased = nil, true
					if err := accountRows.Put(ctx, rows, id, a); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
}

// startReadModel starts the accounts read model's runner on the backend's
// storage. With a second partition's database (-db2) it is one read model
// across both databases: its runner reads the router partition by
// partition (projection.PartitionedSource) and keeps its checkpoints and
// rows in the first database (see partitions.go).
func startReadModel(ctx context.Context, b *backend, svc *bankService, nodeID string, log *slog.Logger) (*readModel, error) {
	o := projection.Options{Owner: nodeID + "-" + journal.NewEventID().String()[24:], Logger: log, LeaseTTL: 5 * time.Second}
	if b.pool == nil {
		return runReadModel(ctx, b.Journal, projection.NewMemoryStore(), svc, readModelQueryOf(b), o, log)
	}
	store, err := postgres.NewProjectionStore(b.pool, b.pgCfg)
	if err != nil {
		return nil, err
	}
	return runReadModel(ctx, b.Journal, store, svc, readModelQueryOf(b), o, log)
}

// runReadModel runs the accounts projection on store until Stop.
func runReadModel[Tx any](ctx context.Context, src projection.Source, store projection.RowStore[Tx], svc *bankService, q journal.Query, o projection.Options, log *slog.Logger) (*readModel, error) {
	p := projection.Bind(store, accountsProjection(svc, q))
	r, err := projection.NewRunner(src, store, p, o)
	if err != nil {
		return nil, err
	}
	reader := store.ReadRows(r.Key())
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rm := &readModel{cancel: cancel, done: make(chan struct{}), progress: r.Progress, waitFor: r.WaitFor,
		rebuild: func(ctx context.Context) error { return projection.Rebuild(ctx, store, p) }}
	rm.list = func(ctx context.Context, after string, limit int) ([]AccountView, error) {
		page, err := accountRows.List(ctx, reader, after, limit)
		if err != nil {
			return nil, err
		}
		out := make([]AccountView, len(page))
		for i, a := range page {
			out[i] = AccountView{ID: a.Key, Balance: a.Value.Balance, Version: a.Value.Version}
			if out[i].Customer, err = customerView(ctx, svc, a.Value.CustomerID, a.Value.Sealed, a.Value.Erased); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	go func() {
		defer close(rm.done)
		for {
			err := r.Run(rctx)
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
