package projection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// Slicing cuts a projection's events into slices so that several runners
// apply them at once, each owning a contiguous range of slices with its own
// checkpoints and leases (see SliceStore).
//
// The key is a tag group: a projection sliced by "account" sees the events
// that carry an account:* tag, and each such tag puts the event in the slice
// of that tag (journal.SliceOf, mapped onto Count slices). An event with two
// account tags in two slices (a transfer) is delivered twice, once for each
// slice, each time with the slice in Batch.Slices; TagsIn says which of its
// tags the delivery is for, so a read model keyed by account updates each
// account once. Two tags in one slice make one delivery. A stream's events
// all carry its tag, so they are all in one slice; within a slice the
// handler sees events in position order.
//
// Events without a tag of the group belong to no slice and are never
// delivered: a projection that needs them cannot be sliced by this group.
// Projection.Query must be left empty (NewRunner rejects a sliced projection
// with a Query): Slicing selects the events.
type Slicing struct {
	// Group is the tag group the projection is keyed by ("account").
	Group string
	// Count is the number of slices, a divisor of journal.SliceSpace (1024):
	// the most runners that can share the work. Default 64. Slice i covers
	// the tag slices [i×1024/Count, (i+1)×1024/Count).
	Count int
	// Partition is the partition read; "" means journal.DefaultPartition.
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
// delivery of r for slice stands for.
func (s Slicing) TagsIn(r journal.Record, slice int) []journal.Tag {
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
// the live runners are members (sorted, as SliceStore.JoinSlices returns
// them): contiguous ranges as equal as Count allows, in member order. An
// owner not among members owns nothing.
func (s Slicing) Share(members []string, owner string) (lo, hi int) {
	i := slices.Index(members, owner)
	if i < 0 {
		return 0, 0
	}
	n := len(members)
	return i * s.Count / n, (i + 1) * s.Count / n
}

// SliceLease is a runner's exclusive right to apply the events of one slice
// of a sliced projection. Stores fence every commit with it, as they do a
// Lease: a commit under a slice lease whose epoch is no longer current, or
// that expired, or whose checkpoint moved, fails with ErrFenced.
type SliceLease struct {
	Key   Key
	Slice int
	Owner string
	Epoch uint64
	TTL   time.Duration
	// Checkpoint is the position of the slice's last applied record (zero:
	// none), Events how many deliveries of the slice were applied.
	Checkpoint journal.Position
	Events     uint64
	// Partition is the partition the slice reads: each slice's own for a
	// projection across several databases (see PartitionedSource), the
	// Slicing's otherwise.
	Partition string
	// Member and EventID place Checkpoint independently of the database, for
	// a projection across several databases: Checkpoint is a position on
	// the member (database) named Member, and EventID is the event ID of
	// the record there (uuid.Nil: none applied). A partition move keeps
	// event IDs, so the runner finds its place on the partition's new
	// member by EventID. A runner sets Member to the member a batch's
	// records of the slice were read from before CommitSlices, which
	// stores it with the new checkpoint and the last record's event ID.
	// Empty for a projection over one journal.
	Member  string
	EventID uuid.UUID
}

// SliceStatus describes one slice of a sliced projection as its store
// records it.
type SliceStatus struct {
	Slice      int
	Checkpoint journal.Position
	Events     uint64
	// Partition, Member and EventID are as in SliceLease.
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
// Slicing (group, count or partition). Slicing is part of a version: give
// the new slicing a new version (it rebuilds beside the old one).
var ErrSlicingChanged = errors.New("projection: the projection version is stored with another slicing")

// SliceStore is a Store that also keeps sliced projections: per-slice
// checkpoints and leases, and the list of live runners from which each
// runner derives its range (Slicing.Share). Both stores implement it.
// Implementations are safe for concurrent use, by several processes when
// they share a database. The projection-wide calls of Store (Setup, Reset,
// Pause, Activate, Status, dead letters) apply to sliced projections too:
// Reset moves every slice's checkpoint back to zero and fences every slice
// lease, and Pause fences them.
type SliceStore[Tx any] interface {
	Store[Tx]
	// JoinSlices records owner as a live runner of k until ttl from now
	// (renewing it) and returns the live runners, sorted. The first call for
	// k creates its s.Count slices; a later call with another slicing fails
	// with ErrSlicingChanged.
	JoinSlices(ctx context.Context, k Key, s Slicing, owner string, ttl time.Duration) ([]string, error)
	// JoinPartitions is JoinSlices for a projection across several
	// databases (PartitionedSource): k has one slice per partition, and the
	// call adds a slice, with a zero checkpoint, for each of partitions
	// that has none (numbered after the existing ones; slices are never
	// removed). SliceStatuses then says which partition each slice reads.
	// It fails with ErrSlicingChanged when k is sliced by a tag group, or
	// already applied events as an unsliced projection.
	JoinPartitions(ctx context.Context, k Key, partitions []string, owner string, ttl time.Duration) ([]string, error)
	// LeaveSlices removes owner from k's live runners.
	LeaveSlices(ctx context.Context, k Key, owner string) error
	// ClaimSlices claims, among want, the slices whose lease is free,
	// expired or owner's: each gets a new epoch and lasts ttl. It returns
	// the leases obtained (the others are held by live runners), ErrPaused
	// when k is paused, ErrSuperseded when a newer version is active.
	ClaimSlices(ctx context.Context, k Key, owner string, ttl time.Duration, want []int) ([]SliceLease, error)
	// RenewSlices extends the live leases among ls by their TTL and returns
	// the slices whose lease is no longer current (fenced, expired, reset).
	RenewSlices(ctx context.Context, ls []SliceLease) (lost []int, err error)
	// ReleaseSlices gives the leases up so another runner claims them at once.
	ReleaseSlices(ctx context.Context, ls []SliceLease) error
	// CommitSlices runs apply and moves the checkpoint of each slice of ls
	// from its lease's Checkpoint to the last of records delivered for it
	// (slices[i] is the slice records[i] is delivered for), atomically where
	// the store has transactions, and extends those leases; with the new
	// checkpoint it stores the lease's Member and the event ID of that last
	// record (SliceLease.EventID). It fails with
	// ErrFenced, without running apply, when any lease of ls is not current
	// and live or its slice's checkpoint moved; with ErrSuperseded when a
	// newer version is active; with a *HandlerError when apply failed
	// (nothing stored).
	CommitSlices(ctx context.Context, ls []SliceLease, records []journal.Record, slices []int, apply func(ctx context.Context, tx Tx) error) error
	// FailSlice records that k stopped at the record at pos with msg (its
	// status becomes StateFailed), when l is still current.
	FailSlice(ctx context.Context, l SliceLease, pos journal.Position, msg string) error
	// SliceStatuses lists k's slices (none for a projection that is not
	// sliced) and its slicing (zero for a projection across several
	// databases, whose slices are its partitions).
	SliceStatuses(ctx context.Context, k Key) ([]SliceStatus, Slicing, error)
}
