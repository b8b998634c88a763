package runtime

import (
	"context"
	"fmt"
	"iter"

	"github.com/scribe-es/scribe/journal"
)

// TagSummary returns what the journal knows of a tag stream: its latest
// version (also its event count) and its first and last events' positions;
// zeros for an unknown tag.
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

// TagsOfGroup returns, ordered by tag, the summaries of the tag streams of
// group group (the text before the first colon) in partition ("": default).
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

// TagEventsSince yields, in position order, up to limit (0: all) events of a
// tag stream after position after (zero: from the first). Like every
// catch-up read it never skips an event committing later at a lower
// position: resume from the last position seen.
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
