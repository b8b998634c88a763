package projection

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

var _ SliceStore[NoTx] = (*MemoryStore)(nil)

// memSliced is a sliced projection version in the memory store, or a
// projection across several databases (partitioned: one slice per
// partition).
type memSliced struct {
	s           Slicing
	partitioned bool
	// slices only grows, copy on write, under MemoryStore.mu: read it with
	// MemoryStore.sliceList outside the lock.
	slices  []*memSlice
	runners map[string]time.Time // owner → lease end; guarded by MemoryStore.mu
}

type memSlice struct {
	apply sync.Mutex  // held through a commit of the slice (with its handler), claims, renewals, resets
	st    SliceStatus // guarded by MemoryStore.mu
}

// slicedLocked returns k's slices, or nil. s.mu is held.
func (s *MemoryStore) slicedLocked(k Key) *memSliced {
	if s.slicings == nil {
		return nil
	}
	return s.slicings[k]
}

// JoinSlices implements SliceStore.
func (s *MemoryStore) JoinSlices(ctx context.Context, k Key, sl Slicing, owner string, ttl time.Duration) ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	sl, err := sl.withDefaults()
	if err != nil {
		return nil, err
	}
	return s.join(k, owner, ttl, func(m *memSliced, created bool) error {
		if created {
			m.s = sl
			for i := range sl.Count {
				m.slices = append(m.slices, &memSlice{st: SliceStatus{Slice: i, Partition: sl.Partition}})
			}
		}
		if m.partitioned || m.s.Group != sl.Group || m.s.Count != sl.Count || m.s.Partition != sl.Partition {
			return fmt.Errorf("%w: %s is sliced by group %q into %d slices of partition %q (or by partition), the runner asks for %q, %d, %q; give the new slicing a new version",
				ErrSlicingChanged, k, m.s.Group, m.s.Count, m.s.Partition, sl.Group, sl.Count, sl.Partition)
		}
		return nil
	})
}

// JoinPartitions implements SliceStore.
func (s *MemoryStore) JoinPartitions(ctx context.Context, k Key, partitions []string, owner string, ttl time.Duration) ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return s.join(k, owner, ttl, func(m *memSliced, created bool) error {
		if created {
			m.partitioned = true
		}
		if !m.partitioned {
			return fmt.Errorf("%w: %s is sliced by group %q; a projection across several databases has one slice per partition: give it a new version", ErrSlicingChanged, k, m.s.Group)
		}
		list := m.slices
		for _, p := range partitions {
			if !slices.ContainsFunc(list, func(x *memSlice) bool { return x.st.Partition == p }) {
				list = append(slices.Clip(list), &memSlice{st: SliceStatus{Slice: len(list), Partition: p}})
			}
		}
		m.slices = list
		return nil
	})
}

// join records owner as a live runner of k after shape created or checked
// k's slices (created: k had none), and returns the live runners. A
// projection that applied events unsliced cannot be sliced.
func (s *MemoryStore) join(k Key, owner string, ttl time.Duration, shape func(m *memSliced, created bool) error) ([]string, error) {
	if owner == "" || ttl <= 0 {
		return nil, fmt.Errorf("projection %s: JoinSlices needs an owner and a positive TTL", k)
	}
	r := s.row(k) // the projection-wide status
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slicings == nil {
		s.slicings = map[Key]*memSliced{}
	}
	m := s.slicings[k]
	created := m == nil
	if created {
		if r.st.Events > 0 || !r.st.Checkpoint.IsZero() {
			return nil, fmt.Errorf("%w: %s applied %d events as an unsliced projection; give the slicing a new version", ErrSlicingChanged, k, r.st.Events)
		}
		m = &memSliced{runners: map[string]time.Time{}}
	}
	if err := shape(m, created); err != nil {
		return nil, err
	}
	if created {
		s.slicings[k] = m
	}
	now := s.now()
	m.runners[owner] = now.Add(ttl)
	var live []string
	for o, until := range m.runners {
		if now.Before(until) {
			live = append(live, o)
		} else {
			delete(m.runners, o)
		}
	}
	slices.Sort(live)
	return live, nil
}

// LeaveSlices implements SliceStore.
func (s *MemoryStore) LeaveSlices(ctx context.Context, k Key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.slicedLocked(k); m != nil {
		delete(m.runners, owner)
	}
	return nil
}

