package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// Partitions on two databases (-db2): every account whose ID starts with
// "<partition>-" (the -partition2 flag, default "east") lives in that
// partition, stored on the -db2 database; every other account lives in the
// default partition on -db. A transfer moves money within one partition:
// a transfer between accounts of the two partitions is refused (400
// invalid_request), since a DCB command stays within one partition.
// Without -db2 every account is in the default partition, as before.
//
// With -db2 the feed is per database: GET /events/stream follows the first
// database, and the accounts read model runs once per database (readModels).
// Erasure records live in the default partition on the first database, so
// the second database's read model does not mark the customers of its
// accounts erased (their data stays sealed and unreadable all the same: the
// key is gone).

// defaultSecondPartition is -partition2's default.
const defaultSecondPartition = "east"

// accountPartitions says which partition an account lives in.
type accountPartitions struct {
	// second is the second partition's name; "" when there is none.
	second string
}

// of returns the partition of account id.
func (p accountPartitions) of(id string) string {
	if p.second != "" && strings.HasPrefix(id, p.second+"-") {
		return p.second
	}
	return journal.DefaultPartition
}

// sameTransfer refuses a transfer between two partitions.
func (p accountPartitions) sameTransfer(from, to string) error {
	if pf, pt := p.of(from), p.of(to); pf != pt {
		return invalidRequest(fmt.Sprintf(
			"account %q is in partition %q and account %q in partition %q, which live on different databases; a transfer moves money within one partition (accounts whose IDs start with %q, or the others)",
			from, pf, to, pt, p.second+"-"))
	}
	return nil
}

// withSecondDatabase opens the second partition's database at url (same
// schema as first) and returns a backend whose journal, sessions and
// snapshots route each account's partition to its database
// (partitioned.Router). The key store stays on the first database. The
// returned backend's members list both databases, each with its pool, for
// the read models (one per database).
func withSecondDatabase(ctx context.Context, first *backend, url, schema, partition string, log *slog.Logger, tp trace.TracerProvider) (*backend, error) {
	if first.pool == nil {
		return nil, fmt.Errorf("-db2 needs -db: the second partition's database is used beside a Postgres first database, not the in-memory journal")
	}
	if partition == "" || partition == journal.DefaultPartition || strings.ContainsAny(partition, "-/:") {
		return nil, fmt.Errorf("-partition2 %q: give a name other than %q without '-', '/' or ':' (for example %q)", partition, journal.DefaultPartition, defaultSecondPartition)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := postgres.Open(cctx, url, postgres.WithSchema(schema), postgres.WithLogger(log), postgres.WithTracerProvider(tp))
	if err != nil {
		return nil, fmt.Errorf("open the second partition's Postgres (-db2): %w", err)
	}
	router, err := partitioned.New(partitioned.Config{
		Members: []partitioned.Member{
			{Name: "db", Journal: first.Journal, Sessions: first.Sessions, Snapshots: first.Snapshots},
			{Name: "db2", Journal: store.Journal, Snapshots: store.Snapshots},
		},
		Partitions: map[string]string{journal.DefaultPartition: "db", partition: "db2"},
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	log.Info("partition on a second database", "partition", partition, "database", store.Address, "schema", schema)
	firstClose := first.close
	parts := accountPartitions{second: partition}
	second := &backend{Journal: store.Journal, Sessions: store.Journal, Snapshots: store.Snapshots,
		pool: store.Pool, pgCfg: store.Config, router: router, member: "db2", partitions: parts, readAll: true}
	return &backend{
		Journal:     router,
		Sessions:    router,
		Snapshots:   router.Snapshots(),
		KeyStore:    first.KeyStore,
		Description: first.Description + "; partition " + partition + " on postgres " + store.Address + " schema " + schema,
		pool:        first.pool,
		pgCfg:       first.pgCfg,
		partitions:  parts,
		router:      router,
		databases: []*backend{{Journal: first.Journal, Sessions: first.Sessions, Snapshots: first.Snapshots, pool: first.pool, pgCfg: first.pgCfg,
			router: router, member: "db", partitions: parts, readAll: true}, second},
		close: func() {
			store.Close()
			firstClose()
		},
	}, nil
}

// readModels runs one accounts read model per database (the feed is per
// database), each over every event of its database, and serves them as one:
// an account's row comes from the read model of the database serving its
// partition now (after a partition move, the old database's rows of it are
// stale and left out); list merges the pages by account ID.
type readModels struct {
	models  []*readModel
	members []string
	router  *partitioned.Router
	parts   accountPartitions
}

// serves reports whether the database named member serves account id now.
func (rs *readModels) serves(member, id string) bool {
	m, err := rs.router.MemberOf(rs.parts.of(id))
	return err == nil && m == member
}

func (rs *readModels) list(ctx context.Context, after string, limit int) ([]AccountView, error) {
	var all []AccountView
	for i, r := range rs.models {
		// Page through this read model until it gave limit rows of
		// accounts its database serves, or has no more.
		cursor, kept := after, 0
		for kept < limit {
			page, err := r.list(ctx, cursor, limit)
			if err != nil {
				return nil, err
			}
			for _, a := range page {
				if rs.serves(rs.members[i], a.ID) {
					all = append(all, a)
					kept++
				}
			}
			if len(page) < limit {
				break
			}
			cursor = page[len(page)-1].ID
		}
	}
	slices.SortFunc(all, func(a, b AccountView) int { return strings.Compare(a.ID, b.ID) })
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

func (rs *readModels) Stop() {
	for _, r := range rs.models {
		r.Stop()
	}
}

// feed is the journal GET /events/stream follows: the first database's
// with a second partition's database (the feed is per database), else the
// backend's journal.
func (b *backend) feed() journal.Subscriber {
	if len(b.databases) > 0 {
		return b.databases[0].Journal
	}
	return b.Journal
}

// startReadModels starts one accounts read model per database, each over
// its own partition's feed and projection store, and serves them as one.
func startReadModels(ctx context.Context, dbs []*backend, svc *bankService, nodeID string, log *slog.Logger) (*readModel, error) {
	rs := &readModels{router: dbs[0].router, parts: dbs[0].partitions}
	for _, db := range dbs {
		r, err := startReadModel(ctx, db, svc, nodeID, log)
		if err != nil {
			rs.Stop()
			return nil, err
		}
		rs.models = append(rs.models, r)
		rs.members = append(rs.members, db.member)
	}
	done := make(chan struct{})
	close(done)
	return &readModel{
		list: rs.list,
		progress: func() projection.Progress {
			var worst projection.Progress
			for i, r := range rs.models {
				p := r.progress()
				if i == 0 || p.Error != "" && worst.Error == "" || p.Lag > worst.Lag && (p.Error == "") == (worst.Error == "") {
					worst = p
				}
			}
			return worst
		},
		waitFor: rs.models[0].waitFor,
		rebuild: func(ctx context.Context) error {
			for _, r := range rs.models {
				if err := r.rebuild(ctx); err != nil {
					return err
				}
			}
			return nil
		},
		cancel: rs.Stop,
		done:   done,
	}, nil
}
