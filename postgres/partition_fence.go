package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
)

// partitionFence returns the *journal.PartitionMoveError of a partition
// under a move fence in this schema, nil when there is none. Acquire asks
// only after its claim found nothing to take.
func (j *Journal) partitionFence(ctx context.Context, partition string) error {
	var state, to string
	err := j.pool.QueryRow(ctx, j.sql(`SELECT state, moved_to FROM __S__.partition_fences WHERE partition = $1`), partition).Scan(&state, &to)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return j.translate("acquire", err)
	}
	if to == "" {
		to = "another database"
	}
	return &journal.PartitionMoveError{Partition: partition, To: to, Moved: state == "moved"}
}

// movedAway returns the *journal.PartitionMoveError (ErrPartitionMoved) of a
// partition this schema no longer holds since a move, nil otherwise. Reads
// ask only when they found nothing (TagSummary of an unknown stream,
// ReadStream of an empty one, a partition's Read or TagsOfGroup without
// results), so a reader that still sends the partition
// here learns where it went instead of seeing it empty.
func (j *Journal) movedAway(ctx context.Context, partition string) error {
	err := j.partitionFence(ctx, partition)
	var pm *journal.PartitionMoveError
	if errors.As(err, &pm) && !pm.Moved {
		return nil // still here while it moves
	}
	return err
}

// verify checks the copy on the target against the fenced source: equal
// event counts, every stream at the source's version and chain head, and
// every chain verified on the target.
func (mv *mover) verify(ctx context.Context) error {
	p := mv.m.Partition
	var src, dst int64
	if err := mv.m.Source.QueryRow(ctx, mv.srcSQL(`SELECT count(*) FROM __S__.events WHERE partition = $1`), p).Scan(&src); err != nil {
		return err
	}
	if err := mv.m.Target.QueryRow(ctx, mv.dstSQL(`SELECT count(*) FROM __S__.events WHERE partition = $1`), p).Scan(&dst); err != nil {
		return err
	}
	if src != dst {
		return fmt.Errorf("%w: the source holds %d events of the partition and the target %d after the copy; an append without a lease reached the source during the move, or the target was written to: inspect both, then run the move again", ErrMoveRefused, src, dst)
	}
	want, err := mv.sourceHeads(ctx)
	if err != nil {
		return err
	}
	got, err := readHeads(ctx, mv.m.Target, mv.dstSQL(`SELECT tag, version, head_hash FROM __S__.streams WHERE partition = $1 AND version > 0`), p)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("%w: the source has %d streams in the partition and the target %d after the copy", ErrMoveRefused, len(want), len(got))
	}
	j, err := NewJournal(mv.m.Target, Config{Schema: mv.m.TargetSchema})
	if err != nil {
		return err
	}
	defer func() { _ = j.Close() }()
	for tag, w := range want {
		g, ok := got[tag]
		if !ok || g.version != w.version || !bytes.Equal(g.hash, w.hash) {
			return fmt.Errorf("%w: stream %s/%s is at version %d on the source but %d on the target, or its chain head differs", ErrMoveRefused, p, tag, w.version, g.version)
		}
		n, err := journal.VerifyStream(ctx, j, journal.StreamID{Partition: p, Tag: journal.Tag(tag)})
		if err != nil {
			return fmt.Errorf("verifying stream %s/%s on the target: %w", p, tag, err)
		}
		if int64(n) != w.version {
			return fmt.Errorf("%w: stream %s/%s verified %d events on the target, want %d", ErrMoveRefused, p, tag, n, w.version)
		}
	}
	mv.report.Streams = len(want)
	return nil
}

// switchOver marks the partition moved on the source (its Acquire then
// names the target) and lifts the target's fence. The source's count is
// checked again under a lock that holds every append off: an append
// without a lease since the verification makes it fail.
func (mv *mover) switchOver(ctx context.Context) error {
	p := mv.m.Partition
	var dst int64
	if err := mv.m.Target.QueryRow(ctx, mv.dstSQL(`SELECT count(*) FROM __S__.events WHERE partition = $1`), p).Scan(&dst); err != nil {
		return err
	}
	tx, err := mv.m.Source.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, mv.srcSQL(`LOCK TABLE __S__.events IN SHARE MODE`)); err != nil {
		return err
	}
	var src int64
	if err := tx.QueryRow(ctx, mv.srcSQL(`SELECT count(*) FROM __S__.events WHERE partition = $1`), p).Scan(&src); err != nil {
		return err
	}
	if src != dst {
		return fmt.Errorf("%w: the source holds %d events of the partition and the target %d; an append without a lease reached the source during the move: inspect both, then run the move again", ErrMoveRefused, src, dst)
	}
	if _, err := tx.Exec(ctx, mv.srcSQL(`UPDATE __S__.partition_fences SET state = 'moved', moved_to = $2, since = now() WHERE partition = $1`), p, mv.m.To); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	_, err = mv.m.Target.Exec(ctx, mv.dstSQL(`DELETE FROM __S__.partition_fences WHERE partition = $1 AND state = 'incoming'`), p)
	return err
}

// retire deletes the source's copy of the partition, in one transaction;
// its 'moved' fence stays.
func (mv *mover) retire(ctx context.Context) error {
	tx, err := mv.m.Source.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, table := range []string{"event_tags", "events", "streams", "snapshots"} {
		if _, err := tx.Exec(ctx, mv.srcSQL(`DELETE FROM __S__.`+table+` WHERE partition = $1`), mv.m.Partition); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
