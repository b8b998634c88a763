package memory

import (
	"context"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
)

// InlineAppend implements journal.InlineAppender: Append is in-process
// work under the journal's mutex, and it keeps nothing of its options.
func (m *Journal) InlineAppend() journal.Appender { return m }

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
// So the mutex never sits idle while a woken appender waits for a CPU.
func (m *Journal) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return journal.AppendResult{}, err
	}
	if m.closed.Load() {
		return journal.AppendResult{}, errClosed()
	}

	prepared, partition, err := journal.PrepareAppend(events, opts, m.limits)
	if err != nil {
		return journal.AppendResult{}, err
	}
	a := &memAppend{ctx: ctx, prepared: prepared, partition: partition, opts: opts,
		recs: make([]journal.Record, len(prepared))}
	if len(prepared) == 1 {
		a.content = a.oneContent[:]
	} else {
		a.content = make([][]byte, len(prepared))
	}
	for i := range prepared {
		a.recs[i].Event = prepared[i]
		a.content[i] = backend.CanonicalContent(&a.recs[i])
		a.recs[i].Links = make([]journal.StreamLink, max(1, len(a.recs[i].Tags)))
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
	return journal.AppendResult{Records: a.recs}, nil
}

// memAppend is one Append on its way through combine: its prepared input,
// and its outcome once applied.
type memAppend struct {
	ctx       context.Context
	prepared  []journal.Event
	partition string
	opts      journal.AppendOptions
	recs      []journal.Record // the records to store, completed when applied
	content   [][]byte         // backend.CanonicalContent of each record
	// oneContent is content's storage for an append of one event: a is
	// this Append's own and unreachable once it returns.
	oneContent [1][]byte

	res  journal.AppendResult // set with Duplicate, or left for Append to fill from recs
	err  error
	done chan bool // receives once: false when a is applied; true when a is still queued and its caller takes over combining
}

// memCombineMax bounds how many appends one combiner applies beyond its own
// before handing the role to the next queued caller, so no caller is kept
// applying other callers' appends for long.
const memCombineMax = 32

// combine applies a: queued behind the appends already waiting, and applied by
// whichever caller is combining, or by this one when none is.
func (m *Journal) combine(a *memAppend) {
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
	var prev []*memAppend // the batch applied last round, done with
	for applied := 0; ; {
		m.qmu.Lock()
		if prev != nil {
			clear(prev)
			m.spare, prev = prev[:0], nil
		}
		batch := m.queue
		if len(batch) == 0 {
			m.combining = false
			m.qmu.Unlock()
			return
		}
		m.queue, m.spare = m.spare, nil
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
		limit := memCombineMax
		if m.hooks != nil {
			limit = m.hooks.combineMax
		}
		if applied += len(batch); applied > limit {
			m.passRole()
			return
		}
		prev = batch
	}
}

// passRole ends this caller's turn as the combiner: the first queued caller
// takes the role over, or, with none queued, the next Append takes it.
func (m *Journal) passRole() {
	m.qmu.Lock()
	if len(m.queue) == 0 {
		m.combining = false
		m.qmu.Unlock()
		return
	}
	next := m.queue[0]
	if m.hooks != nil {
		m.hooks.handovers++
	}
	m.qmu.Unlock()
	next.done <- true
}

// applyBatch applies batch in order under the mutex. When applying one of
// them panics (the configured Clock is the only caller code it runs, before
// anything is changed), the appends before it keep their outcomes, it and the
// rest fail without being applied, and the panic value is returned.
func (m *Journal) applyBatch(batch []*memAppend) (panicked any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := 0
	defer func() {
		if p := recover(); p != nil {
			panicked = p
			for _, b := range batch[i:] {
				b.res, b.err = journal.AppendResult{}, fmt.Errorf("journal: the in-memory append was not applied: Config.Clock panicked while it or an append queued with it was applied (%v); fix the clock, then append again", p)
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
func (m *Journal) applyLocked(a *memAppend) {
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
		rec.Position = journal.Position{Commit: m.commit, Seq: uint64(idx) + 1}
		rec.RecordedAt = now
		backend.LinkCanonical(rec, backend.SealCanonical(a.content[i], now), func(tag journal.Tag) (uint64, journal.Hash) {
			if s := m.streams[journal.StreamID{Partition: a.partition, Tag: tag}]; s != nil {
				return uint64(len(s.records)), s.head
			}
			return 0, journal.Hash{}
		})
		for _, l := range rec.Links {
			id := journal.StreamID{Partition: a.partition, Tag: l.Tag}
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
func (m *Journal) signalLocked() {
	if m.committed && m.appendWatched {
		close(m.appended)
		m.appended = make(chan struct{})
		m.appendWatched = false
	}
	m.committed = false
}
