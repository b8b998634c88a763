package journal

import (
	"errors"
	"fmt"
)

// Errors of a partition that is moving, or has moved, to another database
// (a partition move: pgadmin.MovePartition, `scribe partition move`).
var (
	// ErrPartitionMoving: the partition is being moved between databases
	// (its streams are fenced for the cut-over); a lease cannot be taken
	// now. Errors matching it also match ErrUnavailable: retry in a few
	// seconds, and the command then runs where the partition lives.
	ErrPartitionMoving = errors.New("journal: partition is moving to another database")
	// ErrPartitionMoved: the partition was moved to another database and
	// this one no longer serves it. Not retryable here: send the
	// partition's streams to the database PartitionMoveError.To names
	// (update the partition map).
	ErrPartitionMoved = errors.New("journal: partition moved to another database")
)

// PartitionMoveError details ErrPartitionMoving (Moved false) and
// ErrPartitionMoved (Moved true).
type PartitionMoveError struct {
	Partition string
	// To names the database the partition moves or moved to, as the move
	// recorded it (a partition map's member name, or an address without
	// credentials).
	To string
	// Moved reports that the move is complete on this database: it holds
	// nothing of the partition any more.
	Moved bool
}

func (e *PartitionMoveError) Error() string {
	if e.Moved {
		return fmt.Sprintf("journal: partition %q moved to %s and this database no longer serves it; map the partition to %s on every node", e.Partition, e.To, e.To)
	}
	return fmt.Sprintf("journal: partition %q is moving to %s: its streams are fenced for the cut-over; retry in a few seconds", e.Partition, e.To)
}

// Is matches ErrPartitionMoved when Moved, otherwise ErrPartitionMoving and
// ErrUnavailable (retryable).
func (e *PartitionMoveError) Is(target error) bool {
	if e.Moved {
		return target == ErrPartitionMoved
	}
	return target == ErrPartitionMoving || target == ErrUnavailable
}
