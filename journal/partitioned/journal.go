package partitioned

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// appendPartition returns the one partition an append names: its events',
// its leases' and its condition's. With no events it is the leases', the
// condition's or journal.DefaultPartition.
// On a single member (single) a condition over every partition is the
// member's to judge.
func appendPartition(events []journal.Event, opts journal.AppendOptions, single bool) (string, error) {
	var (
		part string
		what string
	)
	see := func(p, where string) error {
		p = partitionName(p)
		switch {
		case part == "":
			part, what = p, where
		case p != part:
			return fmt.Errorf("%w (%w): %s is in partition %q but %s is in partition %q; a command (and a DCB command's query, events and leases) must stay within one partition: split it into one command per partition",
				ErrCrossPartition, journal.ErrInvalidEvent, what, part, where, p)
		}
		return nil
	}
	for i := range events {
		if err := see(events[i].Metadata.Partition, fmt.Sprintf("event %d (%s)", i, events[i].Type)); err != nil {
			return "", err
		}
	}
	for _, l := range opts.Leases {
		if err := see(l.Stream.Partition, "the lease of "+l.Stream.String()); err != nil {
			return "", err
		}
	}
	if c := opts.Condition; c != nil {
		if err := c.FailIfEventsMatch.Validate(); err != nil {
			return "", fmt.Errorf("partitioned: the append condition: %w", err)
		}
		if c.FailIfEventsMatch.AllPartitions {
			if !single {
				return "", fmt.Errorf("%w (%w): the append condition's query reads every partition (AllPartitions), which span several databases; a command must stay within one partition: give the condition the events' partition",
					ErrCrossPartition, journal.ErrInvalidEvent)
			}
		} else if err := see(c.FailIfEventsMatch.Partition, "the append condition's query"); err != nil {
			return "", err
		}
	}
	if part == "" {
		part = journal.DefaultPartition
	}
	return part, nil
}

// Append sends the append to the member serving its partition. An append
// naming two partitions fails with ErrCrossPartition and writes nothing.
// When the member refuses it and answers that the partition moved
// (journal.ErrPartitionMoved) to another member of this router, the router
// maps the partition there (as Acquire does) and sends the append there
// once more: it wrote nothing, and its leases may have been taken there (a
// DCB command's owners acquire on their own nodes, whose routers followed
// the move). This is how a node that only appends to a partition follows
// its move.
func (r *Router) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	p, err := appendPartition(events, opts, r.single() != nil)
	if err != nil {
		return journal.AppendResult{}, err
	}
	for range 2 {
		m, err := r.route(p)
		if err != nil {
			return journal.AppendResult{}, err
		}
		res, err := m.Journal.Append(ctx, events, opts)
		if err == nil || errors.Is(err, journal.ErrOutcomeUnknown) || !r.follow(p, m, err) {
			return res, err
		}
	}
	return journal.AppendResult{}, fmt.Errorf("%w: partitioned: partition %q moved twice while appending; retry", journal.ErrUnavailable, partitionName(p))
}

// ReadStream reads the stream from its partition's member; a member that
// answers that the partition moved to another member is followed (see
// Acquire).
func (r *Router) ReadStream(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return r.followStream(stream.Partition, func(j journal.Journal) iter.Seq2[journal.Record, error] {
		return j.ReadStream(ctx, stream, fromVersion, limit)
	})
}

// followStream runs read on the partition's member; when its first result
// is a journal.ErrPartitionMoved naming another member, the router maps the
// partition there (follow) and reads again from it.
func (r *Router) followStream(partition string, read func(journal.Journal) iter.Seq2[journal.Record, error]) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		for range 2 {
			m, err := r.route(partition)
			if err != nil {
				yield(journal.Record{}, err)
				return
			}
			first, again := true, false
			for rec, err := range read(m.Journal) {
				if first && err != nil && r.follow(partition, m, err) {
					again = true
					break
				}
				first = false
				if !yield(rec, err) || err != nil {
					return
				}
			}
			if !again {
				return
			}
		}
		yield(journal.Record{}, fmt.Errorf("%w: partitioned: partition %q moved twice while reading; retry", journal.ErrUnavailable, partitionName(partition)))
	}
}

