package postgres

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
)

// decide judges each append of batch in order against st, as if they ran one
// after the other: duplicates, leases, expected versions (against the running
// versions), conditions (the database's answer, plus the batch's earlier
// accepted events). Accepted events are linked into their hash chains and
// advance st's running stream states.
func (j *Journal) decide(batch []*appendReq, st *batchState) decision {
	d := decision{outcomes: make([]appendOutcome, len(batch)), acceptedIdx: map[int][2]int{}, dups: map[int]bool{}}
	now := j.cfg.Clock().UTC().Truncate(time.Microsecond)
	batchIDs := map[uuid.UUID]bool{}
	for mi, r := range batch {
		inDB, inBatch := 0, 0
		for i := range r.events {
			if st.existing[r.events[i].ID] {
				inDB++
			}
			if batchIDs[r.events[i].ID] {
				inBatch++
			}
		}
		switch {
		case inDB == len(r.events) || inBatch == len(r.events):
			d.dups[mi] = true
			continue
		case inDB+inBatch > 0:
			d.outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: %d of the append's %d event IDs are already stored; an append is idempotent only as a whole: retry it with exactly the same events, or use fresh IDs", journal.ErrDuplicateMismatch, inDB+inBatch, len(r.events))}
			continue
		}
		if err := checkClaims(r, st.keys, st.nodes); err != nil {
			d.outcomes[mi] = appendOutcome{err: err}
			continue
		}
		if st.condHit[mi] {
			d.outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: an event matching the condition's query exists after position %s; read again and decide on the newer events", journal.ErrAppendConditionFailed, r.opts.Condition.After)}
			continue
		}
		if c := r.opts.Condition; c != nil {
			hit := false
			for i := range d.accepted {
				if c.FailIfEventsMatch.Matches(&d.accepted[i]) {
					hit = true
					break
				}
			}
			if hit {
				d.outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: an event matching the condition's query was appended concurrently after position %s; read again and decide on the newer events", journal.ErrAppendConditionFailed, c.After)}
				continue
			}
		}
		from := len(d.accepted)
		for i := range r.events {
			rec := journal.Record{Event: r.events[i], RecordedAt: now}
			backend.LinkRecord(&rec, func(t journal.Tag) (uint64, journal.Hash) {
				s := st.keys[streamKey{r.partition, string(t)}]
				return s.version, s.head
			})
			for _, l := range rec.Links {
				s := st.keys[streamKey{r.partition, string(l.Tag)}]
				s.version, s.head = l.Version, l.Hash
				s.n++
				s.newest = len(d.accepted) + 1 // rec's index, appended below
			}
			batchIDs[rec.ID] = true
			d.accepted = append(d.accepted, rec)
		}
		for _, c := range r.claims {
			s := st.keys[streamKey{r.partition, c.tag}]
			s.claimed = true
			if c.lease != nil {
				l := *c.lease
				s.lease = &l
			}
		}
		d.acceptedIdx[mi] = [2]int{from, len(d.accepted)}
	}
	return d
}

// checkClaims checks r's leases and expected versions against the running
// stream states, by the journal's fence rule (backend.CheckLease,
// backend.CheckExpected). With nodes nil (a direct attempt) leases are left to
// the database. A claim of a retired stream fails with a
// *journal.StreamRetiredError, whatever else it carries.
func checkClaims(r *appendReq, keys map[streamKey]*fastStream, nodes map[string]fastNode) error {
	var errs []error
	for _, c := range r.claims {
		s := keys[streamKey{r.partition, c.tag}]
		id := journal.StreamID{Partition: r.partition, Tag: journal.Tag(c.tag)}
		if s.retired {
			errs = append(errs, &journal.StreamRetiredError{Stream: id, Version: s.before})
			continue
		}
		if l := c.lease; l != nil && nodes != nil {
			st := backend.LeaseState{Acquired: s.exists && s.node != nil, Epoch: uint64(s.epoch), Released: s.released}
			if s.node != nil {
				st.NodeID = *s.node
			}
			if s.inc != nil {
				st.Incarnation = uint64(*s.inc)
			}
			nr, found := nodes[l.NodeID]
			ns := backend.NodeState{Found: found, Incarnation: uint64(nr.inc), Closed: nr.closed, Live: nr.live}
			if err := backend.CheckLease(*l, st, ns); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if c.expect >= 0 {
			if err := backend.CheckExpected(id, uint64(c.expect), s.version); err != nil {
				errs = append(errs, err)
			}
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}
