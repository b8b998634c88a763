package partitioned

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// The feed across databases. Positions are ordered per database, and a
// partition move copies a partition's events to the target in the source's
// order with the same event IDs but new positions. So a reader of several
// databases reads each partition on its own, in the partition's order, and
// keeps its place in a partition as a cursor that survives a move: the
// member whose position it holds, the position, and the event ID of the
// record there. FollowPartition resumes from such a cursor on whichever
// member serves the partition now (the event's position there, found by
// its ID) and follows the partition when it moves on. projection.Runner
// reads a router this way (projection.PartitionedSource): one checkpoint
// per partition.

// anchoredSubscriber is the optional capability of a member journal whose
// subscription to one partition checks that the record it resumes after
// (afterID, at after) is still there, and ends with an error matching
// journal.ErrPartitionMoved when the partition moved away (and maybe back)
// instead of reading on from a stale position. The Postgres journal has it.
type anchoredSubscriber interface {
	SubscribeAnchored(ctx context.Context, q journal.Query, after journal.Position, afterID uuid.UUID) iter.Seq2[journal.Record, error]
}

// FeedPartitions returns the partitions a reader of the whole router reads
// one by one (FollowPartition), sorted: journal.DefaultPartition and every
// partition of the partition map (Config.Partitions, and the partitions
// mapped since by SetPartition or by following a move). A partition served
// only through Config.Default without being in the map is not listed: map
// it to be read. Nil when the router has a single member, whose global
// feed (ReadAll, Subscribe over every partition) is the router's.
func (r *Router) FeedPartitions() []string {
	if r.single() != nil {
		return nil
	}
	r.mu.RLock()
	out := make([]string, 0, len(r.routes)+1)
	for p := range r.routes {
		out = append(out, p)
	}
	r.mu.RUnlock()
	if !slices.Contains(out, journal.DefaultPartition) {
		out = append(out, journal.DefaultPartition)
	}
	slices.Sort(out)
	return out
}

// LocatePartition returns the member serving partition now, its journal
// and the position there to read partition after: the position of the
// event afterID on that member (the position zero when afterID is
// uuid.Nil: from the start). A member that answers that the partition moved
// to another member of the router is followed (the router maps the
// partition there). member and after are where the caller last read
// afterID: when the event is not on the member serving the partition and
// that member is the caller's, after is returned (the event was deleted by
// retention after it was read). Otherwise a missing event fails with an
// error matching journal.ErrUnavailable (retry: the partition may be
// moving to that member).
func (r *Router) LocatePartition(ctx context.Context, partition, member string, after journal.Position, afterID uuid.UUID) (string, journal.Journal, journal.Position, error) {
	p := partitionName(partition)
	for range 3 {
		m, err := r.route(p)
		if err != nil {
			return "", nil, journal.Position{}, err
		}
		if afterID == uuid.Nil {
			return m.Name, m.Journal, journal.Position{}, nil
		}
		rec, err := m.Journal.ReadEvent(ctx, afterID)
		switch {
		case err == nil && rec.Partition() != p:
			return "", nil, journal.Position{}, fmt.Errorf("%w: partitioned: event %s is in partition %q on member %q, not in partition %q: the cursor does not belong to this partition", journal.ErrInvalidQuery, afterID, rec.Partition(), m.Name, p)
		case err == nil:
			return m.Name, m.Journal, rec.Position, nil
		case !errors.Is(err, journal.ErrNotFound):
			return "", nil, journal.Position{}, fmt.Errorf("partitioned: reading event %s of partition %q on member %q: %w", afterID, p, m.Name, err)
		}
		// Not on m: did the partition move away from m?
		moved := false
		for _, err := range m.Journal.Read(ctx, journal.Query{Partition: p, All: true}, journal.ReadOptions{Limit: 1}) {
			if err != nil {
				if moved = r.follow(p, m, err); !moved {
					return "", nil, journal.Position{}, fmt.Errorf("partitioned: partition %q on member %q: %w", p, m.Name, err)
				}
			}
			break
		}
		if moved {
			continue
		}
		if m.Name == member {
			return m.Name, m.Journal, after, nil
		}
		return "", nil, journal.Position{}, fmt.Errorf("%w: partitioned: event %s, where the reader of partition %q stopped on member %q, is not on member %q, which serves the partition now: it may still be moving there; retry", journal.ErrUnavailable, afterID, p, member, m.Name)
	}
	return "", nil, journal.Position{}, fmt.Errorf("%w: partitioned: partition %q moved several times while locating it; retry", journal.ErrUnavailable, p)
}

// FollowPartition yields the records of q's partition (q names one
// partition; AllPartitions is refused) after the record with event ID
// afterID (uuid.Nil: from the start), which the caller read at position
// after on member: catch-up, then live, in the partition's order, each
// record once, until ctx ends or the consumer stops. It reads on the
// member serving the partition (LocatePartition), and when that member
// answers that the partition moved, it follows the move: it finds the
// last record it yielded on the new member by its event ID and goes on
// after it there, so a move neither repeats nor skips a record. located
// is called (on the iterator's goroutine) with each member read from and
// the position there it reads after, before the first record read from
// that member: a record's position belongs to the member last located.
// A partition moving into a member (its copy not complete) ends the
// iteration with an error matching journal.ErrUnavailable: resume from
// the last record processed.
func (r *Router) FollowPartition(ctx context.Context, q journal.Query, member string, after journal.Position, afterID uuid.UUID, located func(member string, at journal.Position)) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		if q.AllPartitions {
			yield(journal.Record{}, fmt.Errorf("%w: partitioned: FollowPartition reads one partition; name it in the query (FeedPartitions lists them)", journal.ErrInvalidQuery))
			return
		}
		p := q.PartitionOrDefault()
		q.Partition = p
		var moved error // why the last member's subscription ended
		for {
			name, j, at, err := r.LocatePartition(ctx, p, member, after, afterID)
			if err != nil {
				yield(journal.Record{}, err)
				return
			}
			if moved != nil && name == member && at == after {
				// The member that said the partition moved still serves it
				// here as far as the router knows (it names a database that
				// is not a member): nothing to follow.
				yield(journal.Record{}, fmt.Errorf("partitioned: partition %q on member %q: %w; add the member it moved to", p, name, moved))
				return
			}
			if located != nil {
				located(name, at)
			}
			member, after = name, at
			var feed iter.Seq2[journal.Record, error]
			if a, ok := j.(anchoredSubscriber); ok {
				feed = a.SubscribeAnchored(ctx, q, at, afterID)
			} else {
				feed = j.Subscribe(ctx, q, at)
			}
			var failed error
			for rec, err := range feed {
				if err != nil {
					failed = err
					break
				}
				if !yield(rec, nil) {
					return
				}
				after, afterID = rec.Position, rec.ID
			}
			if !errors.Is(failed, journal.ErrPartitionMoved) {
				yield(journal.Record{}, failed)
				return
			}
			// Moved: map the partition to the member it names (when it is
			// one of ours) and locate the last record there.
			r.follow(p, r.members[member], failed)
			moved = failed
		}
	}
}
