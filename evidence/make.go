package evidence

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/scribe-es/scribe/internal/ordered"
	"github.com/scribe-es/scribe/journal"
)

// Source is the journal a checkpoint is made of and compared with: a
// Reader and an Inspector (every journal.Journal is one). Two optional
// capabilities are found by type assertion: journal.ArchiveReader (a
// stream's archived events are read through it, so archived history is
// covered and still compares equal after an archive run), and
// StreamLister.
type Source interface {
	journal.Reader
	journal.Inspector
}

// StreamLister is an optional capability of a Source: it lists every
// stream that has events, archived whole ones included. Without it, Make
// finds the streams in the links of the records ReadAll yields, which
// misses a stream whose events are all archived. Safe for concurrent use.
type StreamLister interface {
	// ListStreams yields every stream of partition ("" : every partition)
	// that has events, ordered by partition then tag (byte order).
	ListStreams(ctx context.Context, partition string) iter.Seq2[journal.StreamID, error]
}

// Progress reports how far Make or Compare got; calls come from one
// goroutine at a time, in order.
type Progress struct {
	StreamsDone, Streams int
	Events               uint64
}

// MakeOptions shape Make. Every field is optional.
type MakeOptions struct {
	// Journal labels the journal in the statement. Default "".
	Journal string
	// Partition limits the checkpoint to one partition. Default "": every
	// partition.
	Partition string
	// Workers is how many streams are read at once. Default 4.
	Workers int
	// Progress, when set, is called after each stream (in stream order).
	// Default nil.
	Progress func(Progress)
	// Now is the clock stamped into the statement. Default time.Now.
	Now func() time.Time
}

