package memory

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// firstAfterLocked returns the index of the first record with position > p.
func (m *Journal) firstAfterLocked(p journal.Position) int {
	return sort.Search(m.records.len(), func(i int) bool { return m.records.at(i).Position.After(p) })
}

// firstFromLocked returns the index of the first record with position ≥ p.
func (m *Journal) firstFromLocked(p journal.Position) int {
	return sort.Search(m.records.len(), func(i int) bool { return m.records.at(i).Position.Compare(p) >= 0 })
}

// memCursor walks record indices: a range of them, or a slot range of an
// ascending list of them, forwards or backwards; then, when it follows a
// record log, every record index of the log from tail on, including those
// appended while the cursor is in use.
type memCursor struct {
	list   []int // candidate record indices, ascending; nil when all
	all    bool  // lo and hi bound record indices rather than slots of list
	lo, hi int   // [lo, hi) still to visit
	desc   bool
	follow *recordLog // nil: the cursor ends with [lo, hi)
	tail   int        // next index of follow to visit once [lo, hi) is done
}

// next returns the next record index to visit, and false when there is none
// yet (a following cursor may have more once records are appended).
func (c *memCursor) next() (int, bool) {
	if c.lo >= c.hi {
		if c.follow != nil && c.tail < c.follow.len() {
			c.tail++
			return c.tail - 1, true
		}
		return 0, false
	}
	var k int
	if c.desc {
		c.hi--
		k = c.hi
	} else {
		k = c.lo
		c.lo++
	}
	if c.all {
		return k, true
	}
	return c.list[k], true
}

// exhausted reports whether next would return false.
func (c *memCursor) exhausted() bool {
	return c.lo >= c.hi && (c.follow == nil || c.tail >= c.follow.len())
}

// queryCursorLocked returns a cursor over the record indices in [lo, hi) that
// may match q: from the tag and type indexes when every item names a tag or a
// type, else every index. Callers still filter with q.Matches.
func (m *Journal) queryCursorLocked(q journal.Query, lo, hi int, desc bool) memCursor {
	list, indexed := m.candidatesLocked(q, lo, hi)
	if !indexed {
		return memCursor{all: true, lo: lo, hi: hi, desc: desc}
	}
	return memCursor{list: list, lo: sort.SearchInts(list, lo), hi: sort.SearchInts(list, hi), desc: desc}
}

// candidatesLocked returns the ascending record indices in [lo, hi) that may
// match q, and false when no index applies (q.All). Only the part of each index list inside [lo, hi) is merged, so the cost of a
// condition check or a read from a recent position does not grow with history.
func (m *Journal) candidatesLocked(q journal.Query, lo, hi int) ([]int, bool) {
	window := func(l []int) []int {
		return l[sort.SearchInts(l, lo):sort.SearchInts(l, hi)]
	}
	if q.All {
		return nil, false
	}
	partition := q.PartitionOrDefault()
	var lists [][]int
	for _, it := range q.Items {
		if len(it.Tags) > 0 {
			// Every tag must be present: the shortest stream bounds the matches.
			var best []int
			for k, t := range it.Tags {
				s := m.streams[journal.StreamID{Partition: partition, Tag: t}]
				if s == nil {
					best = nil
					break
				}
				if k == 0 || len(s.records) < len(best) {
					best = s.records
				}
			}
			if best = window(best); len(best) > 0 {
				lists = append(lists, best)
			}
			continue
		}
		for _, ty := range it.Types {
			if l := window(m.byType[ty]); len(l) > 0 {
				lists = append(lists, l)
			}
		}
	}
	return unionSorted(lists), true
}

// unionSorted merges ascending index lists into one without duplicates. A
// single list is returned as is (callers only read it).
func unionSorted(lists [][]int) []int {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]int, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func cloneRecord(r *journal.Record) journal.Record {
	c := *r
	c.Tags = slices.Clone(r.Tags)
	c.Data = slices.Clone(r.Data)
	c.Links = slices.Clone(r.Links)
	c.Metadata.Scopes = slices.Clone(r.Metadata.Scopes)
	return c
}

