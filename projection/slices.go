package projection

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// Slicing cuts a projection's events into slices so that several runners
// apply them at once, each owning a contiguous range of slices with its own
// checkpoints and leases (see Store).
//
// The key is a tag group: a projection sliced by "account" sees the events
// that carry an account:* tag, each such tag putting the event in its slice
// (journal.SliceOf, mapped onto Count slices; Postgres indexes it). An event
// with tags in two slices (a transfer) is delivered once for each, with the
// slice in Batch.Slices; TagsIn says which of its tags a delivery is for. A
// stream's events all carry its tag, so they are in one slice; within a
// slice the handler sees events in position order. Events without a tag of
// the group are never delivered. Projection.Query must be left empty:
// Slicing selects the events.
//
// Across several databases (a PartitionedSource), the slices are
// partition × tag slice (Layout): each reads its partition whole, following
// its moves, is delivered the same records as the tag slice on one
// database, and moves its checkpoint past the others (Lease.Passed), so it
// keeps up with its partition for lag and retention. The cost: every
// partition is read Count times.
type Slicing struct {
	// Group is the tag group the projection is keyed by ("account").
	Group string
	// Count is the number of slices, a divisor of journal.SliceSpace (1024):
	// the most runners that can share the work. Default 64. Slice i covers
	// the tag slices [i×1024/Count, (i+1)×1024/Count).
	Count int
	// Partition is the partition read; "" means journal.DefaultPartition,
	// and across several databases (PartitionedSource) every partition of
	// the source.
	Partition string
	// Types, when not empty, keeps only events of these types.
	Types []string
}

// withDefaults validates s and fills its defaults.
func (s Slicing) withDefaults() (Slicing, error) {
	if s.Count == 0 {
		s.Count = 64
	}
	switch {
	case s.Count < 0 || s.Count > journal.SliceSpace || journal.SliceSpace%s.Count != 0:
		return s, fmt.Errorf("projection: Slicing.Count is %d; use a divisor of %d (such as 16, 64 or 256), or 0 for the default 64", s.Count, journal.SliceSpace)
	case s.Partition == "":
		s.Partition = journal.DefaultPartition
	}
	s.Types = slices.Clone(s.Types)
	q := journal.SliceQuery{Partition: s.Partition, Group: s.Group, Slices: []int{0}, Types: s.Types}
	if err := q.Validate(); err != nil {
		return s, fmt.Errorf("projection: Slicing: %w", err)
	}
	return s, nil
}

// SliceOf returns the slice of tag, in [0, Count), and false when tag is not
// of the group. Count must be set (a Slicing from a runner has it).
func (s Slicing) SliceOf(tag journal.Tag) (int, bool) {
	if tag.Group() != s.Group || s.Count <= 0 {
		return 0, false
	}
	return journal.SliceOf(tag) / (journal.SliceSpace / s.Count), true
}

// TagsIn returns the tags of r that are of the group and in slice: the keys a
// delivery of r for slice stands for. slice may be a slice of a sliced
// projection across several databases (Batch.Slices of one: partition ×
// tag slice), whose tag slice is slice mod Count.
func (s Slicing) TagsIn(r journal.Record, slice int) []journal.Tag {
	if s.Count > 0 {
		slice %= s.Count
	}
	var out []journal.Tag
	for _, t := range r.Tags {
		if i, ok := s.SliceOf(t); ok && i == slice {
			out = append(out, t)
		}
	}
	return out
}

