package tagconsistency

import (
	"context"
	"fmt"
	"slices"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"github.com/scribe-es/scribe/journal"
)

// fold builds the state from the events matching cmd.Query and returns it with
// the position of the last matching event (zero when none matched).
//
// Every event matching an item carries all of the item's tags, and every such
// tag is reserved, so reading one reserved stream per item finds them all;
// the streams are read with ReadStream, which shows every committed event of
// the stream (a DCB Read may hide recent commits behind its visibility gate,
// which would turn into a spurious conflict). The reserved streams do not move
// while reserved, except by writers that bypass the owners, which the append
// then rejects.
//
// The fold starts from the cached fold of key when there is one (taking it out
// of the cache) and then reads only the streams that moved since, from the
// first version it has not seen; otherwise from the owners' complete record
// caches when they cover the query; otherwise from version 1.
func fold[S any](ctx context.Context, x *Executor, cmd Command[S], held []*Reservation, key string) (state S, after journal.Position, err error) {
	ctx, span := x.tel.tracer.Start(ctx, otelx.SpanDCBRead)
	defer span.End()
	fail := func(err error) (S, journal.Position, error) {
		otelx.Failed(span, err)
		return state, after, err
	}

	if cmd.FromStates != nil {
		states := make(map[journal.Tag]Held, len(held))
		for _, r := range held {
			states[r.Stream.Tag] = Held{State: r.State, Version: r.Version}
			if r.LastPosition.After(after) {
				after = r.LastPosition
			}
		}
		var ok bool
		if err := guard(cmd.Name, "fromstates", func() { state, ok = cmd.FromStates(states) }); err != nil {
			return fail(err)
		}
		if ok {
			span.SetAttributes(attribute.String("scribe.dcb.source", "states"))
			return state, after, nil
		}
		var zero S
		state, after = zero, journal.Position{}
	}

	var from map[journal.Tag]uint64 // versions already folded, when cached
	if e, ok := x.cache.take(key); ok {
		if st, ok := e.state.(S); ok {
			state, after, from = st, e.after, e.versions
		}
	}
	if from == nil {
		if cmd.Initial != nil {
			if err := guard(cmd.Name, "initial", func() { state = cmd.Initial() }); err != nil {
				return fail(err)
			}
		}
		if cached, ok := fromCache(cmd.Query, held); ok {
			span.SetAttributes(attribute.String("scribe.dcb.source", "owners"), attribute.Int("scribe.dcb.events", len(cached)))
			for _, r := range cached {
				if err := guard(cmd.Name, "evolve", func() { state = cmd.Evolve(state, r) }); err != nil {
					return fail(err)
				}
				after = r.Position
			}
			return state, after, nil
		}
		span.SetAttributes(attribute.String("scribe.dcb.source", "journal"))
	} else {
		span.SetAttributes(attribute.String("scribe.dcb.source", "cache"))
	}

	// The records to fold, by pointer into the read (or cached) pages: a
	// record is some 300 bytes, and sorting them moved each several times.
	var fresh []*journal.Record
	seen := make(map[uuid.UUID]bool)
	tailHits := 0
	for _, r := range streamsToRead(cmd.Query, held) {
		v := from[r.Stream.Tag]
		if from != nil && v == r.Version {
			continue // nothing new in this stream
		}
		// Records up to the owner's version may come from the tail cache;
		// records past it (written behind the owner's back) make the append
		// fail on the expected version either way.
		recs, cached := x.tails.get(r.Stream, v, r.Version)
		if cached {
			tailHits++
		} else {
			recs = recs[:0]
			start := time.Now()
			for rec, rerr := range x.journal.ReadStream(ctx, r.Stream, v+1, 0) {
				if rerr != nil {
					x.tel.journal.Read(ctx, time.Since(start), rerr)
					return fail(fmt.Errorf("tagconsistency: command %q: reading stream %s: %w", cmd.Name, r.Stream, rerr))
				}
				recs = append(recs, rec)
			}
			x.tel.journal.Read(ctx, time.Since(start), nil)
			x.tails.add(r.Stream, recs)
		}
		for i := range recs {
			rec := &recs[i]
			if rec.Position.After(after) && !seen[rec.ID] && cmd.Query.Matches(rec) {
				seen[rec.ID] = true
				fresh = append(fresh, rec)
			}
		}
	}
	span.SetAttributes(attribute.Int("scribe.dcb.tail_hits", tailHits))
	slices.SortFunc(fresh, func(a, b *journal.Record) int { return a.Position.Compare(b.Position) })
	for _, rec := range fresh {
		if err := guard(cmd.Name, "evolve", func() { state = cmd.Evolve(state, *rec) }); err != nil {
			return fail(err)
		}
		after = rec.Position
	}
	span.SetAttributes(attribute.Int("scribe.dcb.events", len(fresh)))
	return state, after, nil
}

// streamsToRead picks one reserved stream per query item, the shortest of the
// item's tags, without repeats.
func streamsToRead(q journal.Query, held []*Reservation) []*Reservation {
	byTag := make(map[journal.Tag]*Reservation, len(held))
	for _, r := range held {
		byTag[r.Stream.Tag] = r
	}
	var out []*Reservation
	for _, it := range q.Items {
		var best *Reservation
		for _, t := range it.Tags {
			if r := byTag[t]; best == nil || r.Version < best.Version {
				best = r
			}
		}
		if !slices.Contains(out, best) {
			out = append(out, best)
		}
	}
	return out
}

// versionsOf returns the reserved streams' versions.
func versionsOf(held []*Reservation) map[journal.Tag]uint64 {
	v := make(map[journal.Tag]uint64, len(held))
	for _, r := range held {
		v[r.Stream.Tag] = r.Version
	}
	return v
}

// advance folds a successful command's own matching records into its state
// and caches the result at the streams' new versions. The append condition
// guaranteed that no other matching event lies between after and these
// records.
func advance[S any](c *foldCache, cmd Command[S], key string, state S, after journal.Position, held []*Reservation, records []journal.Record) {
	if c == nil || cmd.FromStates != nil {
		return
	}
	versions := versionsOf(held)
	for _, r := range records {
		for _, l := range r.Links {
			if _, ok := versions[l.Tag]; ok {
				versions[l.Tag] = l.Version
			}
		}
		if !cmd.Query.Matches(&r) {
			continue
		}
		if guard(cmd.Name, "evolve", func() { state = cmd.Evolve(state, r) }) != nil {
			return
		}
		after = r.Position
	}
	c.put(foldEntry{key: key, state: state, after: after, versions: versions})
}

// fromCache collects the records matching q from the owners' complete record
// caches, in ascending position order. It reports false when some query item
// has no reserved tag with a complete cache (then the journal is read).
func fromCache(q journal.Query, held []*Reservation) ([]journal.Record, bool) {
	byTag := make(map[journal.Tag]*Reservation, len(held))
	for _, r := range held {
		if r.Complete {
			byTag[r.Stream.Tag] = r
		}
	}
	if len(byTag) == 0 {
		return nil, false
	}
	var out []journal.Record
	seen := make(map[uuid.UUID]bool)
	for _, it := range q.Items {
		var src *Reservation
		for _, t := range it.Tags {
			if r, ok := byTag[t]; ok {
				src = r
				break
			}
		}
		if src == nil {
			return nil, false
		}
		for i := range src.Records {
			r := &src.Records[i]
			if !seen[r.ID] && it.Matches(&r.Event) {
				seen[r.ID] = true
				out = append(out, *r)
			}
		}
	}
	slices.SortFunc(out, func(a, b journal.Record) int { return a.Position.Compare(b.Position) })
	return out, true
}