// Make reads every stream of src and returns an unsigned checkpoint of
// them (call Sign). It first reads the journal's head (the statement's
// Position), then each stream's summary and its events from version 1 to
// the summary's version, through the archive when src is an
// journal.ArchiveReader. Every event's link is checked as VerifyStream
// checks it (versions without gaps, each PrevHash the previous Hash, each
// Hash recomputed from the record, the last one the recorded head hash):
// a chain that does not verify is never signed, Make fails with its
// *journal.ChainError. A stream with archived events on a src that offers
// no ArchiveReader fails too (its history could not be covered). Reads
// are not one snapshot: a stream appended to meanwhile is covered up to
// the version its summary showed.
func Make(ctx context.Context, src Source, opts MakeOptions) (*Checkpoint, error) {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	madeAt := opts.Now().UTC().Truncate(time.Microsecond)
	head, err := src.Head(ctx)
	if err != nil {
		return nil, err
	}
	streams, err := listStreams(ctx, src, opts.Partition, head)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Signed: Signed{Statement: Statement{Journal: opts.Journal, Position: head, MadeAt: madeAt}}}
	var events uint64
	err = forEachStream(ctx, streams, opts.Workers, func(ctx context.Context, id journal.StreamID) (Stream, error) {
		return readForCheckpoint(ctx, src, id)
	}, func(i int, s Stream) error {
		if s.Version > 0 {
			c.Streams = append(c.Streams, s)
			events += s.Version
		}
		if opts.Progress != nil {
			opts.Progress(Progress{StreamsDone: i + 1, Streams: len(streams), Events: events})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	leaves := make([]journal.Hash, len(c.Streams))
	for i := range c.Streams {
		leaves[i] = StreamLeaf(c.Streams[i].StreamHead)
	}
	c.Statement.Streams = uint64(len(c.Streams))
	c.Statement.Events = events
	c.Root = MerkleRoot(leaves)
	return c, nil
}

// listStreams returns the streams to cover, ordered by partition then tag.
func listStreams(ctx context.Context, src Source, partition string, head journal.Position) ([]journal.StreamID, error) {
	var out []journal.StreamID
	if l, ok := src.(StreamLister); ok {
		for id, err := range l.ListStreams(ctx, partition) {
			if err != nil {
				return nil, err
			}
			out = append(out, id.Normalize())
		}
	} else {
		seen := map[journal.StreamID]bool{}
		for r, err := range src.ReadAll(ctx, journal.Position{}, 0) {
			if err != nil {
				return nil, err
			}
			if r.Position.After(head) {
				break
			}
			if partition != "" && r.Partition() != partition {
				continue
			}
			for _, l := range r.Links {
				seen[journal.StreamID{Partition: r.Partition(), Tag: l.Tag}] = true
			}
		}
		for id := range seen {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b journal.StreamID) int {
		return compareStreams(StreamHead{Partition: a.Partition, Tag: a.Tag}, StreamHead{Partition: b.Partition, Tag: b.Tag})
	})
	return slices.Compact(out), nil
}

// readHistory yields stream's records from version 1, at most limit,
// through the archive when src has one.
func readHistory(ctx context.Context, src Source, stream journal.StreamID, limit uint64) iter.Seq2[journal.Record, error] {
	n := int(min(limit, 1<<62))
	if ar, ok := src.(journal.ArchiveReader); ok {
		return ar.ReadStreamWithArchive(ctx, stream, 1, n)
	}
	return src.ReadStream(ctx, stream, 1, n)
}

// readForCheckpoint reads one stream's leaves, checking its chain.
func readForCheckpoint(ctx context.Context, src Source, id journal.StreamID) (Stream, error) {
	sum, err := src.TagSummary(ctx, id)
	if err != nil {
		return Stream{}, err
	}
	s := Stream{StreamHead: StreamHead{Partition: id.Partition, Tag: id.Tag}}
	if sum.Version == 0 {
		return s, nil
	}
	s.Leaves = make([]Leaf, 0, sum.Version)
	var prev journal.Hash
	for r, err := range readHistory(ctx, src, id, sum.Version) {
		if err != nil {
			if errors.Is(err, journal.ErrArchived) {
				return Stream{}, fmt.Errorf("evidence: stream %s has archived events but the journal reads no archive (journal.ArchiveReader): %w", id, err)
			}
			return Stream{}, err
		}
		want := uint64(len(s.Leaves)) + 1
		link, err := checkLink(id, &r, want, prev)
		if err != nil {
			return Stream{}, err
		}
		s.Leaves = append(s.Leaves, Leaf{ID: r.ID, Hash: link.Hash})
		prev = link.Hash
	}
	if uint64(len(s.Leaves)) != sum.Version {
		return Stream{}, &journal.ChainError{Stream: id, Version: uint64(len(s.Leaves)) + 1, Position: sum.LastPosition, Reason: fmt.Sprintf(
			"the stream's recorded version is %d but its events end at version %d: its newest events were removed; run `scribe verify`", sum.Version, len(s.Leaves))}
	}
	if prev != sum.HeadHash {
		return Stream{}, &journal.ChainError{Stream: id, Version: sum.Version, Position: sum.LastPosition, Reason: fmt.Sprintf(
			"the stream's recorded head hash %s is not the hash %s of its event at version %d; run `scribe verify`", sum.HeadHash, prev, sum.Version)}
	}
	s.Version = sum.Version
	s.Head = prev
	s.Root = MerkleRoot(s.leafHashes())
	return s, nil
}

// checkLink returns r's link in stream after checking it: version want,
// PrevHash prev, Hash recomputed from r's content.
func checkLink(stream journal.StreamID, r *journal.Record, want uint64, prev journal.Hash) (journal.StreamLink, error) {
	for _, l := range r.Links {
		if l.Tag != stream.Tag {
			continue
		}
		broken := func(reason string, args ...any) error {
			return &journal.ChainError{Stream: stream, Version: l.Version, Position: r.Position, Reason: fmt.Sprintf(reason, args...) + "; run `scribe verify`"}
		}
		switch {
		case r.Partition() != stream.Partition:
			return l, broken("event %s belongs to partition %q", r.ID, r.Partition())
		case l.Version != want:
			return l, broken("expected version %d, found version %d", want, l.Version)
		case l.PrevHash != prev:
			return l, broken("previous hash %s is not the hash %s of version %d", l.PrevHash, prev, want-1)
		case journal.ChainHash(l.PrevHash, journal.CanonicalBytes(r)) != l.Hash:
			return l, broken("stored hash %s does not match event %s's content", l.Hash, r.ID)
		}
		return l, nil
	}
	return journal.StreamLink{}, &journal.ChainError{Stream: stream, Version: want, Position: r.Position,
		Reason: fmt.Sprintf("event %s read from the stream has no link for tag %q", r.ID, stream.Tag)}
}

// forEachStream runs work on each stream with up to workers at once and
// hands each result to done in the order of streams (from the calling
// goroutine). It stops at the first error.
func forEachStream[T any](ctx context.Context, streams []journal.StreamID, workers int,
	work func(context.Context, journal.StreamID) (T, error), done func(int, T) error) error {
	type result struct {
		v   T
		err error
	}
	return ordered.Each(ctx, len(streams), workers, func(ctx context.Context, i int) result {
		v, err := work(ctx, streams[i])
		return result{v, err}
	}, func(i int, r result) error {
		if r.err != nil {
			return r.err
		}
		return done(i, r.v)
	})
}