// ReadStreamThroughIndex implements journal.IndexedStreamReader on the
// stream's member, following a move as ReadStream does; a member without a
// separate tag index reads its stream (ReadStream), which is then the same
// read.
func (r *Router) ReadStreamThroughIndex(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return r.followStream(stream.Partition, func(j journal.Journal) iter.Seq2[journal.Record, error] {
		if ir, ok := j.(journal.IndexedStreamReader); ok {
			return ir.ReadStreamThroughIndex(ctx, stream, fromVersion, limit)
		}
		return j.ReadStream(ctx, stream, fromVersion, limit)
	})
}

// ReadStreamWithArchive implements journal.ArchiveReader on the stream's
// member, following a move as ReadStream does; a member that does not
// archive reads its hot events (ReadStream), which are then all of them.
func (r *Router) ReadStreamWithArchive(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return r.followStream(stream.Partition, func(j journal.Journal) iter.Seq2[journal.Record, error] {
		if ar, ok := j.(journal.ArchiveReader); ok {
			return ar.ReadStreamWithArchive(ctx, stream, fromVersion, limit)
		}
		return j.ReadStream(ctx, stream, fromVersion, limit)
	})
}

// Read runs the DCB read on the query's partition's member (following a
// move to another member, as ReadStream does). A query over
// every partition (AllPartitions) fails with ErrPerDatabase when there are
// several members.
func (r *Router) Read(ctx context.Context, q journal.Query, opts journal.ReadOptions) iter.Seq2[journal.Record, error] {
	if q.AllPartitions {
		m, err := r.queryMember(q, "Read over AllPartitions")
		if err != nil {
			return fail(err)
		}
		return m.Journal.Read(ctx, q, opts)
	}
	return r.followStream(q.Partition, func(j journal.Journal) iter.Seq2[journal.Record, error] {
		return j.Read(ctx, q, opts)
	})
}

// Subscribe subscribes on the query's partition's member (its positions are
// that member's). A query over every partition fails with ErrPerDatabase
// when there are several members: subscribe on each member's journal.
func (r *Router) Subscribe(ctx context.Context, q journal.Query, after journal.Position) iter.Seq2[journal.Record, error] {
	m, err := r.queryMember(q, "Subscribe over AllPartitions")
	if err != nil {
		return fail(err)
	}
	return m.Journal.Subscribe(ctx, q, after)
}

func (r *Router) queryMember(q journal.Query, method string) (*member, error) {
	if q.AllPartitions {
		if m := r.single(); m != nil {
			return m, nil
		}
		return nil, r.perDatabase(method)
	}
	return r.route(q.Partition)
}

// ReadAll is the global feed: with one member it is that member's; with
// several it fails with ErrPerDatabase (read each member's journal).
func (r *Router) ReadAll(ctx context.Context, after journal.Position, limit int) iter.Seq2[journal.Record, error] {
	if m := r.single(); m != nil {
		return m.Journal.ReadAll(ctx, after, limit)
	}
	return fail(r.perDatabase("ReadAll"))
}

// ReadTypes reads across partitions by position: with several members it
// fails with ErrPerDatabase.
func (r *Router) ReadTypes(ctx context.Context, q journal.TypeQuery) iter.Seq2[journal.Record, error] {
	if m := r.single(); m != nil {
		return m.Journal.ReadTypes(ctx, q)
	}
	return fail(r.perDatabase("ReadTypes"))
}

// ReadEvent asks each member in Config.Members' order and returns the first
// record found, or ErrNotFound when none holds the event. A member that
// fails otherwise fails the call (the event may be there).
func (r *Router) ReadEvent(ctx context.Context, id uuid.UUID) (journal.Record, error) {
	for _, m := range r.order {
		rec, err := m.Journal.ReadEvent(ctx, id)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, journal.ErrNotFound) {
			return journal.Record{}, fmt.Errorf("partitioned: ReadEvent on member %q: %w", m.Name, err)
		}
	}
	return journal.Record{}, fmt.Errorf("%w: partitioned: no member holds event %s", journal.ErrNotFound, id)
}

