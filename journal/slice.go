package journal

import (
	"context"
	"crypto/md5" //nolint:gosec // a stable spread of tags over slices, not a security hash
	"encoding/binary"
	"fmt"
	"iter"
	"strings"
)

// SliceSpace is the fixed number of slices that tags hash into. Sliced
// projections cut this space into a number of slices that divides it (see
// projection.Slicing); it never changes, since every stored checkpoint and
// index depends on it.
const SliceSpace = 1024

// SliceOf returns the slice of tag in [0, SliceSpace): the first four bytes
// of the MD5 of the tag's UTF-8 bytes, read big-endian, modulo SliceSpace.
// The Postgres journal computes the same value in SQL (the function
// scribe_slice of migration 9) and indexes it; a test proves that both agree.
// A tag's slice is stable across processes, builds and architectures.
func SliceOf(tag Tag) int {
	sum := md5.Sum([]byte(tag)) //nolint:gosec // see the import
	return int(binary.BigEndian.Uint32(sum[:4]) % SliceSpace)
}

// SliceQuery selects the events that carry at least one tag of Group in
// Partition whose slice (SliceOf) is one of Slices: the feed of a sliced
// projection's runner.
type SliceQuery struct {
	// Partition is the partition read; "" means DefaultPartition.
	Partition string
	// Group is the tag group (the text before the first colon of a tag,
	// such as "account"); required.
	Group string
	// Slices are the slices read, each in [0, SliceSpace); at least one.
	Slices []int
	// Types, when not empty, keeps only events of these types.
	Types []string
}

// Validate reports a query a SliceSubscriber rejects (ErrInvalidQuery).
func (q SliceQuery) Validate() error {
	switch {
	case q.Group == "":
		return fmt.Errorf("%w: SliceQuery: the tag group is empty; name the group whose tags are sliced, such as \"account\"", ErrInvalidQuery)
	case strings.Contains(q.Group, ":"):
		return fmt.Errorf("%w: SliceQuery: the tag group %q contains a colon; a group is the text before a tag's first colon", ErrInvalidQuery, q.Group)
	case len(q.Slices) == 0:
		return fmt.Errorf("%w: SliceQuery: no slices; give at least one slice in [0, %d)", ErrInvalidQuery, SliceSpace)
	}
	for _, s := range q.Slices {
		if s < 0 || s >= SliceSpace {
			return fmt.Errorf("%w: SliceQuery: slice %d is outside [0, %d)", ErrInvalidQuery, s, SliceSpace)
		}
	}
	for _, t := range q.Types {
		if t == "" {
			return fmt.Errorf("%w: SliceQuery: an event type is empty", ErrInvalidQuery)
		}
	}
	return nil
}

// PartitionOrDefault returns the partition q reads.
func (q SliceQuery) PartitionOrDefault() string {
	if q.Partition == "" {
		return DefaultPartition
	}
	return q.Partition
}

// Matches reports whether r is selected by q.
func (q SliceQuery) Matches(r *Record) bool {
	if r.Partition() != q.PartitionOrDefault() {
		return false
	}
	if len(q.Types) > 0 && !contains(q.Types, r.Type) {
		return false
	}
	for _, t := range r.Tags {
		if t.Group() == q.Group && contains(q.Slices, SliceOf(t)) {
			return true
		}
	}
	return false
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// SliceSubscriber is the optional capability of a journal whose feed can be
// read by slice (find it with a type assertion): the memory and Postgres
// journals have it. The Postgres journal answers from an index on the tag
// group, the position and the tag's slice, so a runner reads only the events
// of its own slices.
type SliceSubscriber interface {
	// SubscribeSlices yields every record q selects with position > after,
	// each once (also when several of its tags fall in q's slices), in
	// ascending position order without gaps (gated like Subscribe): first
	// the stored ones, then new ones as they commit, until ctx ends (the
	// last pair is then (zero, ctx.Err())) or the consumer stops.
	SubscribeSlices(ctx context.Context, q SliceQuery, after Position) iter.Seq2[Record, error]
	// ReadSlices yields the stored records q selects with position > after,
	// at most limit (0: all), gated and ordered like SubscribeSlices, and
	// ends.
	ReadSlices(ctx context.Context, q SliceQuery, after Position, limit int) iter.Seq2[Record, error]
}
