package routed

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/snapshots"
)

// Store is a snapshots.Store over the snapshot stores of a Router's
// members: each call goes to the store of the member serving the stream's
// partition when the call is made. A partition the router cannot route
// fails as the router does (partitioned.ErrUnknownPartition). It is a
// snapshots.Lister when every member's store is one (Streams). Safe for
// concurrent use.
type Store struct {
	router *partitioned.Router
	stores map[string]snapshots.Store // member name → its snapshot store
}

var (
	_ snapshots.Store  = (*Store)(nil)
	_ snapshots.Lister = (*Store)(nil)
)

// New returns the Store routing by r over stores, one per member of r by
// member name. It fails with journal.ErrConfiguration when r is nil, a
// member has no store (or a nil one) or a store names no member. It does
// no I/O; stores is copied.
func New(r *partitioned.Router, stores map[string]snapshots.Store) (*Store, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: routed: the Router is nil", journal.ErrConfiguration)
	}
	s := &Store{router: r, stores: make(map[string]snapshots.Store, len(stores))}
	for _, m := range r.Members() {
		st := stores[m.Name]
		if st == nil {
			return nil, fmt.Errorf("%w: routed: member %q has no snapshot store; give one per member", journal.ErrConfiguration, m.Name)
		}
		s.stores[m.Name] = st
	}
	for _, name := range slices.Sorted(maps.Keys(stores)) {
		if _, ok := r.Member(name); !ok {
			return nil, fmt.Errorf("%w: routed: a snapshot store is given for %q, which is not a member (members: %s)", journal.ErrConfiguration, name, memberNames(r))
		}
	}
	return s, nil
}

func memberNames(r *partitioned.Router) string {
	var names []string
	for _, m := range r.Members() {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// store returns the snapshot store of the member serving stream's
// partition now.
func (s *Store) store(stream journal.StreamID) (snapshots.Store, error) {
	name, err := s.router.MemberOf(stream.Partition)
	if err != nil {
		return nil, err
	}
	return s.stores[name], nil
}

// Save saves snap in the store of the member serving its stream's partition.
func (s *Store) Save(ctx context.Context, snap snapshots.Snapshot) error {
	st, err := s.store(snap.Stream)
	if err != nil {
		return err
	}
	return st.Save(ctx, snap)
}

// Load loads from the store of the member serving stream's partition.
func (s *Store) Load(ctx context.Context, stream journal.StreamID, atOrBelow uint64) (snapshots.Snapshot, error) {
	st, err := s.store(stream)
	if err != nil {
		return snapshots.Snapshot{}, err
	}
	return st.Load(ctx, stream, atOrBelow)
}

// List lists from the store of the member serving stream's partition.
func (s *Store) List(ctx context.Context, stream journal.StreamID) ([]snapshots.Info, error) {
	st, err := s.store(stream)
	if err != nil {
		return nil, err
	}
	return st.List(ctx, stream)
}

// Prune prunes in the store of the member serving stream's partition.
func (s *Store) Prune(ctx context.Context, stream journal.StreamID, keep int) (int, error) {
	st, err := s.store(stream)
	if err != nil {
		return 0, err
	}
	return st.Prune(ctx, stream, keep)
}

// Streams implements snapshots.Lister: the streams of partition (or of
// every partition, for "") that have snapshots in the store of the member
// serving their partition now, ordered by partition, then tag. What another
// member's store still holds of a partition it no longer serves is not
// listed, as Load and Prune do not reach it either. It fails with
// snapshots.ErrInvalidArgument when a member's store it must read is no
// snapshots.Lister, and as the router does for a partition it cannot route.
func (s *Store) Streams(ctx context.Context, partition string) ([]snapshots.StreamSummary, error) {
	names := slices.Sorted(maps.Keys(s.stores))
	if partition != "" {
		name, err := s.router.MemberOf(partition)
		if err != nil {
			return nil, err
		}
		names = []string{name}
	}
	var out []snapshots.StreamSummary
	for _, name := range names {
		l, ok := s.stores[name].(snapshots.Lister)
		if !ok {
			return nil, fmt.Errorf("%w: routed: member %q's snapshot store %T cannot list its streams (no snapshots.Lister)", snapshots.ErrInvalidArgument, name, s.stores[name])
		}
		sums, err := l.Streams(ctx, partition)
		if err != nil {
			return nil, fmt.Errorf("routed: member %q: %w", name, err)
		}
		for _, sum := range sums {
			if serving, err := s.router.MemberOf(sum.Stream.Partition); err == nil && serving == name {
				out = append(out, sum)
			}
		}
	}
	slices.SortFunc(out, func(a, b snapshots.StreamSummary) int {
		return cmp.Or(strings.Compare(a.Stream.Partition, b.Stream.Partition), strings.Compare(string(a.Stream.Tag), string(b.Stream.Tag)))
	})
	return out, nil
}