// sliceCheck reports why l may not act on its slice (nil when it may). s.mu
// is held.
func (s *MemoryStore) sliceCheck(m *memSliced, l SliceLease) error {
	if l.Slice < 0 || l.Slice >= len(m.slices) {
		return fmt.Errorf("%w: %s has no slice %d", ErrFenced, l.Key, l.Slice)
	}
	st := m.slices[l.Slice].st
	switch v, ok := s.active[l.Key.Name]; {
	case ok && v > l.Key.Version:
		return fmt.Errorf("%w: %s is active", ErrSuperseded, Key{l.Key.Name, v})
	case st.Epoch != l.Epoch || st.Owner != l.Owner:
		return fmt.Errorf("%w: slice %d of %s is at epoch %d (owner %q), the lease has epoch %d", ErrFenced, l.Slice, l.Key, st.Epoch, st.Owner, l.Epoch)
	case !s.now().Before(st.LeaseUntil):
		return fmt.Errorf("%w: the lease of slice %d of %s expired at %s", ErrFenced, l.Slice, l.Key, st.LeaseUntil.Format(time.RFC3339Nano))
	}
	return nil
}

// lockSlices locks the apply mutexes of the slices idx of list (from
// sliceList; indexes outside it are skipped) in ascending order and
// returns the unlock.
func lockSlices(list []*memSlice, idx []int) func() {
	idx = slices.Clone(idx)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	idx = slices.DeleteFunc(idx, func(i int) bool { return i < 0 || i >= len(list) })
	for _, i := range idx {
		list[i].apply.Lock()
	}
	return func() {
		for _, i := range idx {
			list[i].apply.Unlock()
		}
	}
}

// sliceList returns m's slices as they are now (the list only grows, copy
// on write).
func (s *MemoryStore) sliceList(m *memSliced) []*memSlice {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.slices
}

// slicedOf returns k's slices or an error saying JoinSlices comes first.
func (s *MemoryStore) slicedOf(k Key) (*memSliced, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.slicedLocked(k)
	if m == nil {
		return nil, fmt.Errorf("projection %s is not sliced in this store: JoinSlices first", k)
	}
	return m, nil
}

// ClaimSlices implements SliceStore.
func (s *MemoryStore) ClaimSlices(ctx context.Context, k Key, owner string, ttl time.Duration, want []int) ([]SliceLease, error) {
	if owner == "" || ttl <= 0 {
		return nil, fmt.Errorf("projection %s: ClaimSlices needs an owner and a positive TTL", k)
	}
	m, err := s.slicedOf(k)
	if err != nil {
		return nil, err
	}
	list := s.sliceList(m)
	for _, i := range want {
		if i < 0 || i >= len(list) {
			return nil, fmt.Errorf("projection %s has slices 0 to %d; slice %d does not exist", k, len(list)-1, i)
		}
	}
	unlock := lockSlices(list, want)
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[k]
	if r != nil && r.paused {
		return nil, fmt.Errorf("%w: %s (resume it with `scribe projections resume`)", ErrPaused, k)
	}
	if v, ok := s.active[k.Name]; ok && v > k.Version {
		return nil, fmt.Errorf("%w: %s is active", ErrSuperseded, Key{k.Name, v})
	}
	now := s.now()
	var out []SliceLease
	for _, i := range want {
		st := &m.slices[i].st
		if st.Owner != "" && st.Owner != owner && now.Before(st.LeaseUntil) {
			continue
		}
		st.Epoch++
		st.Owner, st.LeaseUntil = owner, now.Add(ttl)
		out = append(out, SliceLease{Key: k, Slice: i, Owner: owner, Epoch: st.Epoch, TTL: ttl, Checkpoint: st.Checkpoint, Events: st.Events,
			Partition: st.Partition, Member: st.Member, EventID: st.EventID})
	}
	if r != nil && len(out) > 0 {
		r.st.State, r.st.UpdatedAt = r.st.State.Next(OpClaim, r.paused), now
	}
	return out, nil
}

// RenewSlices implements SliceStore.
func (s *MemoryStore) RenewSlices(ctx context.Context, ls []SliceLease) ([]int, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	m, err := s.slicedOf(ls[0].Key)
	if err != nil {
		return nil, err
	}
	idx := make([]int, 0, len(ls))
	for _, l := range ls {
		idx = append(idx, l.Slice)
	}
	unlock := lockSlices(s.sliceList(m), idx)
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost []int
	for _, l := range ls {
		if err := s.sliceCheck(m, l); err != nil {
			lost = append(lost, l.Slice)
			continue
		}
		m.slices[l.Slice].st.LeaseUntil = s.now().Add(l.TTL)
	}
	return lost, nil
}

