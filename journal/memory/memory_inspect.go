package memory

import (
	"context"

	"github.com/scribe-es/scribe/journal"
	"slices"
)

// TagSummary implements Inspector.
func (m *Journal) TagSummary(ctx context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	stream = stream.Normalize()
	if err := m.lock(ctx); err != nil {
		return journal.TagSummary{}, err
	}
	defer m.mu.Unlock()
	return m.summaryLocked(stream, m.streams[stream]), nil
}

func (m *Journal) summaryLocked(id journal.StreamID, s *memStream) journal.TagSummary {
	sum := journal.TagSummary{Stream: id}
	if s == nil || len(s.records) == 0 {
		return sum
	}
	sum.Version, sum.HeadHash = s.version, s.head
	first, last := m.records.at(s.records[0]), m.records.at(s.last)
	sum.FirstPosition, sum.FirstRecordedAt = first.Position, first.RecordedAt
	sum.LastPosition, sum.LastRecordedAt = last.Position, last.RecordedAt
	return sum
}

// TagsOfGroup implements Inspector. An empty partition means DefaultPartition.
func (m *Journal) TagsOfGroup(ctx context.Context, partition, group string) ([]journal.TagSummary, error) {
	if partition == "" {
		partition = journal.DefaultPartition
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []journal.TagSummary
	for id, s := range m.streams {
		if id.Partition == partition && id.Tag.Group() == group {
			out = append(out, m.summaryLocked(id, s))
		}
	}
	slices.SortFunc(out, func(a, b journal.TagSummary) int {
		switch {
		case a.Stream.Tag < b.Stream.Tag:
			return -1
		case a.Stream.Tag > b.Stream.Tag:
			return 1
		}
		return 0
	})
	return out, nil
}

// TypeSummaries implements Inspector.
func (m *Journal) TypeSummaries(ctx context.Context) ([]journal.TypeSummary, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]journal.TypeSummary, 0, len(m.byType))
	for ty, l := range m.byType {
		ts := journal.TypeSummary{Type: ty, Count: uint64(len(l))}
		if len(l) > 0 {
			ts.FirstPosition, ts.LastPosition = m.records.at(l[0]).Position, m.records.at(l[len(l)-1]).Position
			for _, idx := range l {
				at := m.records.at(idx).RecordedAt
				if ts.FirstRecordedAt.IsZero() || at.Before(ts.FirstRecordedAt) {
					ts.FirstRecordedAt = at
				}
				if at.After(ts.LastRecordedAt) {
					ts.LastRecordedAt = at
				}
			}
		}
		out = append(out, ts)
	}
	slices.SortFunc(out, func(a, b journal.TypeSummary) int {
		switch {
		case a.Type < b.Type:
			return -1
		case a.Type > b.Type:
			return 1
		}
		return 0
	})
	return out, nil
}

// CountAfter implements Inspector.
func (m *Journal) CountAfter(ctx context.Context, after journal.Position) (uint64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return uint64(m.records.len() - m.firstAfterLocked(after)), nil
}
