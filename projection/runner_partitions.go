package projection

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// PartitionedSource is a Source spread over several databases whose
// positions are ordered per database only (partitioned.Router, with more
// than one member): a Runner (finding it by type assertion) reads it
// partition by partition, a slice per partition (or, with Slicing, per
// partition × tag slice). A slice's checkpoint names the member (database)
// of its position and the event ID there (Lease.Member, EventID); a
// partition move copies events in order with their IDs, so the runner
// finds its place on the new member by the event ID, and each event of a
// partition is applied exactly once into a read model in the store's
// transaction, in the partition's order, across moves (also there and
// back), crashes and restarts. Implementations are safe for concurrent use.
type PartitionedSource interface {
	Source
	// FeedPartitions returns the partitions to read, sorted; nil or empty
	// when the source is a single database (the runner then reads its
	// global feed as usual). The list may grow while the source runs.
	FeedPartitions() []string
	// LocatePartition returns the member serving partition now, its
	// journal, and the position there after which partition's records
	// follow the event afterID (uuid.Nil: the start), which the caller read
	// at position after on member. It follows a move the member reports.
	LocatePartition(ctx context.Context, partition, member string, after journal.Position, afterID uuid.UUID) (string, journal.Journal, journal.Position, error)
	// FollowPartition yields the records q (one partition) selects after
	// the event afterID (as LocatePartition places it), catch-up then live,
	// in the partition's order, each once, following its moves, until ctx
	// ends. located is called on the iterator's goroutine with each member
	// read from, before its first record.
	FollowPartition(ctx context.Context, q journal.Query, member string, after journal.Position, afterID uuid.UUID, located func(member string, at journal.Position)) iter.Seq2[journal.Record, error]
}

// partitionFeed reads a projection across several databases (a
// PartitionedSource): one slice per partition or, sliced (s set), Count
// slices per partition, each of which reads its whole partition and is
// delivered the records of its tag slice only.
type partitionFeed struct {
	src PartitionedSource
	// q is the projection's query: every partition (AllPartitions) or one.
	q journal.Query
	// s is the slicing of a sliced projection (nil: one slice per
	// partition), with its defaults.
	s *Slicing
}

// layout lists the partitions the projection reads.
func (f partitionFeed) layout() Layout {
	l := Layout{Partitions: []string{f.q.PartitionOrDefault()}}
	if f.q.AllPartitions {
		l.Partitions = f.src.FeedPartitions()
	}
	if f.s != nil {
		l.Group, l.Count = f.s.Group, f.s.Count
	}
	return l
}

// queryOf returns the query of partition p.
func (f partitionFeed) queryOf(p string) journal.Query {
	if f.q.AllPartitions {
		return journal.Query{Partition: p, All: true}
	}
	return f.q
}

// read starts one FollowPartition per held slice, each from its lease's
// checkpoint, sending its records to feed tagged with the slice and the
// member they were read from. The slices of one partition of a sliced
// projection each read the whole partition.
func (f partitionFeed) read(ctx context.Context, held map[int]*Lease, feed chan<- item, wg *sync.WaitGroup) {
	for s, l := range held {
		l, member := *l, l.Member
		located := func(m string, _ journal.Position) { member = m }
		wg.Go(func() {
			forward(ctx, f.src.FollowPartition(ctx, f.queryOf(l.Partition), l.Member, l.Checkpoint, l.EventID, located), feed,
				func(it *item) { it.slice, it.member = s, member })
		})
	}
}

// deliver delivers a record for the slice it was read for; sliced, only
// when it is of Slicing.Types with a tag in the slice's tag slice (as on
// one database), else the slice passes over it.
func (f partitionFeed) deliver(it item, held map[int]*Lease) ([]int, bool) {
	if _, ok := held[it.slice]; !ok {
		return nil, false
	}
	if f.s == nil {
		return []int{it.slice}, false
	}
	if (len(f.s.Types) == 0 || slices.Contains(f.s.Types, it.rec.Type)) && slices.Contains(f.s.slicesOf(&it.rec), it.slice%f.s.Count) {
		return []int{it.slice}, false
	}
	return nil, true
}

// caughtUp reports whether every partition has a slice and no slice has a
// record after its checkpoint, on the member serving its partition now. A
// partition moving (ErrUnavailable) is not caught up.
func (f partitionFeed) caughtUp(ctx context.Context, sts []SliceStatus) (bool, error) {
	for _, p := range f.layout().Partitions {
		if !slices.ContainsFunc(sts, func(st SliceStatus) bool { return st.Partition == p }) {
			return false, nil
		}
	}
	for _, st := range sts {
		_, j, at, err := f.src.LocatePartition(ctx, st.Partition, st.Member, st.Checkpoint, st.EventID)
		if errors.Is(err, journal.ErrUnavailable) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for rec, err := range j.Read(ctx, f.queryOf(st.Partition), journal.ReadOptions{From: at, Limit: 2}) {
			if errors.Is(err, journal.ErrUnavailable) || errors.Is(err, journal.ErrPartitionMoved) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if rec.Position.After(at) {
				return false, nil
			}
		}
	}
	return true, nil
}
