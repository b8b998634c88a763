package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

// PartitionMove moves one partition from a source schema to a target schema
// (usually on another Postgres server): MovePartition.
type PartitionMove struct {
	// Partition is the partition to move ("" means journal.DefaultPartition).
	Partition string
	// Source and Target are pools on the two databases. Required.
	Source, Target *pgxpool.Pool
	// SourceSchema and TargetSchema are the schemas (migrated to this
	// build's version). Default "scribe".
	SourceSchema, TargetSchema string
	// To is recorded in the source as where the partition went, and named
	// by the journal.PartitionMoveError its Acquire then returns: give the
	// partition map's member name of the target (a partitioned.Router
	// switches its map to the member of that name by itself). Default: the
	// target's address and schema.
	To string
	// BatchSize is how many events one copy transaction carries. Default
	// 1000.
	BatchSize int
	// Progress, when set, is called after each step and each copied batch
	// (on MovePartition's goroutine).
	Progress func(MoveProgress)
}

// MoveStep is a step of a partition move, in the order they run.
type MoveStep string

// The steps of a partition move. A move that stopped (a crash, a cancelled
// context) resumes at the step it stopped in when MovePartition runs again
// with the same partition, source and target.
const (
	// MovePrecopy: while the partition still serves commands (the target
	// already refuses its leases: 'incoming'), its events are copied up to
	// the source's read gate, so the fenced cut-over only copies the tail
	// appended meanwhile.
	MovePrecopy MoveStep = "precopy"
	// MoveFence: the source revokes every lease of the partition and
	// refuses new ones ('outgoing'): commands to the partition get a
	// retryable journal.ErrPartitionMoving until the switch.
	MoveFence MoveStep = "fence"
	// MoveCopy: the events appended since the pre-copy are copied, in the
	// source's position order, a batch per transaction, the progress
	// committed with each batch.
	MoveCopy MoveStep = "copy"
	// MoveStreams: stream heads (version, chain head) and snapshots are
	// copied.
	MoveStreams MoveStep = "streams"
	// MoveVerify: every stream's version and chain head equal the source's,
	// every chain verifies on the target, and the event counts are equal.
	MoveVerify MoveStep = "verify"
	// MoveSwitch: the source marks the partition moved (its Acquire names
	// the target: journal.ErrPartitionMoved) and the target serves it.
	MoveSwitch MoveStep = "switch"
	// MoveRetire: the source's copy (events, tag index, streams, snapshots)
	// is deleted.
	MoveRetire MoveStep = "retire"
	// MoveDone: nothing is left to do.
	MoveDone MoveStep = "done"
)

// MoveProgress reports a partition move's progress.
type MoveProgress struct {
	Partition string
	// Step is the step just completed (MoveCopy once per batch).
	Step MoveStep
	// Copied and Total count the partition's events copied and to copy.
	Copied, Total uint64
	// Streams is the number of streams copied (from MoveStreams on).
	Streams int
}

// MoveReport is the outcome of a completed partition move.
type MoveReport struct {
	Partition string
	Events    uint64
	Streams   int
	Snapshots int
	// Resumed reports that an earlier, interrupted run had done part of it.
	Resumed bool
}

// ErrMoveRefused is wrapped by the errors of a partition move that cannot
// start or continue as asked (a target already holding the partition, a
// partition with archived or retired streams, a source that changed). Not
// retryable without a change; the message says what to do.
var ErrMoveRefused = errors.New("postgres: partition move refused")

// mover runs one PartitionMove.
type mover struct {
	m      PartitionMove
	src    string // quoted schemas
	dst    string
	report MoveReport
	total  uint64
}

func (mv *mover) srcSQL(q string) string { return strings.ReplaceAll(q, "__S__.", mv.src+".") }
func (mv *mover) dstSQL(q string) string { return strings.ReplaceAll(q, "__S__.", mv.dst+".") }

