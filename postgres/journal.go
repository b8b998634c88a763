package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// Journal is the Postgres journal.Journal and journal.Sessions. Create it with
// NewJournal after Migrate; it is safe for concurrent use by many goroutines.
// Close stops its background goroutines (batch workers, the LISTEN
// connection); the pool stays open and belongs to the caller.
type Journal struct {
	pool    *pgxpool.Pool
	cfg     Config
	s       string // quoted schema
	schema  pgschema.Schema
	channel string // NOTIFY channel
	limits  journal.Limits

	closeOnce sync.Once
	closed    chan struct{}
	wg        sync.WaitGroup

	batchOnce sync.Once
	queue     chan *appendReq

	listenOnce sync.Once
	wake       *broadcaster
	notifyOnce sync.Once
	notifyCh   chan struct{}

	// Lease changes (Release, CloseNode, OpenNode) wake waiting Acquires:
	// this process's at once through leaseWake, other processes' through a
	// NOTIFY on leaseChannel (coalesced like the commits' one).
	leaseChannel    string
	leaseWake       *broadcaster
	leaseNotifyOnce sync.Once
	leaseNotifyCh   chan struct{}

	// hooks is nil in production; only the package's tests set it.
	hooks  *engineHooks
	heads  heads
	server serverWatch

	// replica is set on a journal that reads from a standby (NewReplica).
	replica *replicaOf

	stats   stats
	metrics metric.Registration // reports stats; unregistered by Close
}

// engineHooks are the points where the package's tests step into the append
// engine (export_test.go sets them). A production Journal has none:
// Journal.hooks is nil, and each point on the write path is one nil check.
type engineHooks struct {
	// afterChecks runs after a batch's decision, before its write goes out.
	afterChecks func(ctx context.Context, conn *pgxpool.Conn) error
	// beforeCommit runs after the write statement, before COMMIT, which is
	// then sent on its own instead of in the write's pipeline.
	beforeCommit func(ctx context.Context, conn *pgxpool.Conn) error
	// readFirst makes every batch start with a read attempt: the direct
	// (one round trip) attempt is never tried.
	readFirst bool
}

var (
	_ journal.Journal         = (*Journal)(nil)
	_ journal.Sessions        = (*Journal)(nil)
	_ journal.SliceSubscriber = (*Journal)(nil)
)

// NewJournal returns a Journal on pool and cfg.Schema. It validates cfg and does
// no I/O: run Migrate first, or calls fail with journal.ErrStoreNotOpen.
func NewJournal(pool *pgxpool.Pool, cfg Config) (*Journal, error) {
	if pool == nil {
		return nil, errors.New("postgres: NewJournal: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	j := &Journal{
		pool:      pool,
		cfg:       cfg,
		s:         cfg.quotedSchema(),
		schema:    pgschema.New(cfg.Schema),
		limits:    journal.Limits{MaxDataSize: cfg.MaxDataSize},
		closed:    make(chan struct{}),
		wake:      newBroadcaster(),
		leaseWake: newBroadcaster(),
	}
	j.channel = notifyChannel(cfg.Schema)
	j.leaseChannel = j.channel + "_leases"
	if j.metrics, err = j.registerMetrics(cfg.MeterProvider); err != nil {
		return nil, err
	}
	return j, nil
}

// notifyChannel returns the NOTIFY channel of a schema (an identifier of at
// most 63 bytes, unique per schema).
func notifyChannel(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("scribe_%x", h.Sum64())
}

// Close stops the journal's background goroutines and its metrics and fails
// later calls with journal.ErrStoreNotOpen. Appends queued for batching but
// not started fail with journal.ErrStoreNotOpen. It does not close the pool.
// Idempotent.
func (j *Journal) Close() error {
	var err error
	j.closeOnce.Do(func() {
		close(j.closed)
		if err = j.metrics.Unregister(); err != nil {
			err = fmt.Errorf("postgres: unregistering the journal's metrics: %w", err)
		}
	})
	j.wg.Wait()
	return err
}

// checkOpen fails with ErrStoreNotOpen after Close.
func (j *Journal) checkOpen() error {
	select {
	case <-j.closed:
		return fmt.Errorf("%w: the postgres journal was closed", journal.ErrStoreNotOpen)
	default:
		return nil
	}
}

// t returns the qualified name of a table in the journal's schema.
func (j *Journal) t(name string) string { return j.schema.Table(name) }

// sql replaces every "__S__." in q with the journal's schema qualifier.
func (j *Journal) sql(q string) string { return j.schema.SQL(q) }

// translate maps a driver error to the journal's sentinels. op names the call.
func (j *Journal) translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		j.server.lost()
	}
	return translateErr(j.cfg.Schema, op, err)
}

// translateErr maps a driver error of call op on schema to the journal's
// sentinels (pgschema.Schema.Translate).
func translateErr(schema, op string, err error) error {
	return pgschema.Schema{Name: schema}.Translate(op, err)
}

// unavailable reports whether err means the database cannot be reached
// (pgschema.Unavailable).
func unavailable(err error) bool { return pgschema.Unavailable(err) }

// isConnErr reports a failure of the connection (pgschema.IsConnErr).
func isConnErr(err error) bool { return pgschema.IsConnErr(err) }

// lockKey returns the advisory lock key of a DCB/stream lock
// (pgschema.Schema.LockKey).
func (j *Journal) lockKey(kind byte, partition, value string) int64 {
	return j.schema.LockKey(kind, partition, value)
}
