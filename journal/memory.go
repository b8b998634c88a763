package journal

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Compile-time checks that *Memory is a complete backend.
var (
	_ Journal  = (*Memory)(nil)
	_ Sessions = (*Memory)(nil)
)

const (
	// memPageSize is how many records a reader copies per lock hold.
	memPageSize = 256
	// memScanBudget bounds how many records a reader examines per lock hold,
	// so a selective scan does not starve writers.
	memScanBudget = 8192
	// memLeasePoll is how often a waiting Acquire re-checks its holder's expiry
	// by the configured clock.
	memLeasePoll = 5 * time.Millisecond
)

// MemoryConfig configures NewMemoryWithConfig. The zero value is valid.
type MemoryConfig struct {
	// Clock returns the current time. It stamps RecordedAt and judges node
	// session expiry. Default: time.Now.
	Clock func() time.Time
	// MaxDataSize is the largest Data an event may carry, in bytes after
	// compaction. Default (0): DefaultMaxDataSize.
	MaxDataSize int
}

// Memory is a complete, concurrency-safe in-memory Journal and Sessions. It
// keeps everything in process memory, so it suits tests, examples and
// benchmarks, not durable storage.
//
// One mutex guards all state, so every Append (validation aside) and every
// session call is atomic; positions are assigned at commit, in order, so
// "everything after P" never misses a later-committed event. Concurrent
// Appends are applied by one of their callers at a time, in arrival order,
// each on its own (see Append); a caller's Append returns only once its own
// append is applied or refused. Readers copy
// records in pages under the lock and never hold it while the consumer runs.
// Memory starts no goroutines.
type Memory struct {
	clock  func() time.Time
	limits Limits

	mu     sync.Mutex
	closed atomic.Bool   // set by Close, under mu; read with or without it
	done   chan struct{} // closed by Close

	records       recordLog // position order; records.at(i).Position.Seq == i+1
	byID          map[uuid.UUID]int
	streams       map[StreamID]*memStream
	byType        map[string][]int
	byCorrelation map[string][]int
	commit        uint64
	appended      chan struct{} // closed and replaced on a commit once a reader has taken it
	appendWatched bool          // a reader has taken appended to wait on
	committed     bool          // something was committed since the last signalLocked

	// The append combiner (combine): qmu guards queue, combining and
	// handovers, and is never held while waiting for mu.
	qmu       sync.Mutex
	queue     []*memAppend // appends waiting for the combiner, in arrival order
	combining bool         // a caller is applying the queue
	// combineMax is memCombineMax (tests lower it); handovers counts the
	// times the combiner role passed to a queued caller.
	combineMax int
	handovers  uint64

	nodes        map[string]*memNode
	leases       map[StreamID]*memLease
	epochs       uint64        // the highest epoch ever granted
	leaseChanged chan struct{} // closed and replaced when a lease may have become free
}

// memStream is a tag stream: its records' indexes and its recorded head (the
// version, hash and record index of its newest event as of its last append),
// which TagSummary reports and VerifyStream checks the records against.
type memStream struct {
	records []int // record index of version v at v-1
	head    Hash
	version uint64
	last    int
}

type memNode struct {
	incarnation uint64
	timeout     time.Duration
	expiresAt   time.Time
	closed      bool
}

type memLease struct {
	held        bool
	nodeID      string
	incarnation uint64
	epoch       uint64
}

// NewMemory returns an empty in-memory journal with the default configuration.
func NewMemory() *Memory { return NewMemoryWithConfig(MemoryConfig{}) }

// NewMemoryWithConfig returns an empty in-memory journal configured by cfg;
// zero fields take their documented defaults.
func NewMemoryWithConfig(cfg MemoryConfig) *Memory {
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	return &Memory{
		clock:         clock,
		limits:        Limits{MaxDataSize: cfg.MaxDataSize},
		done:          make(chan struct{}),
		byID:          make(map[uuid.UUID]int),
		streams:       make(map[StreamID]*memStream),
		byType:        make(map[string][]int),
		byCorrelation: make(map[string][]int),
		appended:      make(chan struct{}),
		nodes:         make(map[string]*memNode),
		leases:        make(map[StreamID]*memLease),
		leaseChanged:  make(chan struct{}),
		combineMax:    memCombineMax,
	}
}

