package postgres

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// Config configures Open and every store of a schema (Journal,
// SnapshotStore, ProjectionStore); the constructors ignore Open's fields.
// The zero value is valid: every field has a default.
type Config struct {
	// Schema is the Postgres schema holding Scribe's tables. Default "scribe".
	Schema string
	// MaxDataSize is the largest event Data accepted, in bytes after JSON
	// compaction. Default journal.DefaultMaxDataSize (1 MiB).
	MaxDataSize int
	// Batching controls cross-stream batching of concurrent appends. Default: on.
	Batching BatchingConfig
	// PollInterval bounds a live subscription's wait without a notification
	// (a lost NOTIFY delays delivery at most this). Default 500ms.
	PollInterval time.Duration
	// AcquirePollInterval is the longest Acquire waits between two tries
	// while another live node holds the stream; it matters only when a lease
	// notification is lost. Default 1s.
	AcquirePollInterval time.Duration
	// PageSize is how many records a read fetches per round trip; a
	// ReadStream fetches 8 times as many (a whole aggregate of up to 4,096
	// events by default). Default 512.
	PageSize int
	// ReplicaWait is how long Replica.ReaderAt waits for the standby to
	// replay a position before it answers with the primary. Default 2s.
	ReplicaWait time.Duration
	// Clock stamps RecordedAt and snapshots' CreatedAt (lease expiry is the
	// database clock's). Default time.Now.
	Clock func() time.Time
	// Logger receives one Info line when appends reach another database
	// server than before (a failover). Default: discard.
	Logger *slog.Logger
	// MeterProvider receives the append engine's counters (MetricBatches
	// and the other Metric names). Default: none (never the global one).
	MeterProvider metric.MeterProvider

	// MaxConns is the size of the pool Open and Connect create. Default:
	// the URL's pool_max_conns when given, else DefaultMaxConns (16).
	MaxConns int32
	// TracerProvider receives a span per statement on the pool Open and
	// Connect create (pgtrace). Default: none (never the global one).
	TracerProvider trace.TracerProvider
	// VerifyOnly makes Open check the schema (VerifySchema) instead of
	// migrating it. Default false: Open runs Migrate.
	VerifyOnly bool
	// KeyStore makes Open also migrate (or verify) and open the erasure key
	// store (Store.Keys); its Schema defaults to KeyStoreSchemaFor(Schema)
	// and must differ from Schema. Default nil: no key store.
	KeyStore *KeyStoreConfig
	// KeyStoreURL keeps the key store on another database, on a pool of its
	// own, backed up apart from the events; it implies KeyStore. Default "":
	// the journal's database.
	KeyStoreURL string
}

// BatchingConfig controls cross-stream batching: concurrent Appends are queued
// and up to MaxBatch of them run in one transaction, each decided on its own,
// so one append's conflict fails only that append.
type BatchingConfig struct {
	// Disabled makes every Append run in its own transaction. Default false.
	Disabled bool
	// MaxBatch is the most appends one transaction carries. Default 32; at
	// most 1024.
	MaxBatch int
	// Workers is how many batch transactions may run at once. Default 2.
	Workers int
	// Linger is how long a worker whose previous batch carried several
	// appends waits for the next to grow. Default 500µs; negative: never.
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
	if c.MeterProvider == nil {
		c.MeterProvider = metricnoop.NewMeterProvider()
	}
	return c, nil
}

// quotedSchema returns the schema as a quoted SQL identifier.
func (c Config) quotedSchema() string { return pgx.Identifier{c.Schema}.Sanitize() }