func (mv *mover) progress(step MoveStep) {
	if mv.m.Progress != nil {
		mv.m.Progress(MoveProgress{Partition: mv.m.Partition, Step: step, Copied: mv.report.Events, Total: mv.total, Streams: mv.report.Streams})
	}
}

// MovePartition moves a partition from the source to the target: it copies
// its events in position order while the partition still serves commands
// (MovePrecopy), fences it (MoveFence), copies the events appended
// meanwhile, its streams' heads and its snapshots, verifies the copy,
// switches (the source then answers journal.ErrPartitionMoved naming
// PartitionMove.To) and deletes the source's copy. Commands to the partition meanwhile fail with
// a retryable journal.ErrPartitionMoving (a lease taken before the fence is
// refused at its next append with journal.ErrInvalidSession, also
// retryable); nothing acknowledged is lost and nothing is stored twice. It
// is resumable: run it again after a crash or a cancelled context and it
// continues where it stopped. Only appends made through leases (the
// runtime's) are fenced; an append without a lease to the partition during
// the move makes the switch fail (ErrMoveRefused) rather than lose it.
// Partitions with archived or retired streams are refused.
func MovePartition(ctx context.Context, m PartitionMove) (MoveReport, error) {
	if m.Source == nil || m.Target == nil {
		return MoveReport{}, fmt.Errorf("%w: MovePartition needs a Source and a Target pool", ErrMoveRefused)
	}
	if m.Partition == "" {
		m.Partition = journal.DefaultPartition
	}
	if m.SourceSchema == "" {
		m.SourceSchema = "scribe"
	}
	if m.TargetSchema == "" {
		m.TargetSchema = "scribe"
	}
	if m.BatchSize <= 0 {
		m.BatchSize = 1000
	}
	srcAddr := Address(m.Source.Config().ConnConfig) + " schema " + m.SourceSchema
	dstAddr := Address(m.Target.Config().ConnConfig) + " schema " + m.TargetSchema
	if m.To == "" {
		m.To = dstAddr
	}
	if srcAddr == dstAddr {
		return MoveReport{}, fmt.Errorf("%w: the source and the target are the same schema (%s); give another target", ErrMoveRefused, srcAddr)
	}
	mv := &mover{m: m, src: pgx.Identifier{m.SourceSchema}.Sanitize(), dst: pgx.Identifier{m.TargetSchema}.Sanitize()}
	mv.report.Partition = m.Partition
	state, err := mv.begin(ctx, srcAddr)
	if err != nil {
		return mv.report, err
	}
	for state != MoveDone {
		var next MoveStep
		switch state {
		case MovePrecopy:
			next, err = MoveFence, mv.copyEvents(ctx, true)
		case MoveFence:
			next, err = MoveCopy, mv.fence(ctx)
		case MoveCopy:
			next, err = MoveStreams, mv.copyEvents(ctx, false)
		case MoveStreams:
			next, err = MoveVerify, mv.copyStreams(ctx)
		case MoveVerify:
			next, err = MoveSwitch, mv.verify(ctx)
		case MoveSwitch:
			next, err = MoveRetire, mv.switchOver(ctx)
		case MoveRetire:
			next, err = MoveDone, mv.retire(ctx)
		default:
			return mv.report, fmt.Errorf("%w: the target records the move of partition %q in an unknown state %q", ErrMoveRefused, m.Partition, state)
		}
		if err != nil {
			return mv.report, fmt.Errorf("postgres: moving partition %q from %s to %s, step %s: %w", m.Partition, srcAddr, dstAddr, state, err)
		}
		if _, err := m.Target.Exec(ctx, mv.dstSQL(`UPDATE __S__.partition_moves SET state = $2, updated_at = now() WHERE partition = $1`), m.Partition, string(next)); err != nil {
			return mv.report, fmt.Errorf("postgres: moving partition %q: recording step %s on the target: %w", m.Partition, next, err)
		}
		if state != MoveCopy && state != MovePrecopy {
			mv.progress(state)
		}
		state = next
	}
	mv.progress(MoveDone)
	return mv.report, nil
}