// Close closes the journal. Afterwards every call fails with ErrStoreNotOpen,
// running subscriptions end with it and waiting Acquires fail with it. Close
// is idempotent and always returns nil.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed.Load() {
		m.closed.Store(true)
		close(m.done)
	}
	return nil
}

func errClosed() error {
	return fmt.Errorf("%w: the in-memory journal is closed; create a new one with NewMemory", ErrStoreNotOpen)
}

// lock takes the mutex and fails when the journal is closed or ctx has ended.
// On success the caller must unlock.
func (m *Memory) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed.Load() {
		m.mu.Unlock()
		return errClosed()
	}
	return nil
}

func (m *Memory) now() time.Time { return m.clock().UTC().Truncate(time.Microsecond) }

// Limits returns the limits Append validates with (journal.Limited).
func (m *Memory) Limits() Limits { return m.limits }

// Append implements Appender. It does no I/O and waits on nothing but the
// journal's mutex, so a caller may run it where it must not block for long (the
// stream actors call it on their own goroutine).
//
// The mutex is held only for what must be atomic: the idempotency, lease,
// expectation and condition checks, the positions, versions and chain hashes,
// and the indexes. Validation, the canonical bytes the hashes cover (all but
// their closing RecordedAt) and the copies handed back are made outside it.
// Concurrent appends are combined: one caller at a time takes the mutex and
// applies every append queued meanwhile, one after another in queue order,
// each exactly as if its own caller held the mutex, then wakes their callers.
// So the mutex never sits idle while a woken appender waits for a CPU (the
// issue-15 mutex profile of spread/8 found the appenders queued on it, about
// six of eight at any moment, on two cores).
func (m *Memory) Append(ctx context.Context, events []Event, opts AppendOptions) (AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return AppendResult{}, err
	}
	if m.closed.Load() {
		return AppendResult{}, errClosed()
	}

	prepared, partition, err := PrepareAppend(events, opts, m.limits)
	if err != nil {
		return AppendResult{}, err
	}
	a := &memAppend{ctx: ctx, prepared: prepared, partition: partition, opts: opts,
		recs: make([]Record, len(prepared)), content: make([][]byte, len(prepared))}
	for i := range prepared {
		a.recs[i].Event = prepared[i]
		a.content[i] = canonicalContent(&a.recs[i])
		a.recs[i].Links = make([]StreamLink, max(1, len(a.recs[i].Tags)))
	}
	m.combine(a)
	if a.err != nil || a.res.Duplicate {
		return a.res, a.err
	}
	// a.recs share their slices with the stored records, which nothing
	// changes once stored; the caller gets its own copies.
	for i := range a.recs {
		a.recs[i] = cloneRecord(&a.recs[i])
	}
	return AppendResult{Records: a.recs}, nil
}

// memAppend is one Append on its way through combine: its prepared input,
// and its outcome once applied.
type memAppend struct {
	ctx       context.Context
	prepared  []Event
	partition string
	opts      AppendOptions
	recs      []Record // the records to store, completed when applied
	content   [][]byte // canonicalContent of each record

	res  AppendResult // set with Duplicate, or left for Append to fill from recs
	err  error
	done chan bool // receives once: false when a is applied; true when a is still queued and its caller takes over combining
}

// memCombineMax bounds how many appends one combiner applies beyond its own
// before handing the role to the next queued caller, so no caller is kept
// applying other callers' appends for long. With 256, spread/8 on two cores
// shared with two CPU hogs ran at p99 4.3–4.6 ms in 3 of 3 runs (the combiner's
// thread descheduled while the others wait); with 32 its p99 was 0.2–0.7 ms in
// 2 of 3, and unloaded the two were equal (RESULTS.md, fifth pass).
const memCombineMax = 32

