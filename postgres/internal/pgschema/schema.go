package pgschema

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

// Default is the schema a Config without one uses.
const Default = "scribe"

// Schema is one Scribe schema: its name and its quoted SQL identifier.
type Schema struct {
	// Name is the schema's name as configured.
	Name string
	// Quoted is Name as a quoted SQL identifier.
	Quoted string
}

// New returns the schema named name.
func New(name string) Schema {
	return Schema{Name: name, Quoted: pgx.Identifier{name}.Sanitize()}
}

// SQL replaces every "__S__." in q with the schema's qualifier.
func (s Schema) SQL(q string) string { return strings.ReplaceAll(q, "__S__.", s.Quoted+".") }

// Table returns the qualified name of a table of the schema.
func (s Schema) Table(name string) string { return s.Quoted + "." + name }

// Lock kinds of the advisory lock keys.
const (
	LockTag       = 't' // a tag stream: exclusive for every append carrying the tag
	LockType      = 'y' // an event type in a partition: shared per append, exclusive per type-only condition item
	LockPartition = 'p' // a partition: shared per append, exclusive for a Query.All condition
	LockAll       = 'A' // the journal: shared per append, exclusive for an AllPartitions condition
	LockArchive   = 'R' // the schema's archiver (with value "archive")
	LockMove      = 'M' // a partition's move, on its target (with value "move")
)

// LockKey returns the advisory lock key of a lock of kind on partition and
// value. The schema is part of the key, so schemas never contend.
func (s Schema) LockKey(kind byte, partition, value string) int64 {
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	h.Write([]byte{0, kind, 0})
	h.Write([]byte(partition))
	h.Write([]byte{0})
	h.Write([]byte(value))
	return int64(h.Sum64())
}

// LockArgs returns the sorted keys and modes (true: exclusive) of a lock set.
func LockArgs(locks map[int64]bool) ([]int64, []bool) {
	keys := make([]int64, 0, len(locks))
	for k := range locks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	modes := make([]bool, len(keys))
	for i, k := range keys {
		modes[i] = locks[k]
	}
	return keys, modes
}

// I64 converts a position component to a bigint argument, saturating.
func I64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// Inspect runs fn in a read-only transaction on pool that plans with
// indexes only (enable_seqscan off), for the summary and inspection reads.
// The error is the driver's: translate it.
func Inspect(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		return fn(tx)
	})
}

// Translate maps a driver error of call op on the schema to the journal's
// sentinels: unavailability to journal.ErrUnavailable, a schema not migrated
// to journal.ErrStoreNotOpen, a unique violation of a stream version or an
// event ID to journal.ErrVersionMismatch or journal.ErrDuplicateMismatch.
func (s Schema) Translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if Unavailable(err) {
		return fmt.Errorf("%w: postgres: %s: the database cannot be reached or is shutting down (%w); retry later", journal.ErrUnavailable, op, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42P01", "3F000", "42703": // undefined_table, invalid_schema_name, undefined_column (a migration not yet applied)
			return fmt.Errorf("%w: postgres: %s: schema %q is not migrated (%s); run postgres.Migrate (or `scribe migrate up`) first", journal.ErrStoreNotOpen, op, s.Name, pgErr.Message)
		case "23505": // unique_violation
			switch pgErr.ConstraintName {
			case "event_tags_pkey":
				return fmt.Errorf("%w: postgres: %s: another writer claimed the same stream version (%s); reload the stream and decide again", journal.ErrVersionMismatch, op, pgErr.Detail)
			case "events_id_key":
				return fmt.Errorf("%w: postgres: %s: an event ID is already stored by a concurrent append (%s); use fresh event IDs, or retry the same append to get it back as a duplicate", journal.ErrDuplicateMismatch, op, pgErr.Detail)
			}
		}
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// Unavailable reports whether err means that the database cannot be reached
// or is going away: no connection could be made (refused, unreachable, the
// dial or the pool wait outlived the context), the server is shutting down or
// starting (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
// cannot_connect_now), refuses connections (53300 too_many_connections), or
// the connection broke (class 08, EOF, reset). A statement error reported by
// a live server is not unavailability.
func Unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool")
}

// IsConnErr reports whether err is a failure of the connection rather than a
// statement error reported by the server.
func IsConnErr(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC" || strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	return true
}
