package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
)

// Fencing (the package documentation's summary, in full).
//
// One statement claims an append's versions: it raises each touched stream's
// version by its event count only where the version is the one the append's
// checks saw and the lease's node, incarnation and epoch are the stream's
// current, unreleased holder whose node session is open and unexpired by
// clock_timestamp(). Every failure is reported per stream as a
// *journal.SessionError (ErrInvalidSession / ErrSessionExpired) or a
// *journal.VersionMismatchError.
// (partition, tag, version) is the primary key of event_tags: a unique
// violation there is reported as ErrVersionMismatch.
//
// Sessions: nodes(node_id, incarnation, expires_at, closed) is renewed by one
// UPDATE per node, whatever the number of its leases; a stream lease is valid
// only while its node session is. Acquire is one conditional upsert that grants
// (a new epoch from the stream_epochs sequence) when the stream is free, released, held by a dead or superseded
// session or by the same node ID; otherwise it waits for a lease change
// (Release, CloseNode, a superseding OpenNode: one coalesced NOTIFY on the
// schema's lease channel, like the commits' one) or the holder's expiry by the
// database clock, at most AcquirePollInterval (1 s) between tries, until the
// wait ends with ErrOpenTimeout naming the holder. So streams waiting for a
// dead node's leases cost a query or two each per second, not forty.

// OpenNode starts a new incarnation of nodeID; see journal.Sessions. The
// session expires timeout after now by the database clock unless renewed.
func (j *Journal) OpenNode(ctx context.Context, nodeID string, timeout time.Duration) (journal.NodeSession, error) {
	if err := j.checkOpen(); err != nil {
		return journal.NodeSession{}, err
	}
	if err := j.writable("OpenNode"); err != nil {
		return journal.NodeSession{}, err
	}
	if err := backend.ValidateNodeSession(nodeID, timeout); err != nil {
		return journal.NodeSession{}, fmt.Errorf("postgres: OpenNode: %w", err)
	}
	var inc int64
	var exp time.Time
	err := j.pool.QueryRow(ctx, j.sql(`INSERT INTO __S__.nodes (node_id, incarnation, timeout_us, expires_at, closed, opened_at)
		VALUES ($1, 1, $2::bigint, clock_timestamp() + $2::bigint * interval '1 microsecond', false, clock_timestamp())
		ON CONFLICT (node_id) DO UPDATE SET incarnation = __S__.nodes.incarnation + 1, timeout_us = excluded.timeout_us,
			expires_at = excluded.expires_at, closed = false, opened_at = excluded.opened_at
		RETURNING incarnation, expires_at`), nodeID, timeout.Microseconds()).Scan(&inc, &exp)
	if err != nil {
		return journal.NodeSession{}, j.translate("open node", err)
	}
	if inc > 1 {
		// A new incarnation supersedes the old one: its leases are free.
		j.leasesChanged()
	}
	return journal.NodeSession{NodeID: nodeID, Incarnation: uint64(inc), Timeout: timeout, ExpiresAt: exp.UTC()}, nil
}

// RenewNode extends the node session by its timeout from now (database clock).
func (j *Journal) RenewNode(ctx context.Context, node journal.NodeSession) (journal.NodeSession, error) {
	if err := j.checkOpen(); err != nil {
		return journal.NodeSession{}, err
	}
	if err := j.writable("RenewNode"); err != nil {
		return journal.NodeSession{}, err
	}
	var exp time.Time
	err := j.pool.QueryRow(ctx, j.sql(`UPDATE __S__.nodes SET expires_at = clock_timestamp() + timeout_us * interval '1 microsecond'
		WHERE node_id = $1 AND incarnation = $2 AND NOT closed AND expires_at > clock_timestamp()
		RETURNING expires_at`), node.NodeID, int64(node.Incarnation)).Scan(&exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return journal.NodeSession{}, j.nodeError(ctx, node, "renew")
	}
	if err != nil {
		return journal.NodeSession{}, j.translate("renew node", err)
	}
	node.ExpiresAt = exp.UTC()
	return node, nil
}

// nodeError explains why node is not a live session.
func (j *Journal) nodeError(ctx context.Context, node journal.NodeSession, op string) error {
	var inc int64
	var closed, live bool
	err := j.pool.QueryRow(ctx, j.sql(`SELECT incarnation, closed, expires_at > clock_timestamp() FROM __S__.nodes WHERE node_id = $1`),
		node.NodeID).Scan(&inc, &closed, &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s: node %s has no session; call OpenNode first", journal.ErrInvalidSession, op, node.NodeID)
	case err != nil:
		return j.translate(op+" node", err)
	case inc != int64(node.Incarnation):
		return fmt.Errorf("%w (%w): %s: node %s incarnation %d was superseded by incarnation %d; this process must stop writing", journal.ErrInvalidSession, journal.ErrNodeSuperseded, op, node.NodeID, node.Incarnation, inc)
	case closed:
		return fmt.Errorf("%w: %s: node session %s incarnation %d was closed; open a new one", journal.ErrInvalidSession, op, node.NodeID, node.Incarnation)
	case !live:
		return fmt.Errorf("%w: %s: node session %s incarnation %d expired; its leases may be taken over, so open a new session and reacquire", journal.ErrSessionExpired, op, node.NodeID, node.Incarnation)
	}
	return nil
}

