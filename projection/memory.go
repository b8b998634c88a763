package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// MemoryStore keeps projections' slices, leases, dead letters and rows read
// models (RowStore) in memory, for tests and for services on the memory
// journal. A batch's Rows writes are stored with its checkpoints or not at
// all; a read model of the handler's own (a map) is not undone by a failed
// batch. It fences like the Postgres store: a commit, claim, renewal or
// reset of a slice waits for the batch being applied to it.
type MemoryStore struct {
	// Now is the store's clock; default time.Now.
	Now func() time.Time

	// replayMu serializes dead-letter replays (held while apply runs), so
	// that concurrent replays of one letter apply it once.
	replayMu sync.Mutex

	mu     sync.Mutex
	projs  map[Key]*memProj
	active map[string]int
	dead   map[Key][]DeadLetter
	// docs are the rows read models: projection, collection, key.
	docs map[Key]map[string]map[string]json.RawMessage
}

// memProj is one projection version: its own status and its slices.
type memProj struct {
	// setup serializes Setup with Reset of the version.
	setup sync.Mutex
	// st is the projection-wide status (state, failure, read model); its
	// progress comes from the slices (SummarizeSlices). Guarded by
	// MemoryStore.mu, as is every field below.
	st     Status
	paused bool
	layout Layout
	// slices only grows, copy on write: read it with MemoryStore.sliceList
	// outside the lock.
	slices  []*memSlice
	runners map[string]time.Time // owner → membership end
}

type memSlice struct {
	apply sync.Mutex  // held through a commit of the slice (with its handler), claims, renewals, resets
	st    SliceStatus // guarded by MemoryStore.mu
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{projs: map[Key]*memProj{}, active: map[string]int{}, dead: map[Key][]DeadLetter{},
		docs: map[Key]map[string]map[string]json.RawMessage{}}
}

var (
	_ RowStore[NoTx]           = (*MemoryStore)(nil)
	_ DeadLetterReplayer[NoTx] = (*MemoryStore)(nil)
	_ Pauser                   = (*MemoryStore)(nil)
)

func (s *MemoryStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// proj returns k's projection, creating it idle. s.mu is held.
func (s *MemoryStore) proj(k Key) *memProj {
	p := s.projs[k]
	if p == nil {
		p = &memProj{st: Status{Key: k, State: StateIdle}, runners: map[string]time.Time{}}
		s.projs[k] = p
	}
	return p
}

// Join implements Store.
func (s *MemoryStore) Join(ctx context.Context, k Key, l Layout, owner string, ttl time.Duration) ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if owner == "" || ttl <= 0 {
		return nil, fmt.Errorf("projection %s: Join needs an owner and a positive TTL", k)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proj(k)
	switch {
	case p.slices == nil: // the first join lays the slices out
		p.layout, p.slices = Layout{Group: l.Group, Count: l.Count, Partition: l.Partition}, []*memSlice{}
		for i := 0; len(l.Partitions) == 0 && i < max(1, l.Count); i++ { // by partition: blocks per partition, below
			p.slices = append(p.slices, &memSlice{st: SliceStatus{Slice: i, Partition: l.Partition}})
		}
	case !l.Same(p.layout):
		return nil, fmt.Errorf("%w: %s is %s, the runner asks for %s; give the new layout a new version", ErrSlicingChanged, k, p.layout.Kind(), l.Kind())
	}
	list := p.slices
	for _, part := range l.Partitions {
		if !slices.Contains(p.layout.Partitions, part) {
			for range l.PerPartition() {
				list = append(slices.Clip(list), &memSlice{st: SliceStatus{Slice: len(list), Partition: part}})
			}
			p.layout.Partitions = append(slices.Clip(p.layout.Partitions), part)
		}
	}
	p.slices = list
	now := s.now()
	p.runners[owner] = now.Add(ttl)
	var live []string
	for o, until := range p.runners {
		if now.Before(until) {
			live = append(live, o)
		} else {
			delete(p.runners, o)
		}
	}
	slices.Sort(live)
	return live, nil
}

// Leave implements Store.
func (s *MemoryStore) Leave(ctx context.Context, k Key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projs[k]; p != nil {
		delete(p.runners, owner)
	}
	return nil
}

// joined returns k's projection and its slices, or an error saying Join
// comes first.
func (s *MemoryStore) joined(k Key) (*memProj, []*memSlice, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projs[k]
	if p == nil || p.slices == nil {
		return nil, nil, fmt.Errorf("projection %s has no slices in this store: Join first", k)
	}
	return p, p.slices, nil
}

// lockSlices locks the apply mutexes of the slices idx of list (indexes
// outside it are skipped) in ascending order and returns the unlock.
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

// lockAll locks every slice of k (none before its first Join), so that no
// batch of k is being applied, and returns k's projection and the unlock.
func (s *MemoryStore) lockAll(k Key) (*memProj, func()) {
	s.mu.Lock()
	p := s.proj(k)
	list := p.slices
	s.mu.Unlock()
	p.setup.Lock()
	all := make([]int, len(list))
	for i := range all {
		all[i] = i
	}
	unlock := lockSlices(list, all)
	return p, func() { unlock(); p.setup.Unlock() }
}

// slicesOf returns the slices of ls.
func slicesOf(ls []Lease) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.Slice
	}
	return out
}