// combine applies a: queued behind the appends already waiting, and applied by
// whichever caller is combining, or by this one when none is.
func (m *Memory) combine(a *memAppend) {
	m.qmu.Lock()
	if m.combining {
		a.done = make(chan bool, 1)
		m.queue = append(m.queue, a)
		m.qmu.Unlock()
		if !<-a.done {
			return // applied
		}
		// Handed the combiner role: a is still queued, first in line.
	} else {
		m.queue = append(m.queue, a)
		m.combining = true
		m.qmu.Unlock()
	}
	for applied := 0; ; {
		m.qmu.Lock()
		batch := m.queue
		m.queue = nil
		if len(batch) == 0 {
			m.combining = false
			m.qmu.Unlock()
			return
		}
		m.qmu.Unlock()
		p := m.applyBatch(batch)
		for _, b := range batch {
			if b != a {
				b.done <- false
			}
		}
		if p != nil {
			// The journal stays usable, and the panic goes on in this
			// caller, as it did before appends were combined.
			m.passRole()
			panic(p)
		}
		// a was in the first batch: it is applied by now.
		if applied += len(batch); applied > m.combineMax {
			m.passRole()
			return
		}
	}
}

// passRole ends this caller's turn as the combiner: the first queued caller
// takes the role over, or, with none queued, the next Append takes it.
func (m *Memory) passRole() {
	m.qmu.Lock()
	if len(m.queue) == 0 {
		m.combining = false
		m.qmu.Unlock()
		return
	}
	next := m.queue[0]
	m.handovers++
	m.qmu.Unlock()
	next.done <- true
}

// applyBatch applies batch in order under the mutex. When applying one of
// them panics (the configured Clock is the only caller code it runs, before
// anything is changed), the appends before it keep their outcomes, it and the
// rest fail without being applied, and the panic value is returned.
func (m *Memory) applyBatch(batch []*memAppend) (panicked any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := 0
	defer func() {
		if p := recover(); p != nil {
			panicked = p
			for _, b := range batch[i:] {
				b.res, b.err = AppendResult{}, fmt.Errorf("journal: the in-memory append was not applied: MemoryConfig.Clock panicked while it or an append queued with it was applied (%v); fix the clock, then append again", p)
			}
			m.signalLocked()
		}
	}()
	for ; i < len(batch); i++ {
		m.applyLocked(batch[i])
	}
	m.signalLocked()
	return nil
}

// applyLocked applies a as one atomic append and records its outcome in a.
func (m *Memory) applyLocked(a *memAppend) {
	if m.closed.Load() {
		a.err = errClosed()
		return
	}
	if err := a.ctx.Err(); err != nil {
		a.err = err
		return
	}
	if res, done, err := m.duplicateLocked(a.prepared); done {
		a.res, a.err = res, err
		return
	}
	now := m.now()
	if err := m.checkLocked(a.partition, a.opts, now); err != nil {
		a.err = err
		return
	}
	m.commit++
	m.committed = true
	for i := range a.recs {
		rec := &a.recs[i]
		idx := m.records.len()
		rec.Position = Position{Commit: m.commit, Seq: uint64(idx) + 1}
		rec.RecordedAt = now
		linkCanonical(rec, appendTime(a.content[i], now), func(tag Tag) (uint64, Hash) {
			if s := m.streams[StreamID{Partition: a.partition, Tag: tag}]; s != nil {
				return uint64(len(s.records)), s.head
			}
			return 0, Hash{}
		})
		for _, l := range rec.Links {
			id := StreamID{Partition: a.partition, Tag: l.Tag}
			s := m.streams[id]
			if s == nil {
				s = &memStream{}
				m.streams[id] = s
			}
			s.records = append(s.records, idx)
			s.head, s.version, s.last = l.Hash, l.Version, idx
		}
		m.records.push(*rec)
		m.byID[rec.ID] = idx
		m.byType[rec.Type] = append(m.byType[rec.Type], idx)
		if c := rec.Metadata.CorrelationID; c != "" {
			m.byCorrelation[c] = append(m.byCorrelation[c], idx)
		}
	}
}

