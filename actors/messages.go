package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Request states: a caller abandons a pending request when its context ends;
// the actor takes it when it decides (or grants) it. Exactly one wins.
const (
	reqPending int32 = iota
	reqTaken
	reqAbandoned
)

type reqStatus struct {
	v atomic.Int32
	// queued and pending count the stream's and the host's requests not yet
	// taken or abandoned (Host.Pending, Config.MaxQueue, Config.MaxPending);
	// set by deliver.
	queued, pending *atomic.Int64
}

func (s *reqStatus) leave() {
	if s.queued != nil {
		s.queued.Add(-1)
		s.pending.Add(-1)
	}
}

// take reports whether the actor may act on the request.
func (s *reqStatus) take() bool {
	if s.v.CompareAndSwap(reqPending, reqTaken) {
		s.leave()
		return true
	}
	return s.v.Load() == reqTaken
}

// abandon reports whether the caller withdrew the request before the actor took it.
func (s *reqStatus) abandon() bool {
	if s.v.CompareAndSwap(reqPending, reqAbandoned) {
		s.leave()
		return true
	}
	return false
}

func (s *reqStatus) abandoned() bool { return s.v.Load() == reqAbandoned }

type commandReply struct {
	res     Result
	err     error
	outcome string // one of the Outcome constants
}

// commandReq is a command on its way to, or queued in, a stream actor.
type commandReq struct {
	reqStatus
	ctx      context.Context
	cmd      Command
	enqueued time.Time
	reply    chan commandReply // buffered, size 1
	// mailboxWait is written by the actor before it replies.
	mailboxWait time.Duration
	// retries counts the times the actor decided the command again after
	// an append failed without writing (a version mismatch); actor-owned.
	retries int
}

type reserveReply struct {
	res *tagconsistency.Reservation
	err error
}

// reserveReq asks for a DCB reservation of a stream.
type reserveReq struct {
	reqStatus
	ctx      context.Context
	enqueued time.Time
	reply    chan reserveReply // buffered, size 1
}

// discardMsg tells an actor that its in-memory state must never be
// snapshotted (Host.Evict).
type discardMsg struct{}

// drainMsg is the last message a draining actor receives. err is nil for a
// passivation or shutdown, the session error when the node session was lost.
type drainMsg struct{ err error }

type confirmMsg struct {
	id      uint64
	records []journal.Record
	reply   chan error
}

type cancelMsg struct {
	id    uint64
	cause error
	reply chan error
}

type reservationExpiredMsg struct{ id uint64 }

// activatedMsg ends activation. lease is zero when none was acquired. ghost:
// the stream had no events when read at probedAt; nothing was acquired and
// rec is the initial state.
type activatedMsg struct {
	lease    journal.Lease
	ghost    bool
	probedAt time.Time
	rec      recovered
	err      error
	duration time.Duration
	epoch    uint64 // the host's StoreEpoch before the store was read
}

// recovered is a state rebuilt from a snapshot and the journal.
type recovered struct {
	state       any
	version     uint64
	lastPos     journal.Position
	head        journal.Hash // chain hash at version (zero if unknown)
	snapVersion uint64
	keys        *keyCache
	// behind is set by a catch-up that found the store behind (or apart
	// from) the cache it started from: nothing of it was adopted.
	behind *StoreRewind
}

// rebuiltMsg ends a catch-up (tail replay) or a full rebuild.
type rebuiltMsg struct {
	full  bool
	rec   recovered
	err   error
	epoch uint64 // the host's StoreEpoch before the store was read
	// reacquire: the catch-up began by acquiring the stream again (its lease
	// was revoked); lease is the new lease, nil when Acquire failed (err).
	reacquire bool
	lease     *journal.Lease
}

type appendDoneMsg struct {
	b    *batch
	res  journal.AppendResult
	err  error
	took time.Duration
}

type lookupDoneMsg struct {
	found map[string][]journal.Record
	err   error
}

type snapshotDoneMsg struct {
	snap snapshots.Snapshot
	err  error
}

type finalDoneMsg struct{}

// idleCheckMsg is sent by the actor's idle timer.
type idleCheckMsg struct{}