// check reports why l may not act on its slice (nil when it may), with
// commit as Lease.CheckCommit. s.mu is held.
func (s *MemoryStore) check(p *memProj, l Lease, commit bool) error {
	if l.Slice < 0 || l.Slice >= len(p.slices) {
		return fmt.Errorf("%w: %s has no slice %d", ErrFenced, l.Key, l.Slice)
	}
	st := p.slices[l.Slice].st
	if commit {
		return l.CheckCommit(st, s.now().Before(st.LeaseUntil), s.active[l.Key.Name])
	}
	return l.Check(st, s.now().Before(st.LeaseUntil), s.active[l.Key.Name])
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, k Key, owner string, ttl time.Duration, want []int) ([]Lease, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if owner == "" || ttl <= 0 {
		return nil, fmt.Errorf("projection %s: Claim needs an owner and a positive TTL", k)
	}
	p, list, err := s.joined(k)
	if err != nil {
		return nil, err
	}
	for _, i := range want {
		if i < 0 || i >= len(list) {
			return nil, fmt.Errorf("projection %s has slices 0 to %d; slice %d does not exist", k, len(list)-1, i)
		}
	}
	defer lockSlices(list, want)()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.paused {
		return nil, fmt.Errorf("%w: %s (resume it with `scribe projections resume`)", ErrPaused, k)
	}
	if v, ok := s.active[k.Name]; ok && v > k.Version {
		return nil, fmt.Errorf("%w: %s is active", ErrSuperseded, Key{k.Name, v})
	}
	now := s.now()
	var out []Lease
	for _, i := range want {
		st := &p.slices[i].st
		if st.Owner != "" && st.Owner != owner && now.Before(st.LeaseUntil) {
			continue
		}
		st.Epoch++
		st.Owner, st.LeaseUntil = owner, now.Add(ttl)
		out = append(out, Lease{Key: k, Slice: i, Owner: owner, Epoch: st.Epoch, TTL: ttl, Checkpoint: st.Checkpoint, Events: st.Events,
			Partition: st.Partition, Member: st.Member, EventID: st.EventID})
	}
	if len(out) > 0 {
		p.st.State, p.st.UpdatedAt = p.st.State.Next(OpClaim, p.paused), now
	}
	slices.SortFunc(out, func(a, b Lease) int { return a.Slice - b.Slice })
	return out, nil
}