// signalLocked wakes the readers waiting for new records, if anything was
// committed since the last signal and a reader waits.
func (m *Memory) signalLocked() {
	if m.committed && m.appendWatched {
		close(m.appended)
		m.appended = make(chan struct{})
		m.appendWatched = false
	}
	m.committed = false
}

// checkLocked applies the append's fence: its leases as of now, its expected
// stream versions and its condition.
func (m *Memory) checkLocked(partition string, opts AppendOptions, now time.Time) error {
	for _, l := range opts.Leases {
		if err := m.checkLeaseLocked(l, now); err != nil {
			return err
		}
	}
	if err := m.checkExpectLocked(partition, opts.Expect); err != nil {
		return err
	}
	if c := opts.Condition; c != nil {
		return m.checkConditionLocked(c)
	}
	return nil
}

// duplicateLocked resolves idempotency. done is true when the append is fully
// answered: every ID stored (the originals, or ErrDuplicateMismatch when one
// differs), or some but not all stored (ErrDuplicateMismatch).
func (m *Memory) duplicateLocked(events []Event) (AppendResult, bool, error) {
	stored, fresh := -1, -1
	for i := range events {
		if _, ok := m.byID[events[i].ID]; ok {
			if stored < 0 {
				stored = i
			}
		} else if fresh < 0 {
			fresh = i
		}
	}
	switch {
	case stored < 0:
		return AppendResult{}, false, nil
	case fresh >= 0:
		return AppendResult{}, true, fmt.Errorf("%w: event %s (index %d) is already stored but event %s (index %d) is not; an append is idempotent only as a whole: retry it unchanged, or give new events new IDs",
			ErrDuplicateMismatch, events[stored].ID, stored, events[fresh].ID, fresh)
	}
	out := make([]Record, len(events))
	for i := range events {
		r := m.records.at(m.byID[events[i].ID])
		if !SameContent(&events[i], &r.Event) {
			return AppendResult{}, true, fmt.Errorf("%w: event %s (index %d) is already stored with different content (stored type %q); an event ID names one event: give a different event a new ID",
				ErrDuplicateMismatch, events[i].ID, i, r.Type)
		}
		out[i] = cloneRecord(r)
	}
	return AppendResult{Records: out, Duplicate: true}, true, nil
}

func (m *Memory) checkLeaseLocked(l Lease, now time.Time) error {
	var st LeaseState
	if cur := m.leases[l.Stream.Normalize()]; cur != nil {
		st = LeaseState{Acquired: true, NodeID: cur.nodeID, Incarnation: cur.incarnation, Epoch: cur.epoch, Released: !cur.held}
	}
	return CheckLease(l, st, m.nodeStateLocked(l.NodeID, now))
}

// nodeStateLocked returns node nodeID's session as the fence rule sees it.
func (m *Memory) nodeStateLocked(nodeID string, now time.Time) NodeState {
	n := m.nodes[nodeID]
	if n == nil {
		return NodeState{}
	}
	return NodeState{Found: true, Incarnation: n.incarnation, Closed: n.closed, Live: now.Before(n.expiresAt), ExpiresAt: n.expiresAt}
}

// checkNodeLocked reports whether incarnation inc of node nodeID is the live
// session, as a *SessionError on stream.
func (m *Memory) checkNodeLocked(stream StreamID, nodeID string, inc uint64, now time.Time) error {
	return CheckNode(stream, nodeID, inc, m.nodeStateLocked(nodeID, now))
}

