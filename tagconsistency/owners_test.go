package tagconsistency_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// store is what the test owners need from a backend.
type store interface {
	journal.Journal
	journal.Sessions
}

// lockOwners is a plain single-writer implementation of TagOwners used to test
// the executor on its own: one slot per stream, held by whoever writes it (a
// DCB reservation or an aggregate-style command through Do), queueing the
// rest in arrival order. It leases each stream from the journal's sessions,
// keeps the stream's records, and reloads them after a cancel with a cause.
type lockOwners struct {
	j        store
	node     journal.NodeSession
	complete bool // hand the cached records to the executor
	balances bool // hand out the account balance as the stream's state

	mu      sync.Mutex
	streams map[journal.StreamID]*lockStream
	// timeout, when set, is the owners' reservation timeout: a Reserve that
	// waits longer fails with ErrReservationTimeout (the owner enforces it,
	// as the TagOwners contract says).
	timeout time.Duration

	reloads atomic.Int64
}

type lockStream struct {
	slot chan struct{} // a token in it means held
	// Guarded by holding slot:
	loaded  bool
	lease   journal.Lease
	records []journal.Record
	// balance is the account balance folded over records[:balanceAt] (the
	// aggregate-style withdraw keeps it so it does not refold the stream).
	balance   int64
	balanceAt int
}

func newLockOwners(ctx context.Context, j store, node string) (*lockOwners, error) {
	// An hour: the owners never renew the session, and a loaded machine
	// under -race takes minutes over the larger scenarios.
	ns, err := j.OpenNode(ctx, node, time.Hour)
	if err != nil {
		return nil, err
	}
	return &lockOwners{j: j, node: ns, streams: make(map[journal.StreamID]*lockStream)}, nil
}

func (o *lockOwners) stream(id journal.StreamID) *lockStream {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.streams[id]
	if s == nil {
		s = &lockStream{slot: make(chan struct{}, 1)}
		o.streams[id] = s
	}
	return s
}

// hold takes the stream's slot and makes sure its view is loaded.
func (o *lockOwners) hold(ctx context.Context, id journal.StreamID) (*lockStream, error) {
	id = id.Normalize()
	s := o.stream(id)
	var expired <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case s.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-expired:
		return nil, fmt.Errorf("%w: %s stayed busy for %s", tagconsistency.ErrReservationTimeout, id, o.timeout)
	}
	if s.loaded {
		return s, nil
	}
	if s.lease == (journal.Lease{}) {
		l, err := o.j.Acquire(ctx, o.node, id, 5*time.Second)
		if err != nil {
			<-s.slot
			return nil, err
		}
		s.lease = l
	}
	var recs []journal.Record
	for r, err := range o.j.ReadStream(ctx, id, 1, 0) {
		if err != nil {
			<-s.slot
			return nil, err
		}
		recs = append(recs, r)
	}
	if len(s.records) > 0 {
		o.reloads.Add(1)
	}
	s.records, s.loaded = recs, true
	s.balance, s.balanceAt = 0, 0
	return s, nil
}

// adopt appends records of the stream's tag, checking they continue its versions.
func (s *lockStream) adopt(tag journal.Tag, recs []journal.Record) error {
	for _, r := range recs {
		if r.Version(tag) != uint64(len(s.records))+1 {
			s.loaded = false
			return fmt.Errorf("record version %d does not follow %d", r.Version(tag), len(s.records))
		}
		s.records = append(s.records, r)
	}
	return nil
}

func (o *lockOwners) Reserve(ctx context.Context, id journal.StreamID) (*tagconsistency.Reservation, error) {
	s, err := o.hold(ctx, id)
	if err != nil {
		return nil, err
	}
	r := &tagconsistency.Reservation{Stream: id.Normalize(), Lease: s.lease, Version: uint64(len(s.records)), Grantor: &lockGrant{s: s, tag: id.Tag}}
	if n := len(s.records); n > 0 {
		r.LastPosition = s.records[n-1].Position
	}
	if o.complete {
		r.Records, r.Complete = s.records, true
	}
	if o.balances {
		s.balance += balanceOf(id.Tag, s.records[s.balanceAt:])
		s.balanceAt = len(s.records)
		r.State = s.balance
	}
	return r, nil
}

// lockGrant ends a reservation of lockOwners: it frees the stream's slot.
type lockGrant struct {
	s   *lockStream
	tag journal.Tag
}

func (g *lockGrant) Confirm(_ context.Context, recs []journal.Record) error {
	defer func() { <-g.s.slot }()
	return g.s.adopt(g.tag, recs)
}

func (g *lockGrant) Cancel(_ context.Context, cause error) error {
	if cause != nil {
		g.s.loaded = false
	}
	<-g.s.slot
	return nil
}

// Do runs an aggregate-style command on one stream as its single writer:
// decide from the stream's records, append with the expected version and
// the lease, adopt the result.
func (o *lockOwners) Do(ctx context.Context, id journal.StreamID, decide func(*lockStream) ([]journal.Event, error)) ([]journal.Record, error) {
	s, err := o.hold(ctx, id)
	if err != nil {
		return nil, err
	}
	defer func() { <-s.slot }()
	events, err := decide(s)
	if err != nil || len(events) == 0 {
		return nil, err
	}
	for i := range events {
		events[i].ID = journal.NewEventID()
	}
	res, err := o.j.Append(ctx, events, journal.AppendOptions{
		Expect: map[journal.Tag]uint64{id.Tag: uint64(len(s.records))},
		Leases: []journal.Lease{s.lease},
	})
	if err != nil {
		s.loaded = false
		return nil, err
	}
	var mine []journal.Record
	for _, r := range res.Records {
		if r.HasTag(id.Tag) {
			mine = append(mine, r)
		}
	}
	if err := s.adopt(id.Tag, mine); err != nil {
		return nil, err
	}
	return res.Records, nil
}
