package actors

// Pipelining per stream: deciding the next batch while the previous one's
// append is in flight.
//
// While a batch's append is in flight (and during the completion linger that
// follows it), the commands that arrive are decided at once, in order, on top
// of the state that append leads to, into the open batch. When the append is
// confirmed the open batch is appended next, so deciding no longer sits
// between one commit and the next. Nothing is acknowledged early: the open
// batch's commands are answered only when their own append is confirmed (or
// it decided no events), after every command of the batch before it, so
// acknowledgements stay in order. If the append in flight fails, or its
// result is not the one the actor decided on, the open batch's commands are
// put back at the head of the queue, undecided, behind the failed batch's,
// and decided again on the state the actor then recovers; none is answered
// from a decision on a state that did not happen.
//
// Only one append per stream is ever in flight: the next is sent after the
// previous one is confirmed, because a journal (Postgres) serializes a
// stream's appends until each commits anyway, and a second transaction sent
// early would only wait for the first one's locks, or take them first and be
// fenced.
//
// The in-memory journal (appended on the actor's goroutine, no I/O) is not
// pipelined: it has nothing to overlap. What is not decided ahead: a command whose idempotency key needs a journal
// lookup or repeats a key of the append in flight (it waits, as before, for
// that append), a reservation (it waits for every batch before it), and
// anything while a failure is being isolated (split), the state is stale or
// being rebuilt, or the lease is not known valid. The open batch's commands
// still count toward Config.MaxQueue and MaxPending until it is sent, so the
// bounds hold as before.

// decideAhead decides the commands at the head of the queue into the open batch,
// when the actor may decide ahead.
func (a *streamActor) decideAhead() {
	if a.host.inlineAppend {
		// The in-memory journal appends on the actor's own goroutine: there
		// is no I/O to overlap, and deciding command by command as they
		// arrive would only cost more than deciding the batch at once.
		return
	}
	if (a.st != stReady && a.st != stAppending) || a.owed.owes() > 0 || a.failErr != nil || a.split.limit > 0 || a.epoch != a.host.StoreEpoch() {
		return
	}
	room := a.host.cfg.MaxBatch
	if a.open != nil {
		room -= len(a.open.entries)
	}
	if room <= 0 {
		return
	}
	a.trimAbandoned()
	if len(a.queue) == 0 {
		return
	}
	if _, ok := a.queue[0].(*commandReq); !ok {
		return
	}
	// Truthful answers: nothing is decided unless the lease is known valid
	// right now (pump fails the queue when it is not).
	if a.leaseCheck() != nil {
		return
	}
	cmds := a.nextBatch(room)
	n := 0
	for _, r := range cmds {
		if key := r.cmd.Metadata.IdempotencyKey; key != "" {
			if !a.keys.known(key) && !a.lookedUp[key] {
				break // needs a lookup: waits for the append in flight
			}
			if f := a.inflight; f != nil {
				if _, ok := f.keys[key]; ok {
					break // its first execution is in flight
				}
			}
		}
		n++
	}
	if n == 0 {
		return
	}
	cmds = cmds[:n]
	a.popQueue(n)
	if a.open == nil {
		a.open = a.newBatch()
	}
	before := len(a.open.entries)
	// decideInto takes each command, which stops counting it toward the
	// queue bounds; count them once more first, so that the bounds never
	// dip while the commands move into the open batch (a caller admitted in
	// that moment would exceed MaxQueue or MaxPending).
	a.entry.queued.Add(int64(n))
	a.host.pending.Add(int64(n))
	if !a.decideInto(a.open, cmds) {
		// onPanic put the open batch's commands back in the queue.
		a.uncount(a.openHeld + n)
		a.open, a.openHeld = nil, 0
		return
	}
	held := len(a.open.entries) - before
	a.entry.queued.Add(int64(held - n))
	a.host.pending.Add(int64(held - n))
	a.openHeld += held
}

// takeOpen returns the open batch (nil if none) and stops counting its
// commands toward the queue bounds.
func (a *streamActor) takeOpen() *batch {
	b := a.open
	a.uncount(a.openHeld)
	a.open, a.openHeld = nil, 0
	return b
}

// dissolveOpen puts the open batch's commands back at the head of the queue,
// undecided.
func (a *streamActor) dissolveOpen() {
	if b := a.takeOpen(); b != nil {
		a.requeue(b, false, nil)
	}
}

// uncount stops counting n decided commands toward the queue bounds.
func (a *streamActor) uncount(n int) {
	if n > 0 {
		a.entry.queued.Add(-int64(n))
		a.host.pending.Add(-int64(n))
	}
}

// waiting counts the commands that will go into the next append: queued and
// already decided into the open batch.
func (a *streamActor) waiting() int {
	n := len(a.queue)
	if a.open != nil {
		n += len(a.open.entries)
	}
	return n
}
