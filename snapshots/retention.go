package snapshots

import (
	"context"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// StreamSummary summarizes the snapshots of one stream.
type StreamSummary struct {
	Stream journal.StreamID
	// Count is how many snapshots the stream has (at least 1).
	Count int
	// Oldest and Newest are the lowest and highest snapshot versions.
	Oldest, Newest uint64
	// NewestAt is the CreatedAt of the newest snapshot.
	NewestAt time.Time
	// Size is the total size of the stream's snapshot states, in bytes.
	Size int64
}

// Lister is implemented by stores that can enumerate the streams they hold
// snapshots of (the in-memory and Postgres stores do). Retention.PruneAll
// needs it. Safe for concurrent use.
type Lister interface {
	// Streams summarizes the snapshots of every stream of partition that has
	// any ("" for every partition), ordered by partition, then tag.
	Streams(ctx context.Context, partition string) ([]StreamSummary, error)
}

// Retention is a snapshot retention policy: keep the newest Keep snapshots of
// each stream and delete the older ones. A stream's newest snapshot is never
// deleted (Keep must be at least 1), so retention never forces a replay from
// the first event. A Retention is a plain value, safe for concurrent use; a
// runtime may apply it after each snapshot it saves (Prune), an operator to a
// whole store (PruneAll, `scribe snapshots prune -keep N`).
type Retention struct {
	// Keep is how many of each stream's newest snapshots to keep; ≥ 1.
	Keep int
}

// Validate reports a Retention that could delete a stream's newest snapshot
// (Keep < 1). The error wraps ErrInvalidArgument.
func (r Retention) Validate() error {
	if r.Keep < 1 {
		return fmt.Errorf("%w: retention keeps %d snapshots per stream; keep at least 1, so no stream loses its newest snapshot", ErrInvalidArgument, r.Keep)
	}
	return nil
}

// Prune applies the policy to one stream of st and returns how many
// snapshots it deleted.
func (r Retention) Prune(ctx context.Context, st Store, stream journal.StreamID) (int, error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	return st.Prune(ctx, stream, r.Keep)
}

// PruneResult reports what PruneAll did.
type PruneResult struct {
	// Streams is how many streams had more than Keep snapshots.
	Streams int
	// Deleted is how many snapshots were deleted in all.
	Deleted int
}

// PruneAll applies the policy to every stream of partition ("" for every
// partition) in st, which must implement Lister. It stops at the first
// error, reporting what it deleted until then. A snapshot saved while it
// runs is never deleted in its stead: each stream is pruned by Store.Prune,
// which keeps the newest Keep at the moment it runs.
func (r Retention) PruneAll(ctx context.Context, st Store, partition string) (PruneResult, error) {
	var res PruneResult
	if err := r.Validate(); err != nil {
		return res, err
	}
	l, ok := st.(Lister)
	if !ok {
		return res, fmt.Errorf("%w: the snapshot store %T cannot list its streams (it does not implement snapshots.Lister); prune stream by stream with Retention.Prune", ErrInvalidArgument, st)
	}
	streams, err := l.Streams(ctx, partition)
	if err != nil {
		return res, err
	}
	for _, s := range streams {
		if s.Count <= r.Keep {
			continue
		}
		n, err := st.Prune(ctx, s.Stream, r.Keep)
		if err != nil {
			return res, err
		}
		if n > 0 {
			res.Streams++
			res.Deleted += n
		}
	}
	return res, nil
}