func (m *Memory) checkExpectLocked(partition string, expect map[Tag]uint64) error {
	if len(expect) == 0 {
		return nil
	}
	tags := make([]Tag, 0, len(expect))
	for t := range expect {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	for _, t := range tags {
		id := StreamID{Partition: partition, Tag: t}
		var actual uint64
		if s := m.streams[id]; s != nil {
			actual = uint64(len(s.records))
		}
		if err := CheckExpected(id, expect[t], actual); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) checkConditionLocked(c *AppendCondition) error {
	cur := m.queryCursorLocked(c.FailIfEventsMatch, m.firstAfterLocked(c.After), m.records.len(), false)
	for {
		idx, ok := cur.next()
		if !ok {
			return nil
		}
		r := m.records.at(idx)
		if c.FailIfEventsMatch.Matches(r) {
			return fmt.Errorf("%w: event %s (type %q) at position %s matches the condition's query and lies after position %s; read again and decide on the new state",
				ErrAppendConditionFailed, r.ID, r.Type, r.Position, c.After)
		}
	}
}

// firstAfterLocked returns the index of the first record with position > p.
func (m *Memory) firstAfterLocked(p Position) int {
	return sort.Search(m.records.len(), func(i int) bool { return m.records.at(i).Position.After(p) })
}

// firstFromLocked returns the index of the first record with position ≥ p.
func (m *Memory) firstFromLocked(p Position) int {
	return sort.Search(m.records.len(), func(i int) bool { return m.records.at(i).Position.Compare(p) >= 0 })
}

// memCursor walks record indices: a range of them, or a slot range of an
// ascending list of them, forwards or backwards.
type memCursor struct {
	list   []int // candidate record indices, ascending; nil when all
	all    bool  // lo and hi bound record indices rather than slots of list
	lo, hi int   // [lo, hi) still to visit
	desc   bool
}

func (c *memCursor) next() (int, bool) {
	if c.lo >= c.hi {
		return 0, false
	}
	var k int
	if c.desc {
		c.hi--
		k = c.hi
	} else {
		k = c.lo
		c.lo++
	}
	if c.all {
		return k, true
	}
	return c.list[k], true
}

// exhausted reports whether next would return false.
func (c *memCursor) exhausted() bool { return c.lo >= c.hi }

// queryCursorLocked returns a cursor over the record indices in [lo, hi) that
// may match q: from the tag and type indexes when every item names a tag or a
// type, else every index. Callers still filter with q.Matches.
func (m *Memory) queryCursorLocked(q Query, lo, hi int, desc bool) memCursor {
	list, indexed := m.candidatesLocked(q, lo, hi)
	if !indexed {
		return memCursor{all: true, lo: lo, hi: hi, desc: desc}
	}
	return memCursor{list: list, lo: sort.SearchInts(list, lo), hi: sort.SearchInts(list, hi), desc: desc}
}

// candidatesLocked returns the ascending record indices in [lo, hi) that may
// match q, and false when no index applies (q.All). Only the part of each index list inside [lo, hi) is merged, so the cost of a
// condition check or a read from a recent position does not grow with history.
func (m *Memory) candidatesLocked(q Query, lo, hi int) ([]int, bool) {
	window := func(l []int) []int {
		return l[sort.SearchInts(l, lo):sort.SearchInts(l, hi)]
	}
	if q.All {
		return nil, false
	}
	partition := q.PartitionOrDefault()
	var lists [][]int
	for _, it := range q.Items {
		if len(it.Tags) > 0 {
			// Every tag must be present: the shortest stream bounds the matches.
			var best []int
			for k, t := range it.Tags {
				s := m.streams[StreamID{Partition: partition, Tag: t}]
				if s == nil {
					best = nil
					break
				}
				if k == 0 || len(s.records) < len(best) {
					best = s.records
				}
			}
			if best = window(best); len(best) > 0 {
				lists = append(lists, best)
			}
			continue
		}
		for _, ty := range it.Types {
			if l := window(m.byType[ty]); len(l) > 0 {
				lists = append(lists, l)
			}
		}
	}
	return unionSorted(lists), true
}

// unionSorted merges ascending index lists into one without duplicates. A
// single list is returned as is (callers only read it).
func unionSorted(lists [][]int) []int {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]int, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func cloneRecord(r *Record) Record {
	c := *r
	c.Tags = slices.Clone(r.Tags)
	c.Data = slices.Clone(r.Data)
	c.Links = slices.Clone(r.Links)
	c.Metadata.Scopes = slices.Clone(r.Metadata.Scopes)
	return c
}

// read yields copies of the records that the cursor from open (called once,
// under the lock) visits and keep (nil: all) accepts, at most limit of them
// (0: no limit). It copies a page at a time under the lock and yields with the
// lock released.
func (m *Memory) read(ctx context.Context, open func() (memCursor, error), keep func(*Record) bool, limit int) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		var (
			cur    memCursor
			opened bool
			n      int
			page   []Record
		)
		for {
			if err := m.lock(ctx); err != nil {
				yield(Record{}, err)
				return
			}
			if !opened {
				var err error
				if cur, err = open(); err != nil {
					m.mu.Unlock()
					yield(Record{}, err)
					return
				}
				opened = true
			}
			page = page[:0]
			for budget := memScanBudget; budget > 0 && len(page) < memPageSize && (limit == 0 || n < limit); budget-- {
				idx, ok := cur.next()
				if !ok {
					break
				}
				r := m.records.at(idx)
				if keep != nil && !keep(r) {
					continue
				}
				page = append(page, cloneRecord(r))
				n++
			}
			finished := cur.exhausted() || (limit > 0 && n >= limit)
			m.mu.Unlock()
			for _, r := range page {
				if err := ctx.Err(); err != nil {
					yield(Record{}, err)
					return
				}
				if !yield(r, nil) {
					return
				}
			}
			if finished {
				return
			}
		}
	}
}

