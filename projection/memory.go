package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// MemoryStore keeps checkpoints, leases, dead letters and rows read models
// (RowStore) in memory, for tests and for services on the memory journal.
// Its handlers receive a NoTx that binds their writes to Rows to the
// batch's commit: they are stored with the checkpoint when the handler
// returns nil, and dropped when it fails. A read model of the handler's own
// (a map) is not undone by a failed batch. Within one process it fences like the Postgres
// store: a commit, claim, renewal or reset of a projection waits for the
// batch being applied, so at most one batch of a projection is applied at a
// time and a fenced runner's batch never starts.
type MemoryStore struct {
	// Now is the store's clock; default time.Now.
	Now func() time.Time

	// replayMu serializes dead-letter replays (held while apply runs), so
	// that concurrent replays of one letter apply it once.
	replayMu sync.Mutex

	mu     sync.Mutex
	rows   map[Key]*memRow
	active map[string]int
	dead   map[Key][]DeadLetter
	// docs are the rows read models: projection, collection, key.
	docs map[Key]map[string]map[string]json.RawMessage
	// slicings are the sliced projections (memory_slices.go).
	slicings map[Key]*memSliced
}

type memRow struct {
	apply sync.Mutex // held through Claim, Renew, Commit (with its handler), Fail and Reset
	st    Status     // guarded by MemoryStore.mu
	ttl   time.Duration
	// paused is set by Pause and cleared by Resume (guarded by
	// MemoryStore.mu).
	paused bool
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{rows: map[Key]*memRow{}, active: map[string]int{}, dead: map[Key][]DeadLetter{},
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

// row returns k's row, creating it idle.
func (s *MemoryStore) row(k Key) *memRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[k]
	if r == nil {
		r = &memRow{st: Status{Key: k, State: StateIdle}}
		s.rows[k] = r
	}
	return r
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, k Key, owner string, ttl time.Duration) (Lease, error) {
	if err := k.Validate(); err != nil {
		return Lease{}, err
	}
	if owner == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("projection %s: Claim needs an owner and a positive TTL", k)
	}
	r := s.row(k)
	r.apply.Lock()
	defer r.apply.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if r.paused {
		return Lease{}, fmt.Errorf("%w: %s (resume it with `scribe projections resume`)", ErrPaused, k)
	}
	if r.st.Owner != "" && r.st.Owner != owner && now.Before(r.st.LeaseUntil) {
		return Lease{}, fmt.Errorf("%w: %s holds %s until %s", ErrLeaseHeld, r.st.Owner, k, r.st.LeaseUntil.Format(time.RFC3339Nano))
	}
	r.st.Epoch++
	r.st.Owner, r.st.LeaseUntil, r.ttl, r.st.UpdatedAt = owner, now.Add(ttl), ttl, now
	r.st.State = r.st.State.Next(OpClaim, r.paused)
	return Lease{Key: k, Owner: owner, Epoch: r.st.Epoch, TTL: ttl, Checkpoint: r.st.Checkpoint, Events: r.st.Events}, nil
}

// Pause implements Pauser.
func (s *MemoryStore) Pause(ctx context.Context, k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	r := s.rows[k]
	s.mu.Unlock()
	if r == nil {
		return fmt.Errorf("projection %s is unknown to the store: nothing to pause", k)
	}
	defer s.lockAllSlices(k)()
	r.apply.Lock()
	defer r.apply.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.paused {
		return nil
	}
	r.paused = true
	s.resetSlicesLocked(k, false)
	r.st.Epoch++
	r.st.Owner, r.st.LeaseUntil, r.st.UpdatedAt = "", time.Time{}, s.now()
	r.st.State = r.st.State.Next(OpPause, true)
	return nil
}

// Resume implements Pauser.
func (s *MemoryStore) Resume(ctx context.Context, k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[k]
	if r == nil {
		return fmt.Errorf("projection %s is unknown to the store: nothing to resume", k)
	}
	if !r.paused {
		return nil
	}
	r.paused = false
	r.st.State = r.st.State.Next(OpResume, false)
	r.st.UpdatedAt = s.now()
	return nil
}

// check reports why l may not act on r (nil when it may). s.mu is held.
func (s *MemoryStore) check(r *memRow, l Lease) error {
	if r.st.Epoch != l.Epoch || r.st.Owner != l.Owner {
		return fmt.Errorf("%w: %s is at epoch %d (owner %q), the lease has epoch %d", ErrFenced, l.Key, r.st.Epoch, r.st.Owner, l.Epoch)
	}
	if !s.now().Before(r.st.LeaseUntil) {
		return fmt.Errorf("%w: the lease of %s expired at %s", ErrFenced, l.Key, r.st.LeaseUntil.Format(time.RFC3339Nano))
	}
	if v, ok := s.active[l.Key.Name]; ok && v > l.Key.Version {
		return fmt.Errorf("%w: %s is active", ErrSuperseded, Key{l.Key.Name, v})
	}
	return nil
}

