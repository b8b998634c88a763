package runtime

import (
	"context"
	"fmt"
	"iter"

	"github.com/scribe-es/scribe/journal"
)

// TagSummary returns what the journal knows of one tag stream: its latest
// version (which is also its event count) and the positions of its first and
// last events. An unknown tag has version 0 and zero positions.
func (rt *Runtime) TagSummary(ctx context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	s, err := rt.cfg.Journal.TagSummary(ctx, stream.Normalize())
	if err != nil {
		return journal.TagSummary{}, fmt.Errorf("runtime: summary of tag %s: %w", stream, err)
	}
	return s, nil
}

// TagExists reports whether any event carries the tag stream's tag.
func (rt *Runtime) TagExists(ctx context.Context, stream journal.StreamID) (bool, error) {
	s, err := rt.TagSummary(ctx, stream)
	return s.Version > 0, err
}

// TagEventCount returns the number of events carrying the tag stream's tag.
func (rt *Runtime) TagEventCount(ctx context.Context, stream journal.StreamID) (uint64, error) {
	s, err := rt.TagSummary(ctx, stream)
	return s.Version, err
}

// TagsOfGroup lists the tag streams of a partition ("" means the default
// one) whose group is group (the text before the tag's first colon), ordered
// by tag, each with its event count (Version) and positions.
func (rt *Runtime) TagsOfGroup(ctx context.Context, partition, group string) ([]journal.TagSummary, error) {
	if partition == "" {
		partition = journal.DefaultPartition
	}
	tags, err := rt.cfg.Journal.TagsOfGroup(ctx, partition, group)
	if err != nil {
		return nil, fmt.Errorf("runtime: tags of group %q: %w", group, err)
	}
	return tags, nil
}

// TagEventsSince yields the events of a tag stream whose position is after
// after (zero: from the first), in ascending position order, at most limit of
// them (0: no limit). Like every catch-up read it never skips an event that
// commits later with a lower position: resume from the last position seen.
func (rt *Runtime) TagEventsSince(ctx context.Context, stream journal.StreamID, after journal.Position, limit int) iter.Seq2[journal.Record, error] {
	stream = stream.Normalize()
	return func(yield func(journal.Record, error) bool) {
		if limit < 0 {
			yield(journal.Record{}, fmt.Errorf("runtime: TagEventsSince: limit %d is negative; use 0 for no limit", limit))
			return
		}
		q := journal.Query{Partition: stream.Partition, Items: []journal.QueryItem{{Tags: []journal.Tag{stream.Tag}}}}
		n := 0
		for r, err := range rt.cfg.Journal.Read(ctx, q, journal.ReadOptions{From: after}) {
			if err != nil {
				yield(journal.Record{}, fmt.Errorf("runtime: events of tag %s: %w", stream, err))
				return
			}
			if !r.Position.After(after) {
				continue // From is inclusive
			}
			if !yield(r, nil) {
				return
			}
			if n++; limit > 0 && n >= limit {
				return
			}
		}
	}
}
