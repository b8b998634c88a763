package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
)

// partitionFence returns the *journal.PartitionMoveError of a partition
// under a move fence in this schema, nil when there is none: 'moved' names
// where it went (ErrPartitionMoved); 'outgoing' is ErrPartitionMoving
// (retryable); 'incoming' is ErrPartitionMoving too, or, while the
// partition is moving back in after an earlier move out (the fence still
// names where it went), ErrPartitionMoved naming that database, which
// serves it until the move's switch. Acquire asks only after its claim
// found nothing to take.
func (j *Journal) partitionFence(ctx context.Context, partition string) error {
	var state, to string
	err := j.pool.QueryRow(ctx, j.sql(`SELECT state, moved_to FROM __S__.partition_fences WHERE partition = $1`), partition).Scan(&state, &to)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return j.translate("acquire", err)
	}
	moved := state == "moved" || (state == "incoming" && to != "")
	if to == "" {
		to = "another database"
	}
	return &journal.PartitionMoveError{Partition: partition, To: to, Moved: moved}
}

// movedAway returns the *journal.PartitionMoveError (ErrPartitionMoved) of a
// partition this schema does not serve since a move, nil otherwise. Reads
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
