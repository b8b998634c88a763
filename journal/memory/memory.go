package memory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// Compile-time checks that *Journal is a complete backend.
var (
	_ journal.Journal         = (*Journal)(nil)
	_ journal.Sessions        = (*Journal)(nil)
	_ journal.SliceSubscriber = (*Journal)(nil)
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

// Config configures NewWithConfig. The zero value is valid.
type Config struct {
	// Clock returns the current time. It stamps RecordedAt and judges node
	// session expiry. Default: time.Now.
	Clock func() time.Time
	// MaxDataSize is the largest Data an event may carry, in bytes after
	// compaction. Default (0): journal.DefaultMaxDataSize.
	MaxDataSize int
}

// Journal is a complete, concurrency-safe in-memory Journal and Sessions. It
// keeps everything in process memory, so it suits tests, examples and
// benchmarks, not durable storage.
//
// Every Append (validation aside) and every session call is atomic: each is
// applied under one mutex that guards the records, streams, indexes, node
// sessions and leases. Positions are assigned at commit, in order, so
// "everything after P" never misses a later-committed event. Concurrent
// Appends are applied by one of their callers at a time, in arrival order,
// each on its own (see Append); a caller's Append returns only once its own
// append is applied or refused. Readers copy records in pages under the lock
// and never hold it while the consumer runs. A Journal starts no goroutines.
type Journal struct {
	clock  func() time.Time
	limits journal.Limits

	mu     sync.Mutex
	closed atomic.Bool   // set by Close, under mu; read with or without it
	done   chan struct{} // closed by Close

	records       recordLog // position order; records.at(i).Position.Seq == i+1
	byID          map[uuid.UUID]int
	streams       map[journal.StreamID]*memStream
	byType        map[string][]int
	byCorrelation map[string][]int
	commit        uint64
	appended      chan struct{} // closed and replaced on a commit once a reader has taken it
	appendWatched bool          // a reader has taken appended to wait on
	committed     bool          // something was committed since the last signalLocked

	// The append combiner (combine): qmu guards queue and combining (and
	// hooks.handovers), and is never held while waiting for mu.
	qmu       sync.Mutex
	queue     []*memAppend // appends waiting for the combiner, in arrival order
	combining bool         // a caller is applying the queue
	// spare is an emptied queue array for the next arrivals: the combiner
	// hands it back once it applied that batch and woke its callers, so it
	// never aliases a batch being applied.
	spare []*memAppend

	// hooks is nil in production; only the package's tests set it.
	hooks *memHooks

	types memTypes // the type registry (memory_types.go)

	nodes        map[string]*memNode
	leases       map[journal.StreamID]*memLease
	epochs       uint64        // the highest epoch ever granted
	leaseChanged chan struct{} // closed and replaced when a lease may have become free
}

// memHooks are what the package's tests steer and observe in the append
// combiner (memory_internal_test.go sets them). A production Journal has none:
// Journal.hooks is nil.
type memHooks struct {
	combineMax int    // used instead of memCombineMax
	handovers  uint64 // times the combiner role passed to a queued caller
}

// memStream is a tag stream: its records' indexes and its recorded head (the
// version, hash and record index of its newest event as of its last append),
// which TagSummary reports and VerifyStream checks the records against.
type memStream struct {
	records []int // record index of version v at v-1
	head    journal.Hash
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

// New returns an empty in-memory journal with the default configuration.
func New() *Journal { return NewWithConfig(Config{}) }

// NewWithConfig returns an empty in-memory journal configured by cfg;
// zero fields take their documented defaults.
func NewWithConfig(cfg Config) *Journal {
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	return &Journal{
		clock:         clock,
		limits:        journal.Limits{MaxDataSize: cfg.MaxDataSize},
		done:          make(chan struct{}),
		byID:          make(map[uuid.UUID]int),
		streams:       make(map[journal.StreamID]*memStream),
		byType:        make(map[string][]int),
		byCorrelation: make(map[string][]int),
		appended:      make(chan struct{}),
		nodes:         make(map[string]*memNode),
		leases:        make(map[journal.StreamID]*memLease),
		leaseChanged:  make(chan struct{}),
	}
}

// Close closes the journal. Afterwards every call fails with ErrStoreNotOpen,
// running subscriptions end with it and waiting Acquires fail with it. Close
// is idempotent and always returns nil.
func (m *Journal) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed.Load() {
		m.closed.Store(true)
		close(m.done)
	}
	return nil
}

func errClosed() error {
	return fmt.Errorf("%w: the in-memory journal is closed; create a new one with New", journal.ErrStoreNotOpen)
}

// lock takes the mutex and fails when the journal is closed or ctx has ended.
// On success the caller must unlock.
func (m *Journal) lock(ctx context.Context) error {
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

func (m *Journal) now() time.Time { return m.clock().UTC().Truncate(time.Microsecond) }

// Limits returns the limits Append validates with (journal.Limited).
func (m *Journal) Limits() journal.Limits { return m.limits }

// recordLog is the journal's records in position order, kept in chunks of
// fixed size: appending never copies earlier records (a single growing
// slice copies the whole log each time it doubles, inside the journal's
// lock), and a pointer to a record stays valid.
type recordLog struct {
	chunks [][]journal.Record
	n      int
}

const recordChunk = 1 << 12

func (l *recordLog) len() int { return l.n }

// at returns record i (0-based); i must be below len.
func (l *recordLog) at(i int) *journal.Record { return &l.chunks[i/recordChunk][i%recordChunk] }

func (l *recordLog) push(r journal.Record) {
	if l.n%recordChunk == 0 {
		l.chunks = append(l.chunks, make([]journal.Record, 0, recordChunk))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, r)
	l.n++
}
