package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/snapshots/routed"
)

// Partitions on two databases (-db2): every account whose ID starts with
// "<partition>-" (the -partition2 flag, default "east") lives in that
// partition, stored on the -db2 database; every other account lives in the
// default partition on -db. A transfer moves money within one partition:
// a transfer between accounts of the two partitions is refused (400
// invalid_request), since a DCB command stays within one partition.
// Without -db2 every account is in the default partition, as before.
//
// With -db2 the accounts read model is one projection across both
// databases: its runner reads each partition on the database serving it
// now, in the partition's order, with a checkpoint per partition kept in
// the first database with the rows (projection.PartitionedSource). A
// partition move (`scribe partition move`, there and back) changes the
// partition's positions but not its event IDs, and the checkpoint follows
// by event ID: GET /accounts counts every event once. Events of different
// partitions have no order between them; an account lives in one
// partition, so its row is exact. An erasure record (default partition)
// may be applied before an AccountOpened of the second partition for the
// same customer: that row then keeps the sealed data, which cannot be
// opened any more (the key is gone) and reads as erased.
// GET /events/stream follows every partition the same way (feed.go): one
// subscription per partition, following moves by event ID, its SSE ids a
// cursor of each partition's last event ID.

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
// (partitioned.Router, and routed.Store for the snapshots). The key store stays on the first database. The
// returned backend's members list both databases, each with its pool, for
// the read models (one per database).
func withSecondDatabase(ctx context.Context, first *backend, url, schema, partition string, log *slog.Logger, tp trace.TracerProvider, mp metric.MeterProvider) (*backend, error) {
	if first.pool == nil {
		return nil, fmt.Errorf("-db2 needs -db: the second partition's database is used beside a Postgres first database, not the in-memory journal")
	}
	if partition == "" || partition == journal.DefaultPartition || strings.ContainsAny(partition, "-/:") {
		return nil, fmt.Errorf("-partition2 %q: give a name other than %q without '-', '/' or ':' (for example %q)", partition, journal.DefaultPartition, defaultSecondPartition)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := postgres.Open(cctx, url, postgres.Config{Schema: schema, Logger: log, TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		return nil, fmt.Errorf("open the second partition's Postgres (-db2): %w", err)
	}
	router, err := partitioned.New(partitioned.Config{
		Members: []partitioned.Member{
			{Name: "db", Journal: first.Journal, Sessions: first.Sessions},
			{Name: "db2", Journal: store.Journal},
		},
		Partitions: map[string]string{journal.DefaultPartition: "db", partition: "db2"},
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	snaps, err := routed.New(router, map[string]snapshots.Store{"db": first.Snapshots, "db2": store.Snapshots})
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
		Snapshots:   snaps,
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

// feed is the journal GET /events/stream follows with one database. With a
// second partition's database the stream reads every partition through the
// router instead (bankService.partitionFeed, feed.go); this first
// database's journal is only its fallback.
func (b *backend) feed() journal.Subscriber {
	if len(b.databases) > 0 {
		return b.databases[0].Journal
	}
	return b.Journal
}
