package pgadmin

import "github.com/scribe-es/scribe/postgres/internal/pgschema"

// WithMoveTestPoint returns m with f called at the move's test points:
// "switch: locked" (the switch holds the archiver's and the partition's
// locks on the source), "switch: source committed" and "retire: source
// committed" (a step committed on the source, not yet recorded on the
// target). An error f returns stops the move there, as a crash would.
func WithMoveTestPoint(m PartitionMove, f func(point string) error) PartitionMove {
	m.testPoint = f
	return m
}

// PartitionLockKey is the advisory lock key every append to partition p of
// schema takes shared and a move's copy, switch and retire take exclusive.
func PartitionLockKey(schema, p string) int64 {
	return pgschema.New(schema).LockKey(pgschema.LockPartition, p, "")
}
