package journal

import (
	"fmt"
	"slices"
)

// QueryItem matches an event iff (Types is empty or the event's type is one of
// Types) and (Tags is empty or every tag in Tags is among the event's tags). An
// item with neither types nor tags is invalid: use AllEvents to match everything.
type QueryItem struct {
	Types []string
	Tags  []Tag
}

// Matches reports whether e matches the item.
func (it QueryItem) Matches(e *Event) bool {
	if len(it.Types) > 0 && !slices.Contains(it.Types, e.Type) {
		return false
	}
	for _, t := range it.Tags {
		if !e.HasTag(t) {
			return false
		}
	}
	return true
}

// Query is a DCB query: an event matches iff it matches any of Items, or All is
// set. A query is scoped to one partition ("" means DefaultPartition), except
// that All with AllPartitions matches every event of the journal.
type Query struct {
	Partition     string
	All           bool
	AllPartitions bool // only with All
	Items         []QueryItem
}

// AllEvents returns the query that matches every event of the default partition.
func AllEvents() Query { return Query{All: true} }

// TagQuery returns a query matching every event that carries all of tags.
func TagQuery(tags ...Tag) Query { return Query{Items: []QueryItem{{Tags: tags}}} }

// PartitionOrDefault returns the query's partition, DefaultPartition when empty.
func (q Query) PartitionOrDefault() string {
	if q.Partition == "" {
		return DefaultPartition
	}
	return q.Partition
}

// Validate reports a query that matches nothing by construction or is malformed:
// no items without All, an item with neither types nor tags, an empty type or tag,
// a reserved tag (ReservedTagPrefix), or AllPartitions without All. The error wraps ErrInvalidQuery.
func (q Query) Validate() error {
	if q.AllPartitions && !q.All {
		return fmt.Errorf("%w: AllPartitions requires All", ErrInvalidQuery)
	}
	if q.All {
		if len(q.Items) > 0 {
			return fmt.Errorf("%w: a query with All must have no items", ErrInvalidQuery)
		}
		return nil
	}
	if len(q.Items) == 0 {
		return fmt.Errorf("%w: the query has no items; add an item with types or tags, or use AllEvents()", ErrInvalidQuery)
	}
	for i, it := range q.Items {
		if len(it.Types) == 0 && len(it.Tags) == 0 {
			return fmt.Errorf("%w: item %d has neither types nor tags; give it at least one, or use AllEvents() to match everything", ErrInvalidQuery, i)
		}
		for _, ty := range it.Types {
			if ty == "" {
				return fmt.Errorf("%w: item %d has an empty type", ErrInvalidQuery, i)
			}
		}
		for _, t := range it.Tags {
			if t == "" {
				return fmt.Errorf("%w: item %d has an empty tag", ErrInvalidQuery, i)
			}
			if t.IsReserved() {
				return fmt.Errorf("%w: item %d names tag %q, which begins with the reserved %q: no event carries such a tag; query untagged events by their type, or read their chain with ReadStream", ErrInvalidQuery, i, t, ReservedTagPrefix)
			}
		}
	}
	return nil
}

// Matches reports whether record r matches the query, including its partition.
func (q Query) Matches(r *Record) bool {
	if !(q.All && q.AllPartitions) && r.Partition() != q.PartitionOrDefault() {
		return false
	}
	if q.All {
		return true
	}
	for _, it := range q.Items {
		if it.Matches(&r.Event) {
			return true
		}
	}
	return false
}

// AppendCondition is a DCB append condition: the append fails with
// ErrAppendConditionFailed, writing nothing, if any event matching
// FailIfEventsMatch has a position after After (exclusive). With the zero After
// it fails if any event matches at all. Check and write are atomic against
// concurrent appends.
type AppendCondition struct {
	FailIfEventsMatch Query
	After             Position
}
