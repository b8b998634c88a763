package actors

import (
	"context"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"
	"github.com/scribe-es/scribe/internal/usercode"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
)

// maxSpanLinks caps the links an append span carries to the batch's commands.
const maxSpanLinks = 128

// streamActor is the single writer of one stream. All fields are touched only
// from Receive (the actor's turn), except that I/O goroutines receive copies
// or exclusive use of what they need while the actor is busy with them.
type streamActor struct {
	host   *Host
	stream journal.StreamID
	entry  *entry
	model  Model
	self   *actor.PID
	// spawnedBy is the span of the request that spawned the actor: the parent
	// of the activation's recovery span.
	spawnedBy trace.SpanContext

	// st is the actor's state (state.go); state is its aggregate's.
	st streamState
	// owed is what the cache needs once the I/O in flight (or the granted
	// reservation) ends, found meanwhile (need): stStale or stBroken, or
	// owesNothing.
	owed streamState
	// lease is the stream's lease; zero when none is held (a ghost, before
	// it is acquired, after it was found invalid: leaseInvalid).
	lease journal.Lease
	// revocations counts the leases found revoked since the actor last
	// wrote (an append, a DCB confirmation); it decides how the next
	// revocation is answered (leaseInvalid).
	revocations int
	state       any
	version     uint64
	lastPos     journal.Position // position of the event at version (zero if unknown)
	head        journal.Hash     // chain hash of the event at version (zero if unknown)
	snapVersion uint64
	// snapInFlight: a snapshot save is in flight. Not a state: a save runs
	// beside whatever the actor does (it never blocks an append); only the
	// next save and the passivation wait for it.
	snapInFlight bool
	keys         *keyCache
	queue        []any // *commandReq and *reserveReq in arrival order
	// inlineExpect and inlineLeases are the options of the actor's inline
	// appends (startAppend), reused: each append returns before the next.
	inlineExpect map[journal.Tag]uint64
	inlineLeases [1]journal.Lease
	reserved     *heldReservation
	// inflight is the batch whose append is in flight (stAppending); open
	// holds the commands decided on top of it (or during a completion
	// linger), appended once it is confirmed (decideAhead, pipeline.go).
	inflight *batch
	open     *batch
	openHeld int             // open's commands counted back into the queue bounds
	lookedUp map[string]bool // keys the journal does not hold, for the head batch

	// A ghost (stGhost) read its stream empty at probedAt (ghost.go).
	// answers are its batches that append nothing, answered when the actor
	// stops or takes the lease; carried is the batch that ended the ghost,
	// appended once the lease is held.
	probedAt time.Time
	answers  []*batch
	carried  *batch

	idleTimer  *time.Timer
	lastActive time.Time

	cost   appendCost  // recent append durations, for deadline shedding
	qdelay queueDelay  // queue-delay shedding state (overload.go)
	split  splitState  // narrowed batches after a failure one command can cause
	linger lingerState // after a batch: wait for its callers' next commands (linger.go)

	// discard: the state may hold erased personal data; never snapshot it
	// (Host.Evict). Not a state: a fact about the data, kept whatever the
	// actor does until it stops.
	discard bool
	// drainSeen: the actor received its last message (drainMsg); it
	// passivates once its queue is served. Not a state: the actor serves
	// what it already queued in whichever state it is in.
	drainSeen bool
	// failErr is what every request gets once the actor failed (stFailed,
	// entered when the I/O in flight ends).
	failErr error

	// epoch is the host's StoreEpoch when the cache was last validated
	// against the store (rewind.go); snapCap, when not 0, bounds the next
	// full reload to snapshots below that version (after a rewind).
	epoch   uint64
	snapCap uint64
}

type heldReservation struct {
	id    uint64
	timer *time.Timer
}

// batch is one group commit: the commands decided together and their events.
type batch struct {
	startVersion uint64
	entries      []batchEntry
	first        [1]batchEntry // entries' storage while the batch has one command
	events       []journal.Event
	state        any
	keys         map[string]int // idempotency key -> index of the entry that appends its events
}

type batchEntry struct {
	req      *commandReq
	from, to int // the command's events in batch.events
	state    any
	err      error // domain or encoding error: the command appends nothing
	domain   bool
	dupOf    int              // ≥ 0: the same idempotency key as an earlier entry of the batch
	prep     journal.Prepared // the command's events, validated (empty when it appends none)
}

// Receive implements actor.Actor.
func (a *streamActor) Receive(c actor.Context) {
	msg := c.Message()
	if _, idle := msg.(*idleCheckMsg); !idle {
		a.lastActive = time.Now()
	}
	switch m := msg.(type) {
	case *actor.Started:
		a.self = c.Self()
		a.host.tel.active.Add(context.Background(), 1)
		a.activate(true)
	case *commandReq:
		a.enqueue(m)
	case *reserveReq:
		a.enqueue(m)
	case *activatedMsg:
		a.onActivated(c, m)
	case *appendDoneMsg:
		a.onAppendDone(m)
	case *lookupDoneMsg:
		a.onLookupDone(m)
	case *rebuiltMsg:
		a.onRebuilt(m)
	case *snapshotDoneMsg:
		a.onSnapshotDone(m)
	case *confirmMsg:
		a.onConfirm(m)
	case *cancelMsg:
		a.onCancel(m)
	case *reservationExpiredMsg:
		a.onReservationExpired(m)
	case *discardMsg:
		a.discard = true
	case *drainMsg:
		a.drainSeen = true
		if m.err != nil && a.failErr == nil {
			a.leaseInvalid(m.err, fromSession)
		}
	case *finalDoneMsg:
		a.stop(c)
		return
	case *idleCheckMsg:
		a.onIdle()
		return
	case *lingerMsg:
		a.onLinger(m)
	case *actor.Stopped:
		a.onStopped()
		return
	default:
		return
	}
	a.pump(c)
}