// Renew implements Store.
func (s *MemoryStore) Renew(ctx context.Context, l Lease) error {
	r := s.row(l.Key)
	r.apply.Lock()
	defer r.apply.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(r, l); err != nil {
		return err
	}
	r.st.LeaseUntil = s.now().Add(l.TTL)
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, l Lease) error {
	r := s.row(l.Key)
	r.apply.Lock()
	defer r.apply.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.st.Epoch == l.Epoch && r.st.Owner == l.Owner {
		r.st.Owner, r.st.LeaseUntil = "", time.Time{}
		r.st.State = r.st.State.Next(OpRelease, r.paused)
		if v, ok := s.active[l.Key.Name]; ok && v > l.Key.Version {
			r.st.State = StateSuperseded
		}
	}
	return nil
}

// Commit implements Store. apply runs while the projection's row is locked.
func (s *MemoryStore) Commit(ctx context.Context, l Lease, from journal.Position, records []journal.Record, apply func(ctx context.Context, tx NoTx) error) error {
	if len(records) == 0 {
		return fmt.Errorf("projection %s: Commit of no records", l.Key)
	}
	r := s.row(l.Key)
	r.apply.Lock()
	defer r.apply.Unlock()
	s.mu.Lock()
	err := s.check(r, l)
	if err == nil && r.st.Checkpoint != from {
		err = fmt.Errorf("%w: the checkpoint of %s is %s, the runner expected %s", ErrFenced, l.Key, r.st.Checkpoint, from)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &memWrites{k: l.Key}
	err = apply(ctx, NoTx{w})
	changes := w.finish()
	if err != nil {
		return &HandlerError{At: records[0].Position, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store(l.Key, changes)
	now := s.now()
	r.st.Checkpoint = records[len(records)-1].Position
	r.st.Events += uint64(len(records))
	r.st.State, r.st.Error, r.st.FailedAt, r.st.UpdatedAt = r.st.State.Next(OpCommit, r.paused), "", journal.Position{}, now
	r.st.LeaseUntil = now.Add(l.TTL)
	return nil
}

// Fail implements Store.
func (s *MemoryStore) Fail(ctx context.Context, l Lease, pos journal.Position, msg string) error {
	r := s.row(l.Key)
	r.apply.Lock()
	defer r.apply.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.st.Epoch != l.Epoch {
		return fmt.Errorf("%w: %s is at epoch %d, the lease has epoch %d", ErrFenced, l.Key, r.st.Epoch, l.Epoch)
	}
	r.st.State, r.st.FailedAt, r.st.Error, r.st.UpdatedAt = r.st.State.Next(OpFail, r.paused), pos, msg, s.now()
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
	w := &memWrites{k: k}
	err := apply(ctx, NoTx{w}, d)
	changes := w.finish()
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
	s.store(k, changes)
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
	r, ok := s.rows[k]
	if !ok {
		return Status{Key: k, State: StateIdle, Active: s.active[k.Name] == k.Version}, nil
	}
	return s.status(r), nil
}

func (s *MemoryStore) status(r *memRow) Status {
	st := r.st
	st.Paused = r.paused
	st.Active = s.active[st.Key.Name] == st.Key.Version
	if v, ok := s.active[st.Key.Name]; ok && v > st.Key.Version && st.State != StateFailed {
		st.State = StateSuperseded
	}
	if m := s.slicedLocked(st.Key); m != nil {
		sts, live, now := make([]SliceStatus, len(m.slices)), make([]bool, len(m.slices)), s.now()
		for i, x := range m.slices {
			sts[i], live[i] = x.st, x.st.Owner != "" && x.st.LeaseUntil.After(now)
		}
		st = SummarizeSlices(st, sts, live)
	}
	return st
}

// Statuses implements Store.
func (s *MemoryStore) Statuses(ctx context.Context) ([]Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, s.status(r))
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
	defer s.lockAllSlices(k)()
	r := s.row(k)
	r.apply.Lock()
	defer r.apply.Unlock()
	if clear != nil {
		if err := clear(ctx, NoTx{}); err != nil {
			return fmt.Errorf("projection %s: reset: clearing the read model failed, nothing was reset: %w", k, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetSlicesLocked(k, true)
	r.st.Epoch++ // fences the current holder
	r.st.Owner, r.st.LeaseUntil = "", time.Time{}
	r.st.Checkpoint, r.st.Events = journal.Position{}, 0
	r.st.State, r.st.Error, r.st.FailedAt, r.st.UpdatedAt = r.st.State.Next(OpReset, r.paused), "", journal.Position{}, s.now()
	delete(s.dead, k)
	delete(s.docs, k)
	return nil
}

// Setup implements Store: setup runs while no batch of k is applied.
func (s *MemoryStore) Setup(ctx context.Context, k Key, kind ReadModelKind, setup func(ctx context.Context, tx NoTx) error) error {
	if err := k.Validate(); err != nil {
		return err
	}
	r := s.row(k)
	r.apply.Lock()
	defer r.apply.Unlock()
	if setup != nil {
		if err := setup(ctx, NoTx{}); err != nil {
			return fmt.Errorf("projection %s: setting up the read model failed: %w", k, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.st.ReadModel = kind
	return nil
}
