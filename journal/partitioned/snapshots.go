package partitioned

import (
	"context"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// Snapshots returns a snapshots.Store that keeps each stream's snapshots in
// its partition's member (Member.Snapshots), or nil when a member has no
// snapshot store. Safe for concurrent use.
func (r *Router) Snapshots() snapshots.Store { return r.snaps }

type routedSnapshots struct{ r *Router }

func (s routedSnapshots) store(stream journal.StreamID) (snapshots.Store, error) {
	m, err := s.r.route(stream.Partition)
	if err != nil {
		return nil, err
	}
	return m.Snapshots, nil
}

func (s routedSnapshots) Save(ctx context.Context, snap snapshots.Snapshot) error {
	st, err := s.store(snap.Stream)
	if err != nil {
		return err
	}
	return st.Save(ctx, snap)
}

func (s routedSnapshots) Load(ctx context.Context, stream journal.StreamID, atOrBelow uint64) (snapshots.Snapshot, error) {
	st, err := s.store(stream)
	if err != nil {
		return snapshots.Snapshot{}, err
	}
	return st.Load(ctx, stream, atOrBelow)
}

func (s routedSnapshots) List(ctx context.Context, stream journal.StreamID) ([]snapshots.Info, error) {
	st, err := s.store(stream)
	if err != nil {
		return nil, err
	}
	return st.List(ctx, stream)
}

func (s routedSnapshots) Prune(ctx context.Context, stream journal.StreamID, keep int) (int, error) {
	st, err := s.store(stream)
	if err != nil {
		return 0, err
	}
	return st.Prune(ctx, stream, keep)
}