// ReleaseSlices implements SliceStore.
func (s *MemoryStore) ReleaseSlices(ctx context.Context, ls []SliceLease) error {
	if len(ls) == 0 {
		return nil
	}
	m, err := s.slicedOf(ls[0].Key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range ls {
		if l.Slice < 0 || l.Slice >= len(m.slices) {
			continue
		}
		if st := &m.slices[l.Slice].st; st.Epoch == l.Epoch && st.Owner == l.Owner {
			st.Owner, st.LeaseUntil = "", time.Time{}
		}
	}
	return nil
}

// CommitSlices implements SliceStore: apply runs while the slices of ls are
// locked.
func (s *MemoryStore) CommitSlices(ctx context.Context, ls []SliceLease, records []journal.Record, sl []int, apply func(ctx context.Context, tx NoTx) error) error {
	if len(records) == 0 || len(ls) == 0 || len(sl) != len(records) {
		return fmt.Errorf("projection: CommitSlices needs records, one slice per record and their leases")
	}
	k := ls[0].Key
	m, err := s.slicedOf(k)
	if err != nil {
		return err
	}
	list := s.sliceList(m)
	idx := make([]int, len(ls))
	for i, l := range ls {
		if l.Slice < 0 || l.Slice >= len(list) {
			return fmt.Errorf("%w: %s has no slice %d", ErrFenced, k, l.Slice)
		}
		idx[i] = l.Slice
	}
	unlock := lockSlices(list, idx)
	defer unlock()
	s.mu.Lock()
	for _, l := range ls {
		if err = s.sliceCheck(m, l); err == nil && m.slices[l.Slice].st.Checkpoint != l.Checkpoint {
			err = fmt.Errorf("%w: the checkpoint of slice %d of %s is %s, the runner expected %s", ErrFenced, l.Slice, k, m.slices[l.Slice].st.Checkpoint, l.Checkpoint)
		}
		if err != nil {
			break
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &memWrites{k: k}
	err = apply(ctx, NoTx{w})
	changes := w.finish()
	if err != nil {
		return &HandlerError{At: records[0].Position, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store(k, changes)
	now := s.now()
	for _, l := range ls {
		st := &m.slices[l.Slice].st
		for i := range records {
			if sl[i] == l.Slice {
				st.Checkpoint, st.EventID, st.Member = records[i].Position, records[i].ID, l.Member
				st.Events++
			}
		}
		st.LeaseUntil = now.Add(l.TTL)
	}
	if r := s.rows[k]; r != nil {
		r.st.Events += uint64(len(records))
		if records[len(records)-1].Position.After(r.st.Checkpoint) {
			r.st.Checkpoint = records[len(records)-1].Position
		}
		r.st.State, r.st.Error, r.st.FailedAt, r.st.UpdatedAt = r.st.State.Next(OpCommit, r.paused), "", journal.Position{}, now
	}
	return nil
}

// FailSlice implements SliceStore.
func (s *MemoryStore) FailSlice(ctx context.Context, l SliceLease, pos journal.Position, msg string) error {
	m, err := s.slicedOf(l.Key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Slice < 0 || l.Slice >= len(m.slices) || m.slices[l.Slice].st.Epoch != l.Epoch {
		return fmt.Errorf("%w: slice %d of %s moved on to a newer epoch", ErrFenced, l.Slice, l.Key)
	}
	if r := s.rows[l.Key]; r != nil {
		r.st.State, r.st.FailedAt, r.st.Error, r.st.UpdatedAt = r.st.State.Next(OpFail, r.paused), pos, msg, s.now()
	}
	return nil
}

// SliceStatuses implements SliceStore.
func (s *MemoryStore) SliceStatuses(ctx context.Context, k Key) ([]SliceStatus, Slicing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.slicedLocked(k)
	if m == nil {
		return nil, Slicing{}, nil
	}
	out := make([]SliceStatus, len(m.slices))
	for i, x := range m.slices {
		out[i] = x.st
	}
	return out, m.s, nil
}

// resetSlicesLocked fences every slice lease of k and, with zero, moves the
// slices' checkpoints back to zero. s.mu is held; the caller holds every
// slice's apply lock (lockAllSlices).
func (s *MemoryStore) resetSlicesLocked(k Key, zero bool) {
	m := s.slicedLocked(k)
	if m == nil {
		return
	}
	for _, x := range m.slices {
		x.st.Epoch++
		x.st.Owner, x.st.LeaseUntil = "", time.Time{}
		if zero {
			x.st.Checkpoint, x.st.Events, x.st.Member, x.st.EventID = journal.Position{}, 0, "", uuid.Nil
		}
	}
}

// lockAllSlices locks every slice of k (none when k is not sliced), so
// that no batch of k is being applied, and returns the unlock.
func (s *MemoryStore) lockAllSlices(k Key) func() {
	s.mu.Lock()
	m := s.slicedLocked(k)
	var list []*memSlice
	if m != nil {
		list = m.slices
	}
	s.mu.Unlock()
	all := make([]int, len(list))
	for i := range all {
		all[i] = i
	}
	return lockSlices(list, all)
}
