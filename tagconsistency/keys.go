package tagconsistency

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/internal/idempotency"
	"github.com/scribe-es/scribe/journal"
)

// idempotentID derives the ID of the index-th event of an execution with key
// (package idempotency: the scheme aggregate commands use, in the DCB
// namespace, scoped by the command's name).
func idempotentID(partition, command, key string, index int) uuid.UUID {
	return idempotency.EventID(idempotency.DCB, partition, command, key, index)
}

// stored returns the records of an earlier execution of command with key:
// the events whose IDs were derived from the key, in index order.
func (x *Executor) stored(ctx context.Context, partition, command, key string) ([]journal.Record, bool, error) {
	var out []journal.Record
	for i := 0; ; i++ {
		r, err := x.journal.ReadEvent(ctx, idempotentID(partition, command, key, i))
		if errors.Is(err, journal.ErrNotFound) {
			return out, len(out) > 0, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("tagconsistency: command %q: looking up idempotency key %q: %w", command, key, err)
		}
		out = append(out, r)
	}
}