func yieldErr(err error) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) { yield(Record{}, err) }
}

// ReadStream implements Reader. A fromVersion of 0 reads from version 1.
func (m *Memory) ReadStream(ctx context.Context, stream StreamID, fromVersion uint64, limit int) iter.Seq2[Record, error] {
	stream = stream.Normalize()
	if stream.Tag == "" {
		return yieldErr(fmt.Errorf("%w: ReadStream: the stream's tag is empty; name the stream to read", ErrInvalidQuery))
	}
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadStream: limit %d is negative; use 0 for no limit", ErrInvalidQuery, limit))
	}
	if fromVersion == 0 {
		fromVersion = 1
	}
	return m.read(ctx, func() (memCursor, error) {
		s := m.streams[stream]
		if s == nil || fromVersion > uint64(len(s.records)) {
			return memCursor{}, nil
		}
		return memCursor{list: s.records, lo: int(fromVersion - 1), hi: len(s.records)}, nil
	}, nil, limit)
}

// Read implements Reader.
func (m *Memory) Read(ctx context.Context, q Query, opts ReadOptions) iter.Seq2[Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	if opts.Limit < 0 {
		return yieldErr(fmt.Errorf("%w: read limit %d is negative; use 0 for no limit", ErrInvalidQuery, opts.Limit))
	}
	return m.read(ctx, func() (memCursor, error) {
		lo, hi := 0, m.records.len()
		switch {
		case !opts.Backwards:
			lo = m.firstFromLocked(opts.From)
		case !opts.From.IsZero():
			hi = m.firstAfterLocked(opts.From)
		}
		return m.queryCursorLocked(q, lo, hi, opts.Backwards), nil
	}, q.Matches, opts.Limit)
}

// ReadAll implements Reader.
func (m *Memory) ReadAll(ctx context.Context, after Position, limit int) iter.Seq2[Record, error] {
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadAll: limit %d is negative; use 0 for no limit", ErrInvalidQuery, limit))
	}
	return m.read(ctx, func() (memCursor, error) {
		return memCursor{all: true, lo: m.firstAfterLocked(after), hi: m.records.len()}, nil
	}, nil, limit)
}