// popQueue drops the queue's first n entries. When that empties the queue,
// its backing array (cleared, so it holds no requests) takes the next
// arrivals, so a stream served one command at a time does not grow a new one
// per command. Nothing else holds a slice of the queue: the commands taken
// from it are copied out first (nextBatch).
func (a *streamActor) popQueue(n int) {
	if n == len(a.queue) {
		clear(a.queue)
		a.queue = a.queue[:0]
		return
	}
	a.queue = a.queue[n:]
}

func (a *streamActor) enqueue(r any) {
	if a.failErr != nil {
		a.failRequest(r, a.failErr)
		return
	}
	a.queue = append(a.queue, r)
}

// pump starts the next piece of work when the actor is free.
func (a *streamActor) pump(c actor.Context) {
	for !a.st.io() {
		switch a.st {
		case stFailed:
			a.failQueue(a.failErr)
			if a.drainSeen {
				a.finish(c)
			}
			return
		case stReserved, stStopped:
			return
		case stGhost:
			a.serveGhost(c)
			return
		}
		// stReady, or idle and owing a recovery (stStale, stFenced, stBroken).
		if a.carried != nil {
			a.sendCarried()
			continue
		}
		a.trimAbandoned()
		if a.open != nil {
			// Commands decided while the previous append was in flight or
			// the linger waited: append them (with any queued since) now.
			a.revalidate()
			if a.st != stReady {
				a.dissolveOpen()
				continue
			}
			if a.lingering() {
				a.decideAhead()
				return
			}
			if err := a.leaseCheck(); err != nil {
				a.failQueue(err)
				return
			}
			a.decideAhead()
			if b := a.takeOpen(); b != nil {
				a.sendBatch(b)
			}
			continue
		}
		if len(a.queue) == 0 {
			a.queue = nil
			if a.drainSeen {
				a.finish(c)
			}
			return
		}
		// Truthful answers: nothing is decided, granted or served from the
		// cache unless the lease is known valid right now.
		if err := a.leaseCheck(); err != nil {
			a.failQueue(err)
			return
		}
		// A store that may have changed (failover, restore) is re-read
		// before anything is decided, granted or answered from the cache.
		a.revalidate()
		if a.st != stReady {
			a.startRebuild()
			return
		}
		switch r := a.queue[0].(type) {
		case *reserveReq:
			a.popQueue(1)
			a.grant(r)
		case *commandReq:
			if a.lingering() {
				a.decideAhead()
				return
			}
			cmds := a.nextBatch(a.batchLimit())
			if len(cmds) == 0 {
				continue
			}
			if a.startLookup(cmds) {
				return
			}
			a.popQueue(len(cmds))
			a.decide(cmds)
		}
	}
	if a.st == stAppending {
		a.decideAhead()
	}
}

func (a *streamActor) trimAbandoned() {
	i := 0
	for i < len(a.queue) {
		switch r := a.queue[i].(type) {
		case *commandReq:
			if !r.abandoned() {
				a.queue = a.queue[i:]
				return
			}
			a.host.tel.commands.Add(context.Background(), 1, a.host.tel.outcomeOpts[otelx.OutcomeCanceled]...)
		case *reserveReq:
			if !r.abandoned() {
				a.queue = a.queue[i:]
				return
			}
		}
		i++
	}
	a.queue = a.queue[:0]
}

func (a *streamActor) failRequest(r any, err error) {
	switch r := r.(type) {
	case *commandReq:
		if r.take() {
			a.reply(r, Result{}, err, otelx.OutcomeError)
		}
	case *reserveReq:
		if r.take() {
			r.reply <- reserveReply{err: err}
		}
	}
}

func (a *streamActor) failQueue(err error) {
	a.dissolveOpen()
	for _, r := range a.queue {
		a.failRequest(r, err)
	}
	a.queue = nil
}

// fail stops the actor: pending and future requests get err. An idle actor
// enters stFailed now, one with I/O in flight when that ends (resume).
func (a *streamActor) fail(err error) {
	a.failErr = err
	if a.reserved != nil {
		a.reserved.timer.Stop()
		a.reserved = nil
	}
	a.failQueue(err)
	if !a.drainSeen {
		a.host.drain(a.stream, a.entry, &drainMsg{})
	}
	switch {
	case a.st.io(), a.st == stFailed, a.st == stStopped:
	default:
		a.to(stFailed)
	}
}

func (a *streamActor) reply(r *commandReq, res Result, err error, outcome string) {
	a.host.tel.commands.Add(context.Background(), 1, a.host.tel.outcomeOpts[outcome]...)
	r.reply <- commandReply{res: res, err: err, outcome: outcome}
}

// safe runs user code, turning a panic into a *usercode.PanicError.
func safe(stream journal.StreamID, phase string, fn func() error) error {
	return usercode.Run(stream, "", phase, fn)
}