// begin reads (or creates) the move's record on the target and returns the
// step to run.
func (mv *mover) begin(ctx context.Context, srcAddr string) (MoveStep, error) {
	p := mv.m.Partition
	var state string
	var copied int64
	err := mv.m.Target.QueryRow(ctx, mv.dstSQL(`SELECT state, copied FROM __S__.partition_moves WHERE partition = $1`), p).Scan(&state, &copied)
	switch {
	case err == nil:
		mv.report.Resumed = true
		mv.report.Events = uint64(copied)
		if err := mv.countTotal(ctx); err != nil && state != string(MoveDone) && state != string(MoveRetire) {
			return "", err
		}
		return MoveStep(state), nil
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("postgres: reading the move of partition %q on the target: %w", p, err)
	}
	var onTarget int64
	if err := mv.m.Target.QueryRow(ctx, mv.dstSQL(`SELECT count(*) FROM __S__.streams WHERE partition = $1 AND version > 0`), p).Scan(&onTarget); err != nil {
		return "", err
	}
	if onTarget > 0 {
		return "", fmt.Errorf("%w: the target already holds %d stream(s) of partition %q; move it to a database that does not serve it", ErrMoveRefused, onTarget, p)
	}
	var fenced string
	err = mv.m.Source.QueryRow(ctx, mv.srcSQL(`SELECT state FROM __S__.partition_fences WHERE partition = $1`), p).Scan(&fenced)
	switch {
	case err == nil:
		return "", fmt.Errorf("%w: partition %q is already %s on the source, but the target has no record of moving it; resume the move against the target it was started with", ErrMoveRefused, p, fenced)
	case !errors.Is(err, pgx.ErrNoRows):
		return "", err
	}
	var special int64
	if err := mv.m.Source.QueryRow(ctx, mv.srcSQL(`SELECT count(*) FROM __S__.streams WHERE partition = $1 AND (cut_version > 0 OR retired)`), p).Scan(&special); err != nil {
		return "", err
	}
	if special > 0 {
		return "", fmt.Errorf("%w: partition %q has %d stream(s) with archived events or a tombstone, which a move does not carry; it cannot be moved", ErrMoveRefused, p, special)
	}
	if err := mv.countTotal(ctx); err != nil {
		return "", err
	}
	tx, err := mv.m.Target.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, mv.dstSQL(`INSERT INTO __S__.partition_moves (partition, source, state) VALUES ($1, $2, $3)`), p, srcAddr, string(MovePrecopy)); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, mv.dstSQL(`INSERT INTO __S__.partition_fences (partition, state, moved_to) VALUES ($1, 'incoming', '')`), p); err != nil {
		return "", err
	}
	return MovePrecopy, tx.Commit(ctx)
}

func (mv *mover) countTotal(ctx context.Context) error {
	var n int64
	if err := mv.m.Source.QueryRow(ctx, mv.srcSQL(`SELECT count(*) FROM __S__.events WHERE partition = $1`), mv.m.Partition).Scan(&n); err != nil {
		return err
	}
	mv.total = uint64(n)
	return nil
}

// fence revokes every lease of the partition on the source and refuses new
// ones. The SHARE ROW EXCLUSIVE lock on streams waits for the appends and
// Acquires in flight (they write streams rows) and holds new ones off until
// the fence commits: an append claimed before it is copied; any later one
// finds its lease's epoch gone.
func (mv *mover) fence(ctx context.Context) error {
	tx, err := mv.m.Source.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, mv.srcSQL(`LOCK TABLE __S__.streams IN SHARE ROW EXCLUSIVE MODE`)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, mv.srcSQL(`INSERT INTO __S__.partition_fences (partition, state, moved_to) VALUES ($1, 'outgoing', $2)
		ON CONFLICT (partition) DO NOTHING`), mv.m.Partition, mv.m.To); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, mv.srcSQL(`UPDATE __S__.streams SET released = true, epoch = nextval('__S__.stream_epochs')
		WHERE partition = $1 AND lease_node IS NOT NULL`), mv.m.Partition); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return mv.countTotal(ctx) // final now: nothing is appended through a lease any more
}