// ReadEvent implements Reader.
func (m *Memory) ReadEvent(ctx context.Context, id uuid.UUID) (Record, error) {
	if err := m.lock(ctx); err != nil {
		return Record{}, err
	}
	defer m.mu.Unlock()
	idx, ok := m.byID[id]
	if !ok {
		return Record{}, fmt.Errorf("%w: no event with ID %s", ErrNotFound, id)
	}
	return cloneRecord(m.records.at(idx)), nil
}

// Head implements Reader.
func (m *Memory) Head(ctx context.Context) (Position, error) {
	if err := m.lock(ctx); err != nil {
		return Position{}, err
	}
	defer m.mu.Unlock()
	if m.records.len() == 0 {
		return Position{}, nil
	}
	return m.records.at(m.records.len() - 1).Position, nil
}

// ReadByCorrelation implements Reader. An empty correlation ID yields ErrInvalidQuery.
func (m *Memory) ReadByCorrelation(ctx context.Context, correlationID string) iter.Seq2[Record, error] {
	if correlationID == "" {
		return yieldErr(fmt.Errorf("%w: ReadByCorrelation: the correlation ID is empty; pass the ID to look up", ErrInvalidQuery))
	}
	return m.read(ctx, func() (memCursor, error) {
		l := m.byCorrelation[correlationID]
		return memCursor{list: l, hi: len(l)}, nil
	}, nil, 0)
}

// ReadTypes implements Reader.
func (m *Memory) ReadTypes(ctx context.Context, q TypeQuery) iter.Seq2[Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	q.Types = slices.Clone(q.Types)
	return m.read(ctx, func() (memCursor, error) {
		lists := make([][]int, 0, len(q.Types))
		for _, ty := range q.Types {
			lists = append(lists, m.byType[ty])
		}
		l := unionSorted(lists)
		cur := memCursor{list: l, hi: len(l), desc: q.Descending}
		if !q.Cursor.IsZero() {
			// l is in position order: the first slot after the cursor.
			k := sort.Search(len(l), func(i int) bool { return m.records.at(l[i]).Position.After(q.Cursor) })
			if q.Descending {
				// Slots before the cursor: those before k, minus the cursor itself.
				hi := k
				if hi > 0 && m.records.at(l[hi-1]).Position == q.Cursor {
					hi--
				}
				cur.hi = hi
			} else {
				cur.lo = k
			}
		}
		return cur, nil
	}, func(r *Record) bool { return q.inRange(r.RecordedAt) }, q.Limit)
}

// Subscribe implements Subscriber. It starts no goroutine: the consumer's own
// goroutine waits for new commits.
func (m *Memory) Subscribe(ctx context.Context, q Query, after Position) iter.Seq2[Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	return func(yield func(Record, error) bool) {
		var (
			catchUp memCursor // indexed catch-up over records that existed at the start
			next    int       // first record index the tail scan has not examined
			opened  bool
			page    []Record
		)
		for {
			if err := m.lock(ctx); err != nil {
				yield(Record{}, err)
				return
			}
			if !opened {
				start := m.firstAfterLocked(after)
				catchUp = m.queryCursorLocked(q, start, m.records.len(), false)
				if catchUp.all {
					// No index applies: the tail scan covers everything.
					catchUp, next = memCursor{}, start
				} else {
					next = m.records.len()
				}
				opened = true
			}
			page = page[:0]
			for budget := memScanBudget; budget > 0 && len(page) < memPageSize; budget-- {
				idx, ok := catchUp.next()
				if !ok {
					if next >= m.records.len() {
						break
					}
					idx = next
					next++
				}
				if r := m.records.at(idx); q.Matches(r) {
					page = append(page, cloneRecord(r))
				}
			}
			caughtUp := catchUp.exhausted() && next >= m.records.len()
			wake, done := m.appended, m.done
			m.appendWatched = true
			m.mu.Unlock()
			for _, r := range page {
				if err := ctx.Err(); err != nil {
					yield(Record{}, err)
					return
				}
				if !yield(r, nil) {
					return
				}
			}
			if caughtUp {
				select {
				case <-wake:
				case <-done: // the next lock reports ErrStoreNotOpen
				case <-ctx.Done(): // the next lock reports ctx.Err()
				}
			}
		}
	}
}

