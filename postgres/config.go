package postgres

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// Config configures Open and every store of a schema (Journal,
// SnapshotStore, ProjectionStore). The zero value is valid: every field has
// a default. It is the package's one way to configure: Open takes it as it
// is, and so do the constructors, which ignore the fields marked as Open's.
type Config struct {
	// Schema is the Postgres schema holding Scribe's tables. Default "scribe".
	Schema string
	// MaxDataSize is the largest event Data accepted, in bytes after JSON
	// compaction. Default journal.DefaultMaxDataSize (1 MiB).
	MaxDataSize int
	// Batching controls cross-stream batching of concurrent appends. Default: on.
	Batching BatchingConfig
	// PollInterval bounds how long a live subscription waits without a
	// notification before it reads again: a lost NOTIFY delays delivery by at
	// most this. Default 500ms.
	PollInterval time.Duration
	// AcquirePollInterval is the longest Acquire waits between two tries
	// while another live node holds the stream. It tries again at once when a
	// lease of the schema may have become free (Release, CloseNode or a
	// superseding OpenNode, by any process: NOTIFY) and when the holder's
	// session expires by the database clock, so this bound matters only when
	// a notification is lost (the LISTEN connection is down, or the other
	// process runs a Scribe from before these notifications). Default 1s.
	AcquirePollInterval time.Duration
	// PageSize is how many records a read fetches per round trip (reads stream
	// page by page and hold no connection between pages). Default 512.
	PageSize int
	// ReplicaWait is how long a replica journal (NewReplica) waits for its
	// standby to replay a position a read must include (ReaderAt) before the
	// read goes to the primary instead. Default 2s; it matters only on a
	// replica.
	ReplicaWait time.Duration
	// Clock stamps RecordedAt on appended events and CreatedAt on snapshots
	// saved without one. Lease expiry is always judged by the database clock.
	// Default time.Now.
	Clock func() time.Time
	// Logger receives the journal's operational logs: one Info line when its
	// appends reach another database server than before (a failover behind a
	// multi-host URL), naming both addresses. Default: discard.
	Logger *slog.Logger

	// MaxConns is the size of the pool Open and Connect create. Default:
	// the URL's pool_max_conns when given, else DefaultMaxConns (16).
	MaxConns int32
	// TracerProvider receives a span for every statement on the pool Open
	// and Connect create (pgtrace.Tracer: db.* spans). Default: a no-op provider;
	// the global provider is never used.
	TracerProvider trace.TracerProvider
	// VerifyOnly makes Open check the schema (VerifySchema) instead of
	// migrating it, for when migrations run as a deployment step of their
	// own (`scribe migrate up`). Default false: Open runs Migrate.
	VerifyOnly bool
	// KeyStore, when set, makes Open also set up the erasure key store
	// (Store.Keys): migrate its schema (with VerifyOnly, check that it
	// exists) and open it. Its Schema defaults to KeyStoreSchemaFor the
	// journal's schema; on the journal's database it must differ from the
	// journal's schema. Default nil: no key store.
	KeyStore *KeyStoreConfig
	// KeyStoreURL keeps the key store on the database at this URL, on a
	// pool of its own (same MaxConns and tracing), so that keys and events
	// are backed up and restored apart; it implies KeyStore (with its
	// default schema when KeyStore is nil). Default "": the journal's
	// database.
	KeyStoreURL string
}

// BatchingConfig controls cross-stream batching: concurrent Appends are queued
// and up to MaxBatch of them run in one transaction, each decided on its own,
// so one append's conflict fails only that append.
type BatchingConfig struct {
	// Disabled makes every Append run in its own transaction. Default false.
	Disabled bool
	// MaxBatch is the most appends one transaction carries. Default 32; at most
	// 1024 (one statement carries all their events).
	MaxBatch int
	// Workers is how many batch transactions may run at once. Default 2.
	Workers int
	// Linger is how long a worker whose previous batch carried several
	// appends waits for its next batch to grow as large before it starts the
	// transaction (a lone caller never waits). Default 500µs; negative: never.
	Linger time.Duration
}

const (
	defaultSchema       = "scribe"
	defaultPoll         = 500 * time.Millisecond
	defaultAcquirePoll  = time.Second
	defaultPageSize     = 512
	defaultReplicaWait  = 2 * time.Second
	defaultMaxBatch     = 32
	maxMaxBatch         = 1024
	defaultBatchWorkers = 2
	defaultLinger       = 500 * time.Microsecond
)

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Schema == "" {
		c.Schema = defaultSchema
	}
	if len(c.Schema) > 63 {
		return c, fmt.Errorf("postgres: Config.Schema %q is %d bytes; Postgres identifiers are at most 63 bytes", c.Schema, len(c.Schema))
	}
	for _, r := range c.Schema {
		if r == 0 {
			return c, fmt.Errorf("postgres: Config.Schema contains a NUL byte; use a plain identifier such as \"scribe\"")
		}
	}
	if c.MaxDataSize < 0 {
		return c, fmt.Errorf("postgres: Config.MaxDataSize is %d; use a positive size in bytes or 0 for the default", c.MaxDataSize)
	}
	if c.MaxDataSize == 0 {
		c.MaxDataSize = journal.DefaultMaxDataSize
	}
	if c.PollInterval < 0 || c.AcquirePollInterval < 0 || c.PageSize < 0 || c.Batching.MaxBatch < 0 || c.Batching.Workers < 0 {
		return c, fmt.Errorf("postgres: Config has a negative interval, page size or batching option; use positive values or 0 for the defaults")
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPoll
	}
	if c.AcquirePollInterval == 0 {
		c.AcquirePollInterval = defaultAcquirePoll
	}
	if c.ReplicaWait < 0 {
		return c, fmt.Errorf("postgres: Config.ReplicaWait is negative (%s); use a positive duration or 0 for the default %s", c.ReplicaWait, defaultReplicaWait)
	}
	if c.ReplicaWait == 0 {
		c.ReplicaWait = defaultReplicaWait
	}
	if c.PageSize == 0 {
		c.PageSize = defaultPageSize
	}
	if c.Batching.MaxBatch == 0 {
		c.Batching.MaxBatch = defaultMaxBatch
	}
	if c.Batching.MaxBatch > maxMaxBatch {
		return c, fmt.Errorf("postgres: Config.Batching.MaxBatch is %d, over the limit of %d", c.Batching.MaxBatch, maxMaxBatch)
	}
	if c.Batching.Workers == 0 {
		c.Batching.Workers = defaultBatchWorkers
	}
	if c.Batching.Linger == 0 {
		c.Batching.Linger = defaultLinger
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// quotedSchema returns the schema as a quoted SQL identifier.
func (c Config) quotedSchema() string { return pgx.Identifier{c.Schema}.Sanitize() }