// copyEvents copies the partition's events after the recorded progress, in
// the source's position order, one transaction per batch on the target
// (which also records the progress): positions on the target keep the
// source's order. Gated (the pre-copy, while the partition takes appends),
// it reads only below the source's read gate (gateSetSQL), below which no
// later commit can add an event, and stops once a batch comes back short;
// after the fence every append has ended and it reads to the end.
func (mv *mover) copyEvents(ctx context.Context, gated bool) error {
	p := mv.m.Partition
	step := MoveCopy
	read := mv.srcSQL(`SELECT commit_xid, seq, id, type, schema_version, tags, versions, prev_hashes, hashes,
				data, metadata, correlation_id, recorded_at
			FROM __S__.events WHERE partition = $1 AND (commit_xid, seq) > ($2, $3) ORDER BY commit_xid, seq LIMIT $4`)
	var conn *pgxpool.Conn
	if gated {
		step = MovePrecopy
		read = mv.srcSQL(`SELECT commit_xid, seq, id, type, schema_version, tags, versions, prev_hashes, hashes,
				data, metadata, correlation_id, recorded_at
			FROM __S__.events WHERE partition = $1 AND (commit_xid, seq) > ($2, $3) AND commit_xid < ` + gateSQL + `
			ORDER BY commit_xid, seq LIMIT $4`)
		var err error
		if conn, err = mv.m.Source.Acquire(ctx); err != nil {
			return err
		}
		defer conn.Release()
	}
	for {
		var lastCommit, lastSeq int64
		if err := mv.m.Target.QueryRow(ctx, mv.dstSQL(`SELECT last_commit, last_seq FROM __S__.partition_moves WHERE partition = $1`), p).Scan(&lastCommit, &lastSeq); err != nil {
			return err
		}
		var rows pgx.Rows
		var err error
		if gated {
			// The gate is a session setting: set and read on one connection.
			if _, err := conn.Exec(ctx, mv.srcSQL(gateSetSQL)); err != nil {
				return err
			}
			rows, err = conn.Query(ctx, read, p, lastCommit, lastSeq, mv.m.BatchSize)
		} else {
			rows, err = mv.m.Source.Query(ctx, read, p, lastCommit, lastSeq, mv.m.BatchSize)
		}
		if err != nil {
			return err
		}
		type row struct {
			commit, seq    int64
			id             [16]byte
			typ            string
			sv             int32
			tags           []string
			versions       []int64
			prev, hashes   []byte
			data, metadata []byte
			corr           *string
			recordedAt     time.Time
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.commit, &r.seq, &r.id, &r.typ, &r.sv, &r.tags, &r.versions, &r.prev, &r.hashes,
				&r.data, &r.metadata, &r.corr, &r.recordedAt); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		tx, err := mv.m.Target.Begin(ctx)
		if err != nil {
			return err
		}
		// As an append does, take ROW EXCLUSIVE on events before the
		// transaction gets its ID: the read gate then holds readers below
		// the copy until it commits.
		if _, err := tx.Exec(ctx, mv.dstSQL(`LOCK TABLE __S__.events IN ROW EXCLUSIVE MODE`)); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return err
		}
		insert := mv.dstSQL(`WITH e AS (
			INSERT INTO __S__.events (commit_xid, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
				data, metadata, correlation_id, recorded_at)
			VALUES (pg_current_xact_id()::text::bigint, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			RETURNING commit_xid, seq, tags, versions, type
		)
		INSERT INTO __S__.event_tags (partition, tag, version, commit_xid, seq, type)
		SELECT $2, t.tag, t.version, e.commit_xid, e.seq, e.type FROM e, unnest(e.tags, e.versions) AS t(tag, version)`)
		b := &pgx.Batch{}
		for _, r := range batch {
			b.Queue(insert, r.id, p, r.typ, r.sv, r.tags, r.versions, r.prev, r.hashes, r.data, r.metadata, r.corr, r.recordedAt)
		}
		last := batch[len(batch)-1]
		b.Queue(mv.dstSQL(`UPDATE __S__.partition_moves SET last_commit = $2, last_seq = $3, copied = copied + $4, updated_at = now() WHERE partition = $1`),
			p, last.commit, last.seq, int64(len(batch)))
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		mv.report.Events += uint64(len(batch))
		mv.progress(step)
		if gated && len(batch) < mv.m.BatchSize {
			return nil // caught up with the gate: the rest is the cut-over's
		}
	}
}