// slicesOf returns the slices r is delivered to, ascending, once each.
func (s Slicing) slicesOf(r *journal.Record) []int {
	var out []int
	for _, t := range r.Tags {
		if i, ok := s.SliceOf(t); ok && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// query returns the journal query of the tag slices of the given slices.
func (s Slicing) query(owned []int) journal.SliceQuery {
	w := journal.SliceSpace / s.Count
	q := journal.SliceQuery{Partition: s.Partition, Group: s.Group, Types: s.Types}
	for _, i := range owned {
		for h := i * w; h < (i+1)*w; h++ {
			q.Slices = append(q.Slices, h)
		}
	}
	return q
}

// Share returns the slices [lo, hi) that the runner owner should own when
// the live runners are members (sorted, as Store.Join returns them):
// contiguous ranges as equal as Count allows, in member order. An owner not
// among members owns nothing.
func (s Slicing) Share(members []string, owner string) (lo, hi int) {
	i := slices.Index(members, owner)
	if i < 0 {
		return 0, 0
	}
	return i * s.Count / len(members), (i + 1) * s.Count / len(members)
}

// Layout returns the Layout of a projection sliced as s; s must have its
// defaults (Count and Partition set).
func (s Slicing) Layout() Layout {
	return Layout{Group: s.Group, Count: s.Count, Partition: s.Partition}
}

// Layout is how a store cuts a projection version's events into slices,
// each with its own checkpoint and lease. The zero value is one slice
// (slice 0) over what the projection's Query selects. With Group, Count
// slices of the group's tags in Partition (Projection.Slicing); with
// Partitions, one slice per partition (PartitionedSource); with both,
// Count slices per partition in the order of Partitions (Partition empty):
// slice i is tag slice i mod Count of Partitions[i / Count]. A layout is
// part of a version: a store refuses to join a version with another one
// (ErrSlicingChanged).
type Layout struct {
	Group     string
	Count     int
	Partition string
	// Partitions are the partitions across several databases, in slice
	// order: a slice (with Group, Count slices) each.
	Partitions []string
}

// Sliced reports whether l has slices of its own (by tag or by
// partition), as opposed to one slice for the whole projection.
func (l Layout) Sliced() bool { return l.Group != "" || len(l.Partitions) > 0 }

// PerPartition is the number of slices each partition of a layout by
// partition has: Count when it is also sliced by tag, else 1.
func (l Layout) PerPartition() int {
	if l.Group != "" {
		return max(1, l.Count)
	}
	return 1
}

// Kind names l's kind in messages: "unsliced", "sliced by tag group …",
// "by partition" or "sliced by tag group … of each partition".
func (l Layout) Kind() string {
	switch {
	case l.Group != "" && len(l.Partitions) > 0:
		return fmt.Sprintf("sliced by tag group %q into %d slices of each partition across several databases", l.Group, l.Count)
	case l.Group != "":
		return fmt.Sprintf("sliced by tag group %q into %d slices of partition %q", l.Group, l.Count, l.Partition)
	case len(l.Partitions) > 0:
		return "sliced by partition"
	}
	return "unsliced"
}

// Same reports whether a store that keeps stored may join a runner that
// asks for l: both unsliced, both by partition, by the same tag slicing,
// or both by partition with the same tag slicing.
func (l Layout) Same(stored Layout) bool {
	return l.Group == stored.Group && l.Count == stored.Count && l.Partition == stored.Partition &&
		(len(l.Partitions) > 0) == (len(stored.Partitions) > 0)
}

// Lease is a runner's exclusive right to apply the events of one slice of
// a projection (slice 0 of an unsliced one). Stores fence every commit
// with it: a commit under a lease whose epoch is no longer current, or
// that expired, or whose checkpoint moved, fails with ErrFenced.
type Lease struct {
	Key   Key
	Slice int
	Owner string
	Epoch uint64
	// TTL is how long a claim, a renewal or a commit keeps the lease.
	TTL time.Duration
	// Checkpoint is the position of the slice's last applied record (zero:
	// none), Events how many deliveries of the slice were applied.
	Checkpoint journal.Position
	Events     uint64
	// Partition is the partition the slice reads: each slice's own for a
	// projection across several databases (see PartitionedSource), the
	// Slicing's for a sliced one, "" for an unsliced one.
	Partition string
	// Member and EventID place Checkpoint across several databases: a
	// position on the member (database) Member, of the event EventID
	// (uuid.Nil: none), found again by ID after a partition move. Commit
	// stores the Member a runner sets. Empty over one journal.
	Member  string
	EventID uuid.UUID
	// Passed and PassedID, when PassedID is set, are where Commit moves the
	// slice's checkpoint instead: a later record of its feed that it passed
	// over undelivered (partition × tag slice), on Member. Such a lease may
	// come with no record delivered for it.
	Passed   journal.Position
	PassedID uuid.UUID
}

// CheckCommitArgs reports arguments of Store.Commit that are not a
// commit: no lease, slices not one per record, or no record while some
// lease has nothing passed (Lease.PassedID). Both stores check through it.
func CheckCommitArgs(ls []Lease, records []journal.Record, sl []int) error {
	ok := len(ls) > 0 && len(sl) == len(records)
	for _, l := range ls {
		ok = ok && (len(records) > 0 || l.PassedID != uuid.Nil)
	}
	if !ok {
		return errors.New("projection: Commit needs leases, one slice per record, and records unless every lease has passed records (Lease.PassedID)")
	}
	return nil
}

// FirstPosition returns the position of the first of records (a
// HandlerError's At), zero when there is none.
func FirstPosition(records []journal.Record) journal.Position {
	if len(records) == 0 {
		return journal.Position{}
	}
	return records[0].Position
}

// Check reports why l may not act on its slice, given the slice as its
// store records it now (cur), whether cur's lease is unexpired by the
// store's clock (live) and the active version of the projection (0: none):
// ErrSuperseded, ErrFenced, or nil when it may. Both stores check every
// lease through it.
func (l Lease) Check(cur SliceStatus, live bool, active int) error {
	switch {
	case active > l.Key.Version:
		return fmt.Errorf("%w: %s is active", ErrSuperseded, Key{l.Key.Name, active})
	case cur.Epoch != l.Epoch || cur.Owner != l.Owner:
		return fmt.Errorf("%w: slice %d of %s is at epoch %d (owner %q), the lease has epoch %d", ErrFenced, l.Slice, l.Key, cur.Epoch, cur.Owner, l.Epoch)
	case !live:
		return fmt.Errorf("%w: the lease of slice %d of %s expired", ErrFenced, l.Slice, l.Key)
	}
	return nil
}

// CheckCommit is Check for a commit: it also fails with ErrFenced when the
// slice's checkpoint is no longer the lease's (another runner committed).
func (l Lease) CheckCommit(cur SliceStatus, live bool, active int) error {
	if err := l.Check(cur, live, active); err != nil {
		return err
	}
	if cur.Checkpoint != l.Checkpoint {
		return fmt.Errorf("%w: the checkpoint of slice %d of %s is %s, the runner expected %s", ErrFenced, l.Slice, l.Key, cur.Checkpoint, l.Checkpoint)
	}
	return nil
}

// SliceStatus describes one slice of a projection as its store records it.
type SliceStatus struct {
	Slice      int
	Checkpoint journal.Position
	Events     uint64
	// Partition, Member and EventID are as in Lease.
	Partition string
	Member    string
	EventID   uuid.UUID
	// Owner and Epoch name the lease holder ("" when none); LeaseUntil is
	// when the lease lapses.
	Owner      string
	Epoch      uint64
	LeaseUntil time.Time
}

// ErrSlicingChanged: the store knows the projection version with another
// Layout (unsliced, another tag slicing, or by partition). The layout is
// part of a version: give the new one a new version (it rebuilds beside
// the old one).
var ErrSlicingChanged = errors.New("projection: the projection version is stored with another slicing")
