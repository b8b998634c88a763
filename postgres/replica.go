package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/internal/backoff"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// Read replicas.
//
// A replica Journal (NewReplica) reads from a streaming standby of the
// primary's database: the same schema, replayed from the primary's WAL, some
// time behind it. Everything that writes (appends, node sessions, leases,
// recorded types) stays on the primary and fails on a replica with
// ErrReplicaReadOnly; the fences are the primary's alone. The operator's
// writes (pgadmin: archiving, tombstones) take the primary's pool.
//
// The catch-up guarantee (ReadAll, Read, Subscribe never show a position that
// a later commit undercuts) holds on a replica with a different gate. The
// primary's gate (pgschema.GateSetSQL) finds running appends through pg_locks, which a
// standby does not replicate; on a standby the gate is its snapshot's xmin
// instead. A hot standby counts every transaction ID it has seen in the WAL
// (and every lower ID not yet known to have ended) as running until it
// replays that transaction's commit or abort, so every appending transaction
// with an ID below the standby's xmin has ended on the primary as far as the
// replayed WAL shows, and will never commit later. Its cost: on a replica any
// transaction of the primary's cluster that holds a transaction ID (not only
// appends to this schema) holds the catch-up readers back until it ends.
//
// Freshness: a replica read is as current as the standby's replay. A read
// that must include a position waits for the replica (Replica.Replayed,
// Replica.ReaderAt), up to Config.ReplicaWait, and then reads the primary.

// replicaGateSetSQL is the catch-up gate on a standby: its snapshot's xmin
// (see "Read replicas" above).
const replicaGateSetSQL = `SELECT set_config('scribe.gate', pg_snapshot_xmin(pg_current_snapshot())::text, false)`

// ErrReplicaReadOnly is returned by every call that would write through a
// replica (NewReplica): appends, node sessions, leases and recorded types go
// to the primary.
var ErrReplicaReadOnly = errors.New("postgres: this journal reads from a replica and never writes; append, open node sessions and take leases through the primary journal")

// replicaOf is what a replica Journal knows of its primary.
type replicaOf struct {
	primary *Journal
}

// Replica is a Journal that reads from a streaming standby of its primary's
// database (NewReplica), with the calls that only a replica has: Primary,
// Replayed and ReaderAt. It is safe for concurrent use; Close (the
// Journal's) it before the primary.
type Replica struct {
	// Journal is the replica's journal: pass it (or the Replica) wherever a
	// journal.Journal only reads, as runtime.Config.Replica or to
	// projection.NewRunner.
	*Journal
}

// NewReplica returns a Replica that reads from pool, a connection pool to a
// streaming standby (a hot standby: pg_basebackup -R, or a managed read
// replica) of primary's database, with primary's configuration. It serves
// every read of journal.Reader and journal.Inspector, Subscribe (woken by the
// primary's notifications, since a standby delivers none) and the catch-up
// guarantee (see "Read replicas" in this file's documentation); writes fail
// with ErrReplicaReadOnly. It does no I/O. Close it before the primary.
func NewReplica(pool *pgxpool.Pool, primary *Journal) (*Replica, error) {
	if primary == nil {
		return nil, errors.New("postgres: NewReplica: the primary journal is nil; pass the Journal that NewJournal returned for the primary")
	}
	if primary.replica != nil {
		return nil, errors.New("postgres: NewReplica: the primary journal given is itself a replica; pass the primary's Journal")
	}
	if pool == primary.pool {
		return nil, errors.New("postgres: NewReplica: the pool is the primary's own; pass a pool connected to the standby")
	}
	j, err := NewJournal(pool, primary.cfg)
	if err != nil {
		return nil, err
	}
	j.replica = &replicaOf{primary: primary}
	return &Replica{Journal: j}, nil
}

// Primary returns the replica's primary Journal.
func (r *Replica) Primary() *Journal { return r.primary() }

// primary returns the primary Journal of a replica, or j itself when j is a
// primary.
func (j *Journal) primary() *Journal {
	if j.replica != nil {
		return j.replica.primary
	}
	return j
}

// writable fails with ErrReplicaReadOnly on a replica.
func (j *Journal) writable(op string) error {
	if j.replica != nil {
		return fmt.Errorf("%w (%s)", ErrReplicaReadOnly, op)
	}
	return nil
}

// gateSetStatement is the statement that sets the catch-up gate: pg_locks on
// the primary, the snapshot's xmin on a replica.
func (j *Journal) gateSetStatement() string {
	if j.replica != nil {
		return replicaGateSetSQL
	}
	return j.sql(pgschema.GateSetSQL)
}

// Replayed reports whether the replica shows every event up to pos (its
// gap-free head is at or past pos).
func (r *Replica) Replayed(ctx context.Context, pos journal.Position) (bool, error) {
	head, err := r.Head(ctx)
	if err != nil {
		return false, err
	}
	return !head.Before(pos), nil
}

// ReaderAt returns a journal that shows every event up to pos: the
// replica's own when it has replayed pos or does within Config.ReplicaWait
// (it checks every few milliseconds), the primary otherwise, so a read of
// one's own writes (a position Execute or Append returned) is never older
// than them.
func (r *Replica) ReaderAt(ctx context.Context, pos journal.Position) (*Journal, error) {
	deadline := time.Now().Add(r.cfg.ReplicaWait)
	polls := backoff.Backoff{Min: time.Millisecond, Max: 25 * time.Millisecond}
	for {
		ok, err := r.Replayed(ctx, pos)
		if err != nil {
			return nil, err
		}
		if ok {
			return r.Journal, nil
		}
		poll := polls.Next()
		if !time.Now().Add(poll).Before(deadline) {
			r.stats.replicaFallbacks.Add(1)
			return r.replica.primary, nil
		}
		if !backoff.Sleep(ctx, poll) {
			return nil, fmt.Errorf("postgres: waiting for the replica to replay position %s: %w", pos, ctx.Err())
		}
	}
}