// Head returns the head of the member serving journal.DefaultPartition:
// positions are per database, so compare it only with positions read from
// that member.
func (r *Router) Head(ctx context.Context) (journal.Position, error) {
	m, err := r.route(journal.DefaultPartition)
	if err != nil {
		return journal.Position{}, err
	}
	return m.Journal.Head(ctx)
}

// ReadByCorrelation yields each member's records of the correlation, member
// after member in Config.Members' order; within a member in position order.
func (r *Router) ReadByCorrelation(ctx context.Context, correlationID string) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		for _, m := range r.order {
			for rec, err := range m.Journal.ReadByCorrelation(ctx, correlationID) {
				if !yield(rec, err) || err != nil {
					return
				}
			}
		}
	}
}

// TagSummary summarises the stream in its partition's member; a member
// that answers that the partition moved to another member is followed.
func (r *Router) TagSummary(ctx context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	for range 2 {
		m, err := r.route(stream.Partition)
		if err != nil {
			return journal.TagSummary{}, err
		}
		s, err := m.Journal.TagSummary(ctx, stream)
		if err == nil || !r.follow(stream.Partition, m, err) {
			return s, err
		}
	}
	return journal.TagSummary{}, fmt.Errorf("%w: partitioned: partition %q moved twice while reading; retry", journal.ErrUnavailable, partitionName(stream.Partition))
}

// TagsOfGroup lists the group's streams in the partition's member; a member
// that answers that the partition moved to another member is followed.
func (r *Router) TagsOfGroup(ctx context.Context, partition, group string) ([]journal.TagSummary, error) {
	for range 2 {
		m, err := r.route(partition)
		if err != nil {
			return nil, err
		}
		tags, err := m.Journal.TagsOfGroup(ctx, partition, group)
		if err == nil || !r.follow(partition, m, err) {
			return tags, err
		}
	}
	return nil, fmt.Errorf("%w: partitioned: partition %q moved twice while reading; retry", journal.ErrUnavailable, partitionName(partition))
}

// TypeSummaries carries positions across partitions: with several members
// it fails with ErrPerDatabase.
func (r *Router) TypeSummaries(ctx context.Context) ([]journal.TypeSummary, error) {
	if m := r.single(); m != nil {
		return m.Journal.TypeSummaries(ctx)
	}
	return nil, r.perDatabase("TypeSummaries")
}

// CountAfter counts after a position: with several members it fails with
// ErrPerDatabase.
func (r *Router) CountAfter(ctx context.Context, after journal.Position) (uint64, error) {
	if m := r.single(); m != nil {
		return m.Journal.CountAfter(ctx, after)
	}
	return 0, r.perDatabase("CountAfter")
}

// Limits implements journal.Limited: the strictest of the members' limits,
// so an append validated against them passes every member's validation.
func (r *Router) Limits() journal.Limits {
	var out journal.Limits
	for _, m := range r.order {
		l := journal.Limits{MaxDataSize: journal.DefaultMaxDataSize}
		if lim, ok := m.Journal.(journal.Limited); ok {
			l = lim.Limits()
			if l.MaxDataSize <= 0 {
				l.MaxDataSize = journal.DefaultMaxDataSize
			}
		}
		if out.MaxDataSize == 0 || l.MaxDataSize < out.MaxDataSize {
			out.MaxDataSize = l.MaxDataSize
		}
	}
	return out
}

// ServerEpoch implements journal.ServerWatcher: the sum of the members'
// server epochs (members without one count 0), so it increases whenever any
// member's does and never decreases.
func (r *Router) ServerEpoch() uint64 {
	var sum uint64
	for _, m := range r.order {
		if w, ok := m.Journal.(journal.ServerWatcher); ok {
			sum += w.ServerEpoch()
		}
	}
	return sum
}

// fail is an iterator that yields err once.
func fail(err error) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
}
