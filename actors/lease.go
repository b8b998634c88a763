package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/scribe-es/scribe/internal/backoff"
	"github.com/scribe-es/scribe/journal"
)

// leaseMarginDivisor sets the safety margin of lease validity: a node session
// is trusted until the last successful claim or renewal was *sent* plus
// SessionTimeout minus SessionTimeout/leaseMarginDivisor. The database
// measures expiry from when it processed the request, which is later than
// when it was sent, so the local bound is never later than the database's;
// the margin absorbs a clock that runs slower here than there.
const leaseMarginDivisor = 10

// maxRenewBackoff caps the wait between failed renewals (database
// unreachable), so a node serves again soon after the database returns.
const maxRenewBackoff = time.Second

// renewLogInterval rate-limits the warnings about failing renewals.
const renewLogInterval = 5 * time.Second

// leaseClock knows until when this host's node session, and with it every
// stream lease, is known valid. It is read by every actor before it decides,
// appends, grants a reservation or serves state, and by deliver; it is written
// by the renewal loop. Times are monotonic (time.Since of a fixed origin), so a
// wall-clock jump or a paused process cannot make a stale lease look fresh:
// the monotonic clock keeps running while the process is stopped.
type leaseClock struct {
	node    string
	timeout time.Duration
	window  time.Duration // timeout minus the safety margin
	origin  time.Time
	validTo atomic.Int64 // nanoseconds since origin
	// fault, once set, is permanent: another live process opened this node ID.
	fault atomic.Pointer[error]
	kick  chan struct{} // buffered 1: asks the renewal loop to renew now
}

func (l *leaseClock) init(node string, timeout time.Duration, sent time.Time) {
	l.node, l.timeout = node, timeout
	l.window = timeout - timeout/leaseMarginDivisor
	l.origin = sent
	l.kick = make(chan struct{}, 1)
	l.validTo.Store(int64(l.window))
}

// confirmed records a successful OpenNode or RenewNode sent at sent.
func (l *leaseClock) confirmed(sent time.Time) {
	v := int64(sent.Sub(l.origin) + l.window)
	for {
		cur := l.validTo.Load()
		if v <= cur || l.validTo.CompareAndSwap(cur, v) {
			return
		}
	}
}

// superseded makes every later check fail with err.
func (l *leaseClock) superseded(err error) { l.fault.CompareAndSwap(nil, &err) }

