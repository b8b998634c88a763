package evidence

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// Divergence is where a journal's current chain no longer extends a
// checkpoint: the first event of a stream that differs from what the
// checkpoint holds.
type Divergence struct {
	Stream journal.StreamID
	// Version is the first version that differs; EventID is the event the
	// checkpoint holds there.
	Version uint64
	EventID uuid.UUID
	// CurrentID and Position are the event the journal holds there now
	// (zero when it holds none: the event was removed).
	CurrentID uuid.UUID
	Position  journal.Position
	// Reason says what differs.
	Reason string
}

// Error renders the divergence as a message naming stream, version and
// event.
func (d *Divergence) Error() string {
	return fmt.Sprintf("stream %s differs from the checkpoint at version %d (event %s): %s", d.Stream, d.Version, d.EventID, d.Reason)
}

// CompareOptions shape Compare. Every field is optional.
type CompareOptions struct {
	// Workers is how many streams are read at once. Default 4.
	Workers int
	// Include, when set, limits the comparison to the streams it accepts.
	// Default nil: every stream of the checkpoint.
	Include func(journal.StreamID) bool
	// Progress, when set, is called after each stream, in order. Default
	// nil.
	Progress func(Progress)
}

// Compare checks that src's current chains extend c: for every stream c
// covers, the journal holds the same events at versions 1 to the covered
// version (read through the archive when src is a journal.ArchiveReader),
// and each event's chain hash, recomputed from its current content and the
// checkpoint's hash of the version before, is the checkpoint's. It
// returns one Divergence per stream that differs, at its first differing
// version, in stream order; none when src extends c. Events appended
// since, and new streams, are not compared (a chain verification covers
// them). It does not check c's signature: call c.Verify first. A read
// failure that is not the stream's own (ErrUnavailable, ErrStoreNotOpen,
// the context) is returned as an error.
func Compare(ctx context.Context, src Source, c *Checkpoint, opts CompareOptions) ([]Divergence, error) {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	var idx []int
	var ids []journal.StreamID
	for i := range c.Streams {
		if opts.Include == nil || opts.Include(c.Streams[i].ID()) {
			idx = append(idx, i)
			ids = append(ids, c.Streams[i].ID())
		}
	}
	var out []Divergence
	var events uint64
	pos := map[journal.StreamID]int{}
	for k, id := range ids {
		pos[id] = idx[k]
	}
	err := forEachStream(ctx, ids, opts.Workers, func(ctx context.Context, id journal.StreamID) (*Divergence, error) {
		return compareStream(ctx, src, &c.Streams[pos[id]])
	}, func(i int, d *Divergence) error {
		if d != nil {
			out = append(out, *d)
		}
		events += c.Streams[idx[i]].Version
		if opts.Progress != nil {
			opts.Progress(Progress{StreamsDone: i + 1, Streams: len(ids), Events: events})
		}
		return nil
	})
	return out, err
}

// compareStream compares one stream with its checkpointed leaves.
func compareStream(ctx context.Context, src Source, s *Stream) (*Divergence, error) {
	id := s.ID()
	var v uint64
	for r, err := range readHistory(ctx, src, id, s.Version) {
		if err != nil {
			if fatal(ctx, err) {
				return nil, err
			}
			want := s.Leaves[v]
			return &Divergence{Stream: id, Version: v + 1, EventID: want.ID, Reason: fmt.Sprintf("the event at version %d cannot be read: %v", v+1, err)}, nil
		}
		want := s.Leaves[v]
		var prev journal.Hash
		if v > 0 {
			prev = s.Leaves[v-1].Hash
		}
		d := &Divergence{Stream: id, Version: v + 1, EventID: want.ID, CurrentID: r.ID, Position: r.Position}
		version := r.Version(id.Tag)
		switch {
		case r.Partition() != id.Partition || version == 0:
			d.Reason = fmt.Sprintf("the journal returned event %s, which is not in the stream", r.ID)
			return d, nil
		case version != v+1:
			d.Reason = fmt.Sprintf("the journal holds version %d where version %d belongs: events were removed, inserted or moved", version, v+1)
			return d, nil
		case r.ID != want.ID:
			d.Reason = fmt.Sprintf("the checkpoint holds event %s at this version, the journal holds event %s", want.ID, r.ID)
			return d, nil
		}
		if got := journal.ChainHash(prev, journal.CanonicalBytes(&r)); got != want.Hash {
			d.Reason = fmt.Sprintf("the event's content (type, tags, data, metadata or recorded-at) hashes to %s after the checkpoint's previous hash, the checkpoint holds %s: the event was altered after the checkpoint", short(got), short(want.Hash))
			return d, nil
		}
		v++
	}
	if v < s.Version {
		want := s.Leaves[v]
		return &Divergence{Stream: id, Version: v + 1, EventID: want.ID, Reason: fmt.Sprintf(
			"the checkpoint covers versions 1 to %d, the journal's stream ends at version %d: events were removed", s.Version, v)}, nil
	}
	return nil, nil
}

// fatal reports a read failure that is not one stream's own.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, journal.ErrUnavailable) || errors.Is(err, journal.ErrStoreNotOpen)
}