// copyStreams copies the heads of the partition's streams (version and
// chain head; first and last positions are the target's) and its
// snapshots, in one transaction on the target. Idempotent.
func (mv *mover) copyStreams(ctx context.Context) error {
	p := mv.m.Partition
	heads, err := mv.sourceHeads(ctx)
	if err != nil {
		return err
	}
	tx, err := mv.m.Target.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	b := &pgx.Batch{}
	for tag, h := range heads {
		b.Queue(mv.dstSQL(`INSERT INTO __S__.streams (partition, tag, version, head_hash, first_commit, first_seq, last_commit, last_seq)
			SELECT $1, $2, $3, $4, f.commit_xid, f.seq, l.commit_xid, l.seq
			FROM __S__.event_tags f, __S__.event_tags l
			WHERE f.partition = $1 AND f.tag = $2 AND f.version = 1 AND l.partition = $1 AND l.tag = $2 AND l.version = $3
			ON CONFLICT (partition, tag) DO UPDATE SET version = excluded.version, head_hash = excluded.head_hash,
				first_commit = excluded.first_commit, first_seq = excluded.first_seq,
				last_commit = excluded.last_commit, last_seq = excluded.last_seq`), p, tag, h.version, h.hash)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	rows, err := mv.m.Source.Query(ctx, mv.srcSQL(`SELECT tag, version, schema_version, state, created_at FROM __S__.snapshots WHERE partition = $1`), p)
	if err != nil {
		return err
	}
	sb := &pgx.Batch{}
	snaps := 0
	for rows.Next() {
		var (
			tag     string
			version int64
			sv      int32
			state   []byte
			created time.Time
		)
		if err := rows.Scan(&tag, &version, &sv, &state, &created); err != nil {
			rows.Close()
			return err
		}
		sb.Queue(mv.dstSQL(`INSERT INTO __S__.snapshots (partition, tag, version, schema_version, state, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`), p, tag, version, sv, state, created)
		snaps++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if snaps > 0 {
		if err := tx.SendBatch(ctx, sb).Close(); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	mv.report.Streams, mv.report.Snapshots = len(heads), snaps
	return nil
}

type streamHead struct {
	version int64
	hash    []byte
}

func (mv *mover) sourceHeads(ctx context.Context) (map[string]streamHead, error) {
	return readHeads(ctx, mv.m.Source, mv.srcSQL(`SELECT tag, version, head_hash FROM __S__.streams WHERE partition = $1 AND version > 0`), mv.m.Partition)
}

func readHeads(ctx context.Context, pool *pgxpool.Pool, q, partition string) (map[string]streamHead, error) {
	rows, err := pool.Query(ctx, q, partition)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]streamHead{}
	for rows.Next() {
		var tag string
		var h streamHead
		if err := rows.Scan(&tag, &h.version, &h.hash); err != nil {
			return nil, err
		}
		out[tag] = h
	}
	return out, rows.Err()
}