// Renew implements Store.
func (s *MemoryStore) Renew(ctx context.Context, ls []Lease) ([]int, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	p, list, err := s.joined(ls[0].Key)
	if err != nil {
		return nil, err
	}
	defer lockSlices(list, slicesOf(ls))()
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost []int
	for _, l := range ls {
		if err := s.check(p, l, false); errors.Is(err, ErrSuperseded) {
			return nil, err
		} else if err != nil {
			lost = append(lost, l.Slice)
			continue
		}
		p.slices[l.Slice].st.LeaseUntil = s.now().Add(l.TTL)
	}
	return lost, nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, ls []Lease) error {
	if len(ls) == 0 {
		return nil
	}
	p, _, err := s.joined(ls[0].Key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range ls {
		if l.Slice < 0 || l.Slice >= len(p.slices) {
			continue
		}
		if st := &p.slices[l.Slice].st; st.Epoch == l.Epoch && st.Owner == l.Owner {
			st.Owner, st.LeaseUntil = "", time.Time{}
		}
	}
	return nil
}

// Commit implements Store: apply runs while the slices of ls are locked.
func (s *MemoryStore) Commit(ctx context.Context, ls []Lease, records []journal.Record, sl []int, apply func(ctx context.Context, tx NoTx) error) error {
	if err := CheckCommitArgs(ls, records, sl); err != nil {
		return err
	}
	k := ls[0].Key
	p, list, err := s.joined(k)
	if err != nil {
		return err
	}
	defer lockSlices(list, slicesOf(ls))()
	s.mu.Lock()
	for _, l := range ls {
		if err = s.check(p, l, true); err != nil {
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
	w := &RowWrites{}
	err = apply(ctx, NoTx{w})
	writes := w.Close()
	if err != nil {
		return &HandlerError{At: FirstPosition(records), Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store(writes)
	now := s.now()
	for _, l := range ls {
		st := &p.slices[l.Slice].st
		for i := range records {
			if sl[i] == l.Slice {
				st.Checkpoint, st.EventID, st.Member = records[i].Position, records[i].ID, l.Member
				st.Events++
			}
		}
		if l.PassedID != uuid.Nil {
			st.Checkpoint, st.EventID, st.Member = l.Passed, l.PassedID, l.Member
		}
		st.LeaseUntil = now.Add(l.TTL)
	}
	p.st.State, p.st.Error, p.st.FailedAt, p.st.UpdatedAt = p.st.State.Next(OpCommit, p.paused), "", journal.Position{}, now
	return nil
}

// Fail implements Store.
func (s *MemoryStore) Fail(ctx context.Context, l Lease, pos journal.Position, msg string) error {
	p, _, err := s.joined(l.Key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Slice < 0 || l.Slice >= len(p.slices) || p.slices[l.Slice].st.Epoch != l.Epoch {
		return fmt.Errorf("%w: slice %d of %s moved on to a newer epoch", ErrFenced, l.Slice, l.Key)
	}
	p.st.State, p.st.FailedAt, p.st.Error, p.st.UpdatedAt = p.st.State.Next(OpFail, p.paused), pos, msg, s.now()
	return nil
}

// Slices implements Store.
func (s *MemoryStore) Slices(ctx context.Context, k Key) ([]SliceStatus, Layout, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projs[k]
	if p == nil || p.slices == nil {
		return nil, Layout{}, nil
	}
	out := make([]SliceStatus, len(p.slices))
	for i, x := range p.slices {
		out[i] = x.st
	}
	l := p.layout
	l.Partitions = slices.Clone(l.Partitions)
	return out, l, nil
}

// fenceAll fences every slice lease of p and, with zero, moves the slices'
// checkpoints back to zero. s.mu is held; the caller holds every slice's
// apply lock (lockAll).
func fenceAll(p *memProj, zero bool) {
	for _, x := range p.slices {
		x.st.Epoch++
		x.st.Owner, x.st.LeaseUntil = "", time.Time{}
		if zero {
			x.st.Checkpoint, x.st.Events, x.st.Member, x.st.EventID = journal.Position{}, 0, "", uuid.Nil
		}
	}
}

// Pause implements Pauser.
func (s *MemoryStore) Pause(ctx context.Context, k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	_, known := s.projs[k]
	s.mu.Unlock()
	if !known {
		return fmt.Errorf("projection %s is unknown to the store: nothing to pause", k)
	}
	p, unlock := s.lockAll(k)
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.paused {
		return nil
	}
	p.paused = true
	fenceAll(p, false)
	p.st.UpdatedAt = s.now()
	p.st.State = p.st.State.Next(OpPause, true)
	return nil
}

// Resume implements Pauser.
func (s *MemoryStore) Resume(ctx context.Context, k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projs[k]
	if p == nil {
		return fmt.Errorf("projection %s is unknown to the store: nothing to resume", k)
	}
	if !p.paused {
		return nil
	}
	p.paused = false
	p.st.State = p.st.State.Next(OpResume, false)
	p.st.UpdatedAt = s.now()
	return nil
}

// DeadLetter implements Store; the letter is kept even when the batch's
// handler then fails (the memory store has no transactions). A second
// letter for the same position is ignored.
func (s *MemoryStore) DeadLetter(ctx context.Context, _ NoTx, d DeadLetter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deadAt(d.Key, d.Record.Position) >= 0 {
		return nil
	}
	if d.At.IsZero() {
		d.At = s.now()
	}
	s.dead[d.Key] = append(s.dead[d.Key], d)
	return nil
}

// deadAt returns the index of k's dead letter at pos, or -1. s.mu is held.
func (s *MemoryStore) deadAt(k Key, pos journal.Position) int {
	return slices.IndexFunc(s.dead[k], func(d DeadLetter) bool { return d.Record.Position == pos })
}

// ReplayDeadLetter implements DeadLetterReplayer. Replays are serialized;
// apply runs without the store's lock, and its effects are not undone when
// it fails (the memory store has no transactions).
func (s *MemoryStore) ReplayDeadLetter(ctx context.Context, k Key, pos journal.Position, apply func(ctx context.Context, tx NoTx, d DeadLetter) error) error {
	s.replayMu.Lock()
	defer s.replayMu.Unlock()
	s.mu.Lock()
	i := s.deadAt(k, pos)
	var d DeadLetter
	if i >= 0 {
		d = s.dead[k][i]
	}
	s.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("%w: %s at %s", ErrNoDeadLetter, k, pos)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &RowWrites{}
	err := apply(ctx, NoTx{w}, d)
	writes := w.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i = s.deadAt(k, pos); i < 0 { // reset meanwhile: the rebuild applies the event again
		return nil
	}
	if err != nil {
		l := &s.dead[k][i]
		l.Error, l.Attempts, l.ReplayRequestedAt = err.Error(), l.Attempts+1, time.Time{}
		return &HandlerError{At: pos, Err: err}
	}
	s.store(writes)
	s.dead[k] = slices.Delete(s.dead[k], i, i+1)
	return nil
}

// RequestReplay implements DeadLetterReplayer.
func (s *MemoryStore) RequestReplay(ctx context.Context, k Key) (int, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for i := range s.dead[k] {
		s.dead[k][i].ReplayRequestedAt = now
	}
	return len(s.dead[k]), nil
}

// ReplayRequests implements DeadLetterReplayer.
func (s *MemoryStore) ReplayRequests(ctx context.Context, k Key, limit int) ([]DeadLetter, error) {
	all, err := s.DeadLetters(ctx, k)
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(d DeadLetter) bool { return d.ReplayRequestedAt.IsZero() })
	return all[:min(len(all), limit)], nil
}

// DeadLetters implements Store.
func (s *MemoryStore) DeadLetters(ctx context.Context, k Key) ([]DeadLetter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.dead[k])
	slices.SortFunc(out, func(a, b DeadLetter) int { return a.Record.Position.Compare(b.Record.Position) })
	return out, nil
}

// Activate implements Store.
func (s *MemoryStore) Activate(ctx context.Context, k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.active[k.Name]; !ok || v < k.Version {
		s.active[k.Name] = k.Version
	}
	return nil
}

// Status implements Store.
func (s *MemoryStore) Status(ctx context.Context, k Key) (Status, error) {
	if err := k.Validate(); err != nil {
		return Status{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.projs[k]
	if !ok {
		return Status{Key: k, State: StateIdle, Active: s.active[k.Name] == k.Version}, nil
	}
	return s.status(p), nil
}

func (s *MemoryStore) status(p *memProj) Status {
	st := p.st
	st.Paused = p.paused
	sts, live, now := make([]SliceStatus, len(p.slices)), make([]bool, len(p.slices)), s.now()
	for i, x := range p.slices {
		sts[i], live[i] = x.st, x.st.Owner != "" && x.st.LeaseUntil.After(now)
	}
	return SummarizeSlices(st, s.active[st.Key.Name], p.layout, sts, live)
}

// Statuses implements Store.
func (s *MemoryStore) Statuses(ctx context.Context) ([]Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.projs))
	for _, p := range s.projs {
		out = append(out, s.status(p))
	}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(a.Key.Name, b.Key.Name), cmp.Compare(a.Key.Version, b.Key.Version))
	})
	return out, nil
}

// Reset implements Store.
func (s *MemoryStore) Reset(ctx context.Context, k Key, clear func(ctx context.Context, tx NoTx) error) error {
	if err := k.Validate(); err != nil {
		return err
	}
	p, unlock := s.lockAll(k)
	defer unlock()
	if clear != nil {
		if err := clear(ctx, NoTx{}); err != nil {
			return fmt.Errorf("projection %s: reset: clearing the read model failed, nothing was reset: %w", k, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fenceAll(p, true)
	p.st.State, p.st.Error, p.st.FailedAt, p.st.UpdatedAt = p.st.State.Next(OpReset, p.paused), "", journal.Position{}, s.now()
	delete(s.dead, k)
	delete(s.docs, k)
	return nil
}

// Setup implements Store: setup runs while no batch of k is applied.
func (s *MemoryStore) Setup(ctx context.Context, k Key, kind ReadModelKind, setup func(ctx context.Context, tx NoTx) error) error {
	if err := k.Validate(); err != nil {
		return err
	}
	p, unlock := s.lockAll(k)
	defer unlock()
	if setup != nil {
		if err := setup(ctx, NoTx{}); err != nil {
			return fmt.Errorf("projection %s: setting up the read model failed: %w", k, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.st.ReadModel = kind
	return nil
}