// CloseNode ends the node session. Its leases become free at once: a lease is
// valid only while its node session is open, so no stream row is touched.
func (j *Journal) CloseNode(ctx context.Context, node journal.NodeSession) error {
	if err := j.checkOpen(); err != nil {
		return err
	}
	if err := j.writable("CloseNode"); err != nil {
		return err
	}
	ct, err := j.pool.Exec(ctx, j.sql(`UPDATE __S__.nodes SET closed = true WHERE node_id = $1 AND incarnation = $2`),
		node.NodeID, int64(node.Incarnation))
	if err != nil {
		return j.translate("close node", err)
	}
	if ct.RowsAffected() == 0 {
		if err := j.nodeError(ctx, node, "close"); err != nil {
			return err
		}
		return nil
	}
	j.leasesChanged()
	return nil
}

// acquireSQL grants a stream's lease to a live node session when the stream is
// new, released, held by a dead (expired, closed or superseded) session, or
// held by the same node ID at an older or the same incarnation; the epoch goes
// up by one, and leased_at records when (database clock). It returns no row when another live session holds the stream or
// the acquiring session itself is not live.
const acquireSQL = `INSERT INTO __S__.streams AS s (partition, tag, lease_node, lease_incarnation, epoch, released, leased_at)
SELECT $1, $2, $3, $4, nextval('__S__.stream_epochs'), false, clock_timestamp()
WHERE EXISTS (SELECT 1 FROM __S__.nodes n WHERE n.node_id = $3 AND n.incarnation = $4 AND NOT n.closed AND n.expires_at > clock_timestamp())
  AND NOT EXISTS (SELECT 1 FROM __S__.partition_fences f WHERE f.partition = $1)
ON CONFLICT (partition, tag) DO UPDATE SET lease_node = excluded.lease_node, lease_incarnation = excluded.lease_incarnation,
	epoch = excluded.epoch, released = false, leased_at = excluded.leased_at
WHERE s.lease_node IS NULL OR s.released
   OR (s.lease_node = excluded.lease_node AND s.lease_incarnation <= excluded.lease_incarnation)
   OR NOT EXISTS (SELECT 1 FROM __S__.nodes n WHERE n.node_id = s.lease_node AND n.incarnation = s.lease_incarnation
		AND NOT n.closed AND n.expires_at > clock_timestamp())
RETURNING epoch`

// Acquire takes the lease of stream for node; see journal.Sessions. While
// another live node holds it, Acquire waits for a lease change (NOTIFY) or the
// holder's expiry by the database clock, at most AcquirePollInterval between
// tries, and after wait fails with ErrOpenTimeout naming the holder. A stream
// of a partition under a move fence fails at once with a
// *journal.PartitionMoveError (ErrPartitionMoving while it moves, retryable;
// ErrPartitionMoved naming where it is served once moved).
func (j *Journal) Acquire(ctx context.Context, node journal.NodeSession, stream journal.StreamID, wait time.Duration) (journal.Lease, error) {
	if err := j.checkOpen(); err != nil {
		return journal.Lease{}, err
	}
	if err := j.writable("Acquire"); err != nil {
		return journal.Lease{}, err
	}
	stream = stream.Normalize()
	if stream.Tag == "" {
		return journal.Lease{}, fmt.Errorf("%w: acquire: the stream tag is empty; name the stream to lease", journal.ErrInvalidSession)
	}
	deadline := time.Now().Add(wait)
	stmt := j.sql(acquireSQL)
	var timer *time.Timer
	for {
		// Taken before the attempt: a lease freed after the attempt
		// has looked closes this channel.
		changed := j.leaseWake.wait()
		epoch, err := j.tryAcquire(ctx, stmt, stream, node)
		if err == nil {
			return journal.Lease{Stream: stream, NodeID: node.NodeID, Incarnation: node.Incarnation, Epoch: uint64(epoch)}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return journal.Lease{}, j.translate("acquire", err)
		}
		if ferr := j.partitionFence(ctx, stream.Partition); ferr != nil {
			return journal.Lease{}, ferr
		}
		if nerr := j.nodeError(ctx, node, "acquire"); nerr != nil {
			return journal.Lease{}, nerr
		}
		left := time.Until(deadline)
		if left <= 0 {
			return journal.Lease{}, j.openTimeout(ctx, stream, wait)
		}
		j.startListener()
		j.stats.acquireWaits.Add(1)
		d, err := j.holderLeft(ctx, stream)
		if err != nil {
			return journal.Lease{}, err
		}
		d = min(d, j.cfg.AcquirePollInterval, left)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return journal.Lease{}, fmt.Errorf("postgres: acquire stream %s: %w", stream, ctx.Err())
		case <-j.closed:
			return journal.Lease{}, j.checkOpen()
		case <-changed:
		case <-timer.C:
		}
	}
}

