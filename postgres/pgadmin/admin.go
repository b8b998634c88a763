package pgadmin

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// Admin runs operator tasks on one migrated Scribe schema: listings and
// inspection (Streams, ListStreams, Leases, Nodes, Overview, Newest,
// CountAfterAtMost, UnchainedEvents, UnrecordedStreams), retention
// (PlanArchive, Archive, ArchivePlanned, RetireStream, Compact,
// StorageSizes) and DropSnapshots. It is safe for concurrent use and holds
// no resources of its own: the pool stays the caller's. Partition moves
// (MovePartition) work on two pools and take a PartitionMove instead.
type Admin struct {
	pool    *pgxpool.Pool
	journal *postgres.Journal // the contract reads it builds on (Head, TagSummary)
	schema  pgschema.Schema
	clock   func() time.Time
}

// New returns the Admin of cfg.Schema on pool, with the same Config as the
// service's postgres.NewJournal (Schema, and Clock to judge retention ages;
// the other fields do not matter here). It validates cfg and does no I/O.
func New(pool *pgxpool.Pool, cfg postgres.Config) (*Admin, error) {
	if pool == nil {
		return nil, errors.New("pgadmin: New: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	j, err := postgres.NewJournal(pool, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Schema == "" {
		cfg.Schema = pgschema.Default
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Admin{pool: pool, journal: j, schema: pgschema.New(cfg.Schema), clock: cfg.Clock}, nil
}

// sql replaces every "__S__." in q with the schema's qualifier.
func (a *Admin) sql(q string) string { return a.schema.SQL(q) }

// t returns the qualified name of a table of the schema.
func (a *Admin) t(name string) string { return a.schema.Table(name) }

// translate maps a driver error to the journal's sentinels; op names the call.
func (a *Admin) translate(op string, err error) error { return a.schema.Translate(op, err) }

// lockKey returns the schema's advisory lock key of kind on partition and value.
func (a *Admin) lockKey(kind byte, partition, value string) int64 {
	return a.schema.LockKey(kind, partition, value)
}

// inspect runs fn in a read-only transaction that plans with indexes only.
func (a *Admin) inspect(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	return a.translate(op, pgschema.Inspect(ctx, a.pool, fn))
}
