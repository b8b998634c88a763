package projection

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// PartitionedSource is a Source spread over several databases whose
// positions are ordered per database only (partitioned.Router, with more
// than one member): its global feed cannot be read as one. A Runner reads
// it partition by partition instead (find it with a type assertion), and
// keeps one checkpoint per partition that survives the partition's move
// to another database.
//
// The design: such a projection is a sliced projection whose slices are
// the source's partitions (SliceStore.JoinPartitions), with the slices'
// leases, checkpoints, membership and shares of several runners, so that
// there is one protocol for running a projection on several runners. A
// slice's checkpoint records the member (database) its position belongs to
// and the event ID of the record there (SliceLease.Member and EventID). A
// partition move copies the partition's events in order, with the same
// event IDs and new positions; the runner finds its place on the
// partition's new member by the event ID and goes on after it there. So
// each event of a partition is applied exactly once into a read model in
// the store's transaction, in the partition's order, across moves (also
// a move there and back), crashes and restarts.
//
// Implementations are safe for concurrent use.
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
	// the event afterID (as LocatePartition places it), catch-up then
	// live, in the partition's order, each once, following moves of the
	// partition, until ctx ends or the consumer stops. located is called
	// on the iterator's goroutine with each member read from, before the
	// first record read from it.
	FollowPartition(ctx context.Context, q journal.Query, member string, after journal.Position, afterID uuid.UUID, located func(member string, at journal.Position)) iter.Seq2[journal.Record, error]
}

// partitionFeed is the state of a runner of a projection across several
// databases (a PartitionedSource).
type partitionFeed struct {
	src PartitionedSource
	// q is the projection's query: every partition (AllPartitions) or one.
	q journal.Query
	// partOf maps slice to partition, as the store numbered them.
	partOf map[int]string
	// from is the member each pending record was read from, by event ID;
	// used by the run loop's goroutine only.
	from map[uuid.UUID]string
}

// newPartitioned configures the runner of a projection across the several
// databases of src for NewRunner.
func (r *Runner[Tx]) newPartitioned(src PartitionedSource) error {
	if r.p.Slicing != nil {
		return fmt.Errorf("projection %s: a sliced projection across several databases is not supported; leave Slicing empty (each partition is a slice of its own) or run it on each database", r.key)
	}
	var ok bool
	if r.slices, ok = r.store.(SliceStore[Tx]); !ok {
		return fmt.Errorf("projection %s: the journal spreads partitions over several databases, and the store %T cannot keep a checkpoint per partition (it is not a projection.SliceStore)", r.key, r.store)
	}
	r.part = &partitionFeed{src: src, q: r.q, from: map[uuid.UUID]string{}}
	return nil
}

// partitions returns the partitions the projection reads.
func (f *partitionFeed) partitions() []string {
	if f.q.AllPartitions {
		return f.src.FeedPartitions()
	}
	return []string{f.q.PartitionOrDefault()}
}

// queryOf returns the query of partition p.
func (f *partitionFeed) queryOf(p string) journal.Query {
	if f.q.AllPartitions {
		return journal.Query{Partition: p, All: true}
	}
	return f.q
}

// join joins the projection's live runners with a slice per partition and
// learns which slice reads which partition; the slicing's Count becomes
// the number of slices (Share divides them).
func (sr *slicedRunner[Tx]) joinPartitions(ctx context.Context) ([]string, error) {
	r, f := sr.r, sr.part
	want := f.partitions()
	members, err := sr.store.JoinPartitions(ctx, r.key, want, r.o.Owner, r.o.LeaseTTL/2)
	if err != nil {
		return nil, err
	}
	if f.partOf != nil && len(f.partOf) >= len(want) && !slices.ContainsFunc(want, func(p string) bool { return !f.has(p) }) {
		return members, nil
	}
	sts, _, err := sr.store.SliceStatuses(ctx, r.key)
	if err != nil {
		return nil, err
	}
	f.partOf = make(map[int]string, len(sts))
	for _, st := range sts {
		f.partOf[st.Slice] = st.Partition
	}
	sr.s.Count = len(sts)
	return members, nil
}

func (f *partitionFeed) has(p string) bool {
	for _, x := range f.partOf {
		if x == p {
			return true
		}
	}
	return false
}

// startPartitions starts one FollowPartition per held slice, each from its
// lease's checkpoint, sending its records to feed tagged with the slice
// and the member they were read from.
func (sr *slicedRunner[Tx]) startPartitions(ctx context.Context, feed chan<- item, wg *sync.WaitGroup) {
	f := sr.part
	clear(f.from)
	for s, l := range sr.held {
		l := *l
		wg.Add(1)
		go func() {
			defer wg.Done()
			member := l.Member
			located := func(m string, _ journal.Position) { member = m }
			for rec, err := range f.src.FollowPartition(ctx, f.queryOf(l.Partition), l.Member, l.Checkpoint, l.EventID, located) {
				select {
				case feed <- item{rec: rec, err: err, slice: s, member: member}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// setMembers sets the Member of each lease of ls to the member the last
// record of its slice in b was read from (the store records it with the
// checkpoint).
func (sr *slicedRunner[Tx]) setMembers(ls []SliceLease, b Batch) {
	for i := range ls {
		for j := len(b.Records) - 1; j >= 0; j-- {
			if b.Slices[j] == ls[i].Slice {
				ls[i].Member = sr.part.from[b.Records[j].ID]
				break
			}
		}
	}
}

// partitionsCaughtUp reports whether every partition has a slice and no
// slice has a record after its checkpoint, on the member serving its
// partition now. A partition moving (ErrUnavailable) is not caught up.
func (sr *slicedRunner[Tx]) partitionsCaughtUp(ctx context.Context) (bool, error) {
	f := sr.part
	sts, _, err := sr.store.SliceStatuses(ctx, sr.r.key)
	if err != nil {
		return false, err
	}
	for _, p := range f.partitions() {
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