// tryAcquire runs acquireSQL once under the partition's advisory lock,
// shared (a move's fence takes it exclusive), taken by a statement of its
// own before it in one implicit transaction and one round trip, so that
// acquireSQL reads after the lock: an Acquire that waited for a fence sees
// the fence's row. pgx.ErrNoRows: nothing to take.
func (j *Journal) tryAcquire(ctx context.Context, stmt string, stream journal.StreamID, node journal.NodeSession) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock_shared($1)`, j.lockKey(lockPartition, stream.Partition, ""))
	b.Queue(stmt, stream.Partition, string(stream.Tag), node.NodeID, int64(node.Incarnation))
	br := j.pool.SendBatch(ctx, b)
	var epoch int64
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&epoch)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return epoch, err
}

// acquireRetryMin is the least time Acquire waits between two tries, so a
// holder whose session is about to expire by the database clock (or a state
// the next try resolves) costs a few queries, not a loop.
const acquireRetryMin = 2 * time.Millisecond

// holderLeft returns how long the current holder of stream's lease stays live
// unless renewed, by the database clock (at least acquireRetryMin; just that
// when the stream has no live holder any more: the next try takes it).
func (j *Journal) holderLeft(ctx context.Context, stream journal.StreamID) (time.Duration, error) {
	var us int64
	err := j.pool.QueryRow(ctx, j.sql(`SELECT greatest(0, floor(extract(epoch FROM n.expires_at - clock_timestamp()) * 1000000))::bigint
		FROM __S__.streams s JOIN __S__.nodes n ON n.node_id = s.lease_node AND n.incarnation = s.lease_incarnation
		WHERE s.partition = $1 AND s.tag = $2 AND NOT s.released AND NOT n.closed`),
		stream.Partition, string(stream.Tag)).Scan(&us)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return acquireRetryMin, nil
	case err != nil:
		return 0, j.translate("acquire", err)
	}
	return max(time.Duration(us)*time.Microsecond, acquireRetryMin), nil
}

func (j *Journal) openTimeout(ctx context.Context, stream journal.StreamID, wait time.Duration) error {
	var node *string
	var inc *int64
	var epoch int64
	err := j.pool.QueryRow(ctx, j.sql(`SELECT lease_node, lease_incarnation, epoch FROM __S__.streams WHERE partition = $1 AND tag = $2`),
		stream.Partition, string(stream.Tag)).Scan(&node, &inc, &epoch)
	holder := "another node"
	if err == nil && node != nil && inc != nil {
		holder = fmt.Sprintf("node %s incarnation %d (epoch %d)", *node, *inc, epoch)
	}
	return fmt.Errorf("%w: stream %s is held by %s, still live after waiting %s; retry later or wait for its session to expire", journal.ErrOpenTimeout, stream, holder, wait)
}

// Release gives the lease up; a lease that is no longer current is ignored.
func (j *Journal) Release(ctx context.Context, lease journal.Lease) error {
	if err := j.checkOpen(); err != nil {
		return err
	}
	if err := j.writable("Release"); err != nil {
		return err
	}
	lease.Stream = lease.Stream.Normalize()
	// A stream without events (version 0: a command for an account that
	// does not exist) is deleted rather than marked released, so nothing
	// stays behind. Its next lease starts at epoch 1 again; no old lease can
	// pass for it, because the append's fence also compares the holder's node
	// ID and incarnation. A concurrent append that gives the stream its first
	// event holds the row lock first or after: READ COMMITTED re-checks
	// version = 0 on the row it waited for, so a stream with events is never
	// deleted.
	_, err := j.pool.Exec(ctx, j.sql(`WITH gone AS (
			DELETE FROM __S__.streams
			WHERE partition = $1 AND tag = $2 AND lease_node = $3 AND lease_incarnation = $4 AND epoch = $5 AND NOT released AND version = 0
			RETURNING 1)
		UPDATE __S__.streams SET released = true
		WHERE partition = $1 AND tag = $2 AND lease_node = $3 AND lease_incarnation = $4 AND epoch = $5 AND NOT released
			AND NOT EXISTS (SELECT 1 FROM gone)`),
		lease.Stream.Partition, string(lease.Stream.Tag), lease.NodeID, int64(lease.Incarnation), int64(lease.Epoch))
	if err != nil {
		return j.translate("release", err)
	}
	j.leasesChanged()
	return nil
}
