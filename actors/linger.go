package actors

import (
	"time"
)

// Completion linger: when a batch of several commands completes, the callers it
// answered usually send their next command at once (closed-loop clients,
// request handlers). Starting the next batch right away would split the
// writers in two halves that alternate forever (one half in flight, the other
// queued), each batch paying a whole commit for half of the commands. So after
// such a batch the actor waits, at most a quarter of that batch's append time
// and at most maxCompletionLinger, until as many commands are queued as the
// completed batch carried plus those already waiting; then it decides them as
// one batch. A lone caller never waits (a one-command batch sets no linger),
// and commands that do not come back cost at most the bound.

// maxCompletionLinger bounds the completion linger.
const maxCompletionLinger = time.Millisecond

// lingerState is the actor's pending completion linger.
type lingerState struct {
	until  time.Time // zero: none
	target int       // queue length that ends it early
	armed  bool      // a lingerMsg is scheduled
	seq    uint64    // identifies the linger a lingerMsg belongs to
}

// lingerMsg ends the completion linger with the same seq.
type lingerMsg struct{ seq uint64 }

// startLinger begins a completion linger after a batch of n commands whose
// append took took.
func (a *streamActor) startLinger(n int, took time.Duration) {
	d := min(maxCompletionLinger, took/4)
	if h := a.host.hooks; h != nil && h.linger > 0 {
		d = h.linger
	}
	if n < 2 || d <= 0 {
		return
	}
	a.linger = lingerState{until: time.Now().Add(d), target: n + a.waiting(), seq: a.linger.seq + 1}
}

// lingering reports whether the next batch should wait for more commands,
// arming the wake-up when it should.
func (a *streamActor) lingering() bool {
	l := &a.linger
	if l.until.IsZero() {
		return false
	}
	now := time.Now()
	if a.waiting() >= l.target || !now.Before(l.until) {
		*l = lingerState{seq: l.seq}
		return false
	}
	if !l.armed {
		l.armed = true
		h, self, seq := a.host, a.self, l.seq
		time.AfterFunc(l.until.Sub(now), func() { h.send(self, &lingerMsg{seq: seq}) })
	}
	return true
}

// onLinger ends the linger the message belongs to.
func (a *streamActor) onLinger(m *lingerMsg) {
	if m.seq == a.linger.seq {
		a.linger = lingerState{seq: a.linger.seq}
	}
}
