package runtime

import (
	"context"
	"fmt"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// sealedSnapshots wraps the snapshot store of a runtime with a key store:
// a snapshot of a stream bound to data subjects holds their personal data
// in clear (it is decoded state), so it is sealed as a whole under a key
// derived from all their data keys (erasure.SealSnapshot) and becomes
// unusable once any of them is erased. Snapshots of other streams pass
// through unchanged. Safe for concurrent use.
type sealedSnapshots struct {
	snapshots.Store
	keys *keyring
}

// Save seals s when its stream is bound to subjects. An erased subject
// needs no seal once this runtime has evicted the actors of its streams
// (every state it holds of them was rebuilt after the erasure, without the
// subject's data): the snapshot is sealed for the others, or stored as is
// when none is left. Before that eviction it saves nothing: the state may
// still hold the erased subject's data, and no key exists to seal it.
func (s sealedSnapshots) Save(ctx context.Context, snap snapshots.Snapshot) error {
	subjects, err := s.keys.store.StreamSubjects(ctx, snap.Stream)
	if err != nil {
		return fmt.Errorf("runtime: sealing the snapshot of stream %s: %w", snap.Stream, err)
	}
	if len(subjects) == 0 {
		return s.Store.Save(ctx, snap)
	}
	keys, err := s.keys.lookup(ctx, subjects)
	if err != nil {
		return fmt.Errorf("runtime: sealing the snapshot of stream %s: %w", snap.Stream, err)
	}
	live := subjects[:0:0]
	for _, sub := range subjects {
		if _, ok := keys.Keys[sub]; ok {
			live = append(live, sub)
			continue
		}
		if _, erased := keys.Erased[sub]; !erased {
			return nil // unknown to the key store: no snapshot
		}
		if !s.keys.wasDropped(keys.Erased[sub]) {
			return nil // erased, but this runtime may still hold its data: no snapshot
		}
	}
	if len(live) == 0 {
		return s.Store.Save(ctx, snap)
	}
	sealed, err := erasure.SealSnapshot(snap.State, snap.Stream, snap.Version, snap.SchemaVersion, live, keys.Keys)
	if err != nil {
		return fmt.Errorf("runtime: sealing the snapshot of stream %s: %w", snap.Stream, err)
	}
	snap.State = sealed
	return s.Store.Save(ctx, snap)
}

// Load opens a sealed snapshot; one that a subject's erasure made unusable
// is reported as snapshots.ErrNotFound, so the stream is replayed from the
// journal (with the erased fields as zero values).
func (s sealedSnapshots) Load(ctx context.Context, stream journal.StreamID, atOrBelow uint64) (snapshots.Snapshot, error) {
	snap, err := s.Store.Load(ctx, stream, atOrBelow)
	if err != nil || !erasure.IsSealedSnapshot(snap.State) {
		return snap, err
	}
	subjects, err := erasure.SnapshotSubjects(snap.State)
	if err != nil {
		return snapshots.Snapshot{}, fmt.Errorf("runtime: the snapshot of stream %s at version %d: %w", stream, snap.Version, err)
	}
	keys, err := s.keys.lookup(ctx, subjects)
	if err != nil {
		return snapshots.Snapshot{}, err
	}
	state, usable, err := erasure.OpenSnapshot(snap.State, stream, snap.Version, snap.SchemaVersion, keys)
	if err != nil {
		return snapshots.Snapshot{}, fmt.Errorf("runtime: the snapshot of stream %s at version %d: %w", stream, snap.Version, err)
	}
	if !usable {
		return snapshots.Snapshot{}, fmt.Errorf("%w: the snapshot of stream %s at version %d is sealed for an erased subject", snapshots.ErrNotFound, stream, snap.Version)
	}
	snap.State = state
	return snap, nil
}