// TagSummary implements Inspector.
func (m *Memory) TagSummary(ctx context.Context, stream StreamID) (TagSummary, error) {
	stream = stream.Normalize()
	if err := m.lock(ctx); err != nil {
		return TagSummary{}, err
	}
	defer m.mu.Unlock()
	return m.summaryLocked(stream, m.streams[stream]), nil
}

func (m *Memory) summaryLocked(id StreamID, s *memStream) TagSummary {
	sum := TagSummary{Stream: id}
	if s == nil || len(s.records) == 0 {
		return sum
	}
	sum.Version, sum.HeadHash = s.version, s.head
	first, last := m.records.at(s.records[0]), m.records.at(s.last)
	sum.FirstPosition, sum.FirstRecordedAt = first.Position, first.RecordedAt
	sum.LastPosition, sum.LastRecordedAt = last.Position, last.RecordedAt
	return sum
}

// TagsOfGroup implements Inspector. An empty partition means DefaultPartition.
func (m *Memory) TagsOfGroup(ctx context.Context, partition, group string) ([]TagSummary, error) {
	partition = partitionOrDefault(partition)
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []TagSummary
	for id, s := range m.streams {
		if id.Partition == partition && id.Tag.Group() == group {
			out = append(out, m.summaryLocked(id, s))
		}
	}
	slices.SortFunc(out, func(a, b TagSummary) int {
		switch {
		case a.Stream.Tag < b.Stream.Tag:
			return -1
		case a.Stream.Tag > b.Stream.Tag:
			return 1
		}
		return 0
	})
	return out, nil
}

// TypeSummaries implements Inspector.
func (m *Memory) TypeSummaries(ctx context.Context) ([]TypeSummary, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]TypeSummary, 0, len(m.byType))
	for ty, l := range m.byType {
		ts := TypeSummary{Type: ty, Count: uint64(len(l))}
		if len(l) > 0 {
			ts.FirstPosition, ts.LastPosition = m.records.at(l[0]).Position, m.records.at(l[len(l)-1]).Position
			for _, idx := range l {
				at := m.records.at(idx).RecordedAt
				if ts.FirstRecordedAt.IsZero() || at.Before(ts.FirstRecordedAt) {
					ts.FirstRecordedAt = at
				}
				if at.After(ts.LastRecordedAt) {
					ts.LastRecordedAt = at
				}
			}
		}
		out = append(out, ts)
	}
	slices.SortFunc(out, func(a, b TypeSummary) int {
		switch {
		case a.Type < b.Type:
			return -1
		case a.Type > b.Type:
			return 1
		}
		return 0
	})
	return out, nil
}

// CountAfter implements Inspector.
func (m *Memory) CountAfter(ctx context.Context, after Position) (uint64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return uint64(m.records.len() - m.firstAfterLocked(after)), nil
}

// recordLog is the journal's records in position order, kept in chunks of
// fixed size: appending never copies earlier records (a single growing
// slice copies the whole log each time it doubles, inside the journal's
// lock), and a pointer to a record stays valid.
type recordLog struct {
	chunks [][]Record
	n      int
}

const recordChunk = 1 << 12

func (l *recordLog) len() int { return l.n }

// at returns record i (0-based); i must be below len.
func (l *recordLog) at(i int) *Record { return &l.chunks[i/recordChunk][i%recordChunk] }

func (l *recordLog) push(r Record) {
	if l.n%recordChunk == 0 {
		l.chunks = append(l.chunks, make([]Record, 0, recordChunk))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, r)
	l.n++
}