// copyPage appends to page copies of src, the records of one page. Each
// copy's Data and Links are its own ranges of two arrays the page shares
// (one allocation each for the page instead of one per record), capped so
// that an append to one copies it; consecutive records with equal tags share
// one copy of them, as the Postgres journal's records do.
func copyPage(page []journal.Record, src []*journal.Record) []journal.Record {
	var nData, nLinks int
	for _, r := range src {
		nData += len(r.Data)
		nLinks += len(r.Links)
	}
	data := make([]byte, 0, nData)
	links := make([]journal.StreamLink, 0, nLinks)
	var tags []journal.Tag
	for _, r := range src {
		c := *r
		if r.Data != nil {
			s := len(data)
			data = append(data, r.Data...)
			c.Data = data[s:len(data):len(data)]
		}
		if r.Links != nil {
			s := len(links)
			links = append(links, r.Links...)
			c.Links = links[s:len(links):len(links)]
		}
		switch {
		case len(r.Tags) == 0:
			c.Tags = slices.Clone(r.Tags)
		default:
			if !slices.Equal(tags, r.Tags) {
				tags = slices.Clone(r.Tags)
			}
			c.Tags = tags[:len(tags):len(tags)]
		}
		c.Metadata.Scopes = slices.Clone(r.Metadata.Scopes)
		page = append(page, c)
	}
	return page
}

// read yields copies of the records that the cursor from open (called once,
// under the lock) visits and keep (nil: all) accepts, at most limit of them
// (0: no limit). It copies a page at a time under the lock (copyPage) and
// yields with the lock released. It ends when the cursor is exhausted, unless the cursor
// follows the record log: then it waits for the next commit and goes on, until
// ctx ends, the journal closes or the consumer stops.
func (m *Journal) read(ctx context.Context, open func() (memCursor, error), keep func(*journal.Record) bool, limit int) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		var (
			cur    memCursor
			opened bool
			n      int
			page   []journal.Record
			src    []*journal.Record
		)
		for {
			if err := m.lock(ctx); err != nil {
				yield(journal.Record{}, err)
				return
			}
			if !opened {
				var err error
				if cur, err = open(); err != nil {
					m.mu.Unlock()
					yield(journal.Record{}, err)
					return
				}
				opened = true
			}
			src = src[:0]
			for budget := memScanBudget; budget > 0 && len(src) < memPageSize && (limit == 0 || n < limit); budget-- {
				idx, ok := cur.next()
				if !ok {
					break
				}
				r := m.records.at(idx)
				if keep != nil && !keep(r) {
					continue
				}
				src = append(src, r)
				n++
			}
			page = copyPage(page[:0], src)
			finished := cur.exhausted() || (limit > 0 && n >= limit)
			follow := cur.follow != nil
			var wake, done chan struct{}
			if finished && follow {
				// Taken under the lock that saw the cursor exhausted: any
				// later commit closes wake.
				wake, done = m.appended, m.done
				m.appendWatched = true
			}
			m.mu.Unlock()
			for _, r := range page {
				if err := ctx.Err(); err != nil {
					yield(journal.Record{}, err)
					return
				}
				if !yield(r, nil) {
					return
				}
			}
			if finished {
				if !follow {
					return
				}
				select {
				case <-wake:
				case <-done: // the next lock reports journal.ErrStoreNotOpen
				case <-ctx.Done(): // the next lock reports ctx.Err()
				}
			}
		}
	}
}

func yieldErr(err error) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) { yield(journal.Record{}, err) }
}

// ReadStream implements Reader. A fromVersion of 0 reads from version 1.
func (m *Journal) ReadStream(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	stream = stream.Normalize()
	if stream.Tag == "" {
		return yieldErr(fmt.Errorf("%w: ReadStream: the stream's tag is empty; name the stream to read", journal.ErrInvalidQuery))
	}
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadStream: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	if fromVersion == 0 {
		fromVersion = 1
	}
	return m.read(ctx, func() (memCursor, error) {
		s := m.streams[stream]
		if s == nil || fromVersion > uint64(len(s.records)) {
			return memCursor{}, nil
		}
		return memCursor{list: s.records, lo: int(fromVersion - 1), hi: len(s.records)}, nil
	}, nil, limit)
}