// check returns nil while the node session is known valid; otherwise an
// error matching ErrLeaseLost, and it asks the renewal loop to renew at once.
func (l *leaseClock) check() error {
	if f := l.fault.Load(); f != nil {
		return *f
	}
	now := time.Since(l.origin)
	valid := time.Duration(l.validTo.Load())
	if now < valid {
		return nil
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return fmt.Errorf("%w: node %q last confirmed its session %s ago, past the session timeout (%s) less a margin (paused, or the database unreachable); nothing was decided: retry shortly",
		ErrLeaseLost, l.node, (now - valid + l.window).Round(time.Millisecond), l.timeout)
}

// Ready returns nil while the host can serve: its node session was confirmed
// by the database less than the session timeout (minus a safety margin) ago
// and no other live process opened the same node ID. Otherwise it returns the
// error Execute would return (matching ErrLeaseLost; for a twin node ID also
// journal.ErrNodeSuperseded) and asks for a renewal at once. Safe for
// concurrent use; it does no I/O.
func (h *Host) Ready() error {
	if h.closed.Load() {
		return ErrShutdown
	}
	return h.lease.check()
}

// renewLoop renews the node session every SessionTimeout/3, at once when an
// actor found the lease lapsed, and with a short back-off after a failure.
//
//   - Expired or closed session (this process was paused, or cut off, past
//     the timeout): every actor stops and fails its pending work with
//     journal.ErrSessionExpired, and a new incarnation is opened: streams
//     are acquired again (new epoch) and reloaded, never served from the
//     old cache.
//   - Superseded by a newer incarnation of the same node ID while this
//     process lives: two live processes share one node ID. Re-opening would
//     supersede the other, which would do the same: both would take each
//     other's leases forever. This host stops its actors and never serves
//     again (Ready and Execute fail with ErrLeaseLost and
//     journal.ErrNodeSuperseded); the newer process serves.
func (h *Host) renewLoop() {
	defer close(h.renewDone)
	interval := h.cfg.SessionTimeout / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	retry := backoff.Backoff{Min: max(interval/16, 10*time.Millisecond), Max: min(maxRenewBackoff, interval)}
	for {
		select {
		case <-h.renewStop:
			return
		case <-t.C:
		case <-h.lease.kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		if h.lease.fault.Load() != nil {
			t.Reset(interval)
			continue
		}
		if h.renew(interval) {
			retry.Reset()
			t.Reset(interval)
			continue
		}
		t.Reset(retry.Next())
	}
}

// renew renews (or re-opens) the node session once; it reports success.
func (h *Host) renew(interval time.Duration) bool {
	ctx, cancel := context.WithTimeout(h.ctx, interval)
	defer cancel()
	cur := h.node.Load()
	sent := time.Now()
	next, err := h.cfg.Sessions.RenewNode(ctx, *cur)
	switch {
	case err == nil:
		h.node.CompareAndSwap(cur, &next)
		h.lease.confirmed(sent)
		if h.renewFailures > 0 {
			h.cfg.Logger.Info("node session renewed again", "node", h.cfg.NodeID, "failures", h.renewFailures)
			h.renewFailures, h.renewLogged = 0, time.Time{}
		}
		return true
	case errors.Is(err, journal.ErrNodeSuperseded):
		fault := fmt.Errorf("%w: another live process opened node ID %q (incarnation %d superseded), so this one stopped serving: give every process its own NodeID (e.g. the pod name) and restart: %w",
			ErrLeaseLost, h.cfg.NodeID, cur.Incarnation, err)
		h.lease.superseded(fault)
		h.cfg.Logger.Error("node ID in use by another live process; this host stopped serving", "node", h.cfg.NodeID, "incarnation", cur.Incarnation, "error", err)
		h.tel.fenceRejections.Add(context.Background(), 1)
		h.loseSession(fault)
		return true
	case isSessionError(err):
		h.cfg.Logger.Error("node session lost; stopping every stream actor and opening a new session",
			"node", h.cfg.NodeID, "incarnation", cur.Incarnation, "error", err)
		h.tel.fenceRejections.Add(context.Background(), 1)
		h.loseSession(err)
		sent = time.Now()
		fresh, oerr := h.cfg.Sessions.OpenNode(ctx, h.cfg.NodeID, h.cfg.SessionTimeout)
		if oerr != nil {
			h.cfg.Logger.Warn("reopening the node session failed; retrying", "node", h.cfg.NodeID, "error", oerr)
			return false
		}
		h.node.Store(&fresh)
		h.lease.confirmed(sent)
		return true
	default:
		// One line per renewLogInterval while the database is away, not
		// one per attempt.
		h.renewFailures++
		if now := time.Now(); now.Sub(h.renewLogged) >= renewLogInterval {
			h.renewLogged = now
			h.cfg.Logger.Warn("renewing the node session failed; retrying", "node", h.cfg.NodeID, "failures", h.renewFailures, "error", err)
		}
		return false
	}
}

// ---- the stream actor's lease: one path for every way it is found invalid ----

// leaseSource says which call found a stream actor's lease invalid.
type leaseSource uint8

const (
	// fromAppend: the journal refused the actor's own append.
	fromAppend leaseSource = iota
	// fromReservation: the journal refused the append of a DCB command that
	// held a reservation of this stream; the lease refused may be another
	// reserved stream's (a partition move revokes every lease of the
	// partition), so this one is taken again all the same.
	fromReservation
	// fromSession: the node session, and with it every lease of the node,
	// was lost (the renewal loop found it expired, closed or superseded).
	fromSession
)

// leaseHeld reports whether the actor holds its stream's lease.
func (a *streamActor) leaseHeld() bool { return a.lease != (journal.Lease{}) }

// leaseCheck is the check before the actor decides, grants a reservation or
// appends: nil while the node session is known valid (leaseClock), else the
// retryable error every waiting request gets. The states that need the lease
// (streamState.leased) cannot be entered without one; a lease found invalid
// is dropped by leaseInvalid.
func (a *streamActor) leaseCheck() error {
	if err := a.host.lease.check(); err != nil {
		return fmt.Errorf("actors: stream %s: %w", a.stream, err)
	}
	return nil
}

// leaseInvalid is the one path for a lease the journal or the node session
// refused, whichever call found it. It drops the lease and returns the state
// the actor goes to:
//
//   - stFenced when the stream's own lease was revoked (journal.LeaseRevoked)
//     under a live node session: the actor acquires the stream again and
//     catches up before it decides or grants anything, so no reservation
//     carries the refused lease. A revocation of the actor's own append
//     while the lease taken again after the previous one has not written yet
//     means another node keeps taking the stream: the actor stops instead.
//   - stFailed otherwise (the node session is gone): the actor stops with
//     failErr, which pending and later requests get.
func (a *streamActor) leaseInvalid(cause error, src leaseSource) streamState {
	a.lease = journal.Lease{}
	if src != fromSession && journal.LeaseRevoked(cause) && (src == fromReservation || a.revocations == 0) {
		a.revocations++
		if src == fromAppend {
			a.host.cfg.Logger.Info("append fenced: the stream's lease was revoked; acquiring it again and deciding the batch anew", "stream", a.stream.String(), "error", cause)
		}
		return stFenced
	}
	err := cause
	if src != fromSession {
		// The renewal loop's error already names the stream (loseSession).
		err = sessionLost(a.stream, cause)
		a.host.cfg.Logger.Warn("append fenced: the stream's lease was lost; stopping the actor", "stream", a.stream.String(), "error", cause)
	}
	a.fail(err)
	return stFailed
}