// Read implements Reader.
func (m *Journal) Read(ctx context.Context, q journal.Query, opts journal.ReadOptions) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	if opts.Limit < 0 {
		return yieldErr(fmt.Errorf("%w: read limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, opts.Limit))
	}
	return m.read(ctx, func() (memCursor, error) {
		lo, hi := 0, m.records.len()
		switch {
		case !opts.Backwards:
			lo = m.firstFromLocked(opts.From)
		case !opts.From.IsZero():
			hi = m.firstAfterLocked(opts.From)
		}
		return m.queryCursorLocked(q, lo, hi, opts.Backwards), nil
	}, q.Matches, opts.Limit)
}

// ReadAll implements Reader.
func (m *Journal) ReadAll(ctx context.Context, after journal.Position, limit int) iter.Seq2[journal.Record, error] {
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadAll: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	return m.read(ctx, func() (memCursor, error) {
		return memCursor{all: true, lo: m.firstAfterLocked(after), hi: m.records.len()}, nil
	}, nil, limit)
}

// ReadEvent implements Reader.
func (m *Journal) ReadEvent(ctx context.Context, id uuid.UUID) (journal.Record, error) {
	if err := m.lock(ctx); err != nil {
		return journal.Record{}, err
	}
	defer m.mu.Unlock()
	idx, ok := m.byID[id]
	if !ok {
		return journal.Record{}, fmt.Errorf("%w: no event with ID %s", journal.ErrNotFound, id)
	}
	return cloneRecord(m.records.at(idx)), nil
}

// Head implements Reader.
func (m *Journal) Head(ctx context.Context) (journal.Position, error) {
	if err := m.lock(ctx); err != nil {
		return journal.Position{}, err
	}
	defer m.mu.Unlock()
	if m.records.len() == 0 {
		return journal.Position{}, nil
	}
	return m.records.at(m.records.len() - 1).Position, nil
}

// ReadByCorrelation implements Reader. An empty correlation ID yields ErrInvalidQuery.
func (m *Journal) ReadByCorrelation(ctx context.Context, correlationID string) iter.Seq2[journal.Record, error] {
	if correlationID == "" {
		return yieldErr(fmt.Errorf("%w: ReadByCorrelation: the correlation ID is empty; pass the ID to look up", journal.ErrInvalidQuery))
	}
	return m.read(ctx, func() (memCursor, error) {
		l := m.byCorrelation[correlationID]
		return memCursor{list: l, hi: len(l)}, nil
	}, nil, 0)
}

// ReadTypes implements Reader.
func (m *Journal) ReadTypes(ctx context.Context, q journal.TypeQuery) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	q.Types = slices.Clone(q.Types)
	return m.read(ctx, func() (memCursor, error) {
		lists := make([][]int, 0, len(q.Types))
		for _, ty := range q.Types {
			lists = append(lists, m.byType[ty])
		}
		l := unionSorted(lists)
		cur := memCursor{list: l, hi: len(l), desc: q.Descending}
		if !q.Cursor.IsZero() {
			// l is in position order: the first slot after the cursor.
			k := sort.Search(len(l), func(i int) bool { return m.records.at(l[i]).Position.After(q.Cursor) })
			if q.Descending {
				// Slots before the cursor: those before k, minus the cursor itself.
				hi := k
				if hi > 0 && m.records.at(l[hi-1]).Position == q.Cursor {
					hi--
				}
				cur.hi = hi
			} else {
				cur.lo = k
			}
		}
		return cur, nil
	}, func(r *journal.Record) bool { return inRange(q, r.RecordedAt) }, q.Limit)
}

// Subscribe implements Subscriber. It starts no goroutine: the consumer's own
// goroutine waits for new commits. The records that exist when it starts are
// found through the tag and type indexes where q allows; every later record
// is examined in position order.
func (m *Journal) Subscribe(ctx context.Context, q journal.Query, after journal.Position) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	return m.read(ctx, func() (memCursor, error) {
		start := m.firstAfterLocked(after)
		cur := m.queryCursorLocked(q, start, m.records.len(), false)
		if cur.all {
			// No index applies: following the log covers everything.
			return memCursor{follow: &m.records, tail: start}, nil
		}
		cur.follow, cur.tail = &m.records, m.records.len()
		return cur, nil
	}, q.Matches, 0)
}

// inRange reports whether t is in q's time range [From, To), an unset bound
// being open.
func inRange(q journal.TypeQuery, t time.Time) bool {
	return (q.From.IsZero() || !t.Before(q.From)) && (q.To.IsZero() || t.Before(q.To))
}

// SubscribeSlices implements journal.SliceSubscriber: it follows the record
// log from after, keeping the records q selects. Like Subscribe it starts no
// goroutine.
func (m *Journal) SubscribeSlices(ctx context.Context, q journal.SliceQuery, after journal.Position) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	q.Slices, q.Types = slices.Clone(q.Slices), slices.Clone(q.Types)
	return m.read(ctx, func() (memCursor, error) {
		return memCursor{follow: &m.records, tail: m.firstAfterLocked(after)}, nil
	}, q.Matches, 0)
}

// ReadSlices implements journal.SliceSubscriber.
func (m *Journal) ReadSlices(ctx context.Context, q journal.SliceQuery, after journal.Position, limit int) iter.Seq2[journal.Record, error] {
	if err := q.Validate(); err != nil {
		return yieldErr(err)
	}
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadSlices: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	q.Slices, q.Types = slices.Clone(q.Slices), slices.Clone(q.Types)
	return m.read(ctx, func() (memCursor, error) {
		return memCursor{all: true, lo: m.firstAfterLocked(after), hi: m.records.len()}, nil
	}, q.Matches, limit)
}
