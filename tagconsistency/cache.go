package tagconsistency

import (
	"container/list"
	"slices"
	"strings"
	"sync"

	"github.com/scribe-es/scribe/journal"
)

// DefaultFoldCacheSize is the default of Config.FoldCacheSize.
const DefaultFoldCacheSize = 4096

// foldCache keeps the folded state of recent command queries, so that the next
// command with the same name and query folds only the events appended since.
//
// An entry is taken out (removed) by the command that uses it and put back,
// advanced, only after that command finished cleanly; any failure drops it.
// Commands with the same query reserve the same tags, so at most one command
// holds an entry at a time and no state is ever shared between goroutines.
type foldCache struct {
	max int

	mu      sync.Mutex
	entries map[string]*list.Element
	lru     list.List // of *foldEntry, most recent at the front
}

type foldEntry struct {
	key   string
	state any
	after journal.Position // every matching event up to and including after is folded
	// versions are the reserved streams' versions the state includes.
	versions map[journal.Tag]uint64
}

func newFoldCache(max int) *foldCache {
	if max <= 0 {
		return nil
	}
	return &foldCache{max: max, entries: make(map[string]*list.Element)}
}

// foldKey identifies a command's fold: its name and its query, canonically.
func foldKey(command string, q journal.Query) string {
	var b strings.Builder
	b.WriteString(command)
	b.WriteByte(0)
	b.WriteString(q.PartitionOrDefault())
	for _, it := range q.Items {
		b.WriteByte(1)
		for _, t := range it.Types {
			b.WriteString(t)
			b.WriteByte(2)
		}
		b.WriteByte(3)
		for _, t := range it.Tags {
			b.WriteString(string(t))
			b.WriteByte(2)
		}
	}
	return b.String()
}

// take removes and returns the entry for key.
func (c *foldCache) take(key string) (foldEntry, bool) {
	if c == nil {
		return foldEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return foldEntry{}, false
	}
	delete(c.entries, key)
	c.lru.Remove(el)
	return *el.Value.(*foldEntry), true
}

// put stores an entry, evicting the least recently used beyond the bound.
func (c *foldCache) put(e foldEntry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		c.lru.Remove(el)
	}
	c.entries[e.key] = c.lru.PushFront(&e)
	for c.lru.Len() > c.max {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.entries, last.Value.(*foldEntry).key)
	}
}

// dropPartition removes the entries of queries in partition: their positions
// may be another database's after the partition moved.
func (c *foldCache) dropPartition(partition string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, el := range c.entries {
		if keyPartition(key) == partition {
			c.lru.Remove(el)
			delete(c.entries, key)
		}
	}
}

// keyPartition returns the partition of a foldKey.
func keyPartition(key string) string {
	_, rest, _ := strings.Cut(key, "\x00")
	p, _, _ := strings.Cut(rest, "\x01")
	return p
}

// Bounds of the tail cache.
const (
	tailRecords = 64   // newest records kept per stream (at least; up to twice as many)
	tailStreams = 1024 // streams kept (least recently used evicted)
)

// tailCache keeps the newest records of recently used streams: the records a
// command appended and the records folds read. A fold that needs a stream's
// records after some version takes them from here when they are all present,
// instead of reading the journal; stored records never change, so a cached
// record is always exact. Safe for concurrent use.
type tailCache struct {
	mu      sync.Mutex
	streams map[journal.StreamID]*list.Element // of *streamTail
	lru     list.List
}

type streamTail struct {
	stream  journal.StreamID
	records []journal.Record // consecutive versions, ascending
}

func newTailCache(enabled bool) *tailCache {
	if !enabled {
		return nil
	}
	return &tailCache{streams: make(map[journal.StreamID]*list.Element)}
}

func (t *streamTail) first() uint64 { return t.records[0].Version(t.stream.Tag) }
func (t *streamTail) last() uint64  { return t.records[len(t.records)-1].Version(t.stream.Tag) }

// get returns the stream's records with versions in (from, to], in order, or
// false when the cache does not hold every one of them.
func (c *tailCache) get(stream journal.StreamID, from, to uint64) ([]journal.Record, bool) {
	if c == nil || to <= from {
		return nil, c != nil && to == from
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.streams[stream]
	if !ok {
		return nil, false
	}
	t := el.Value.(*streamTail)
	if t.first() > from+1 || t.last() < to {
		return nil, false
	}
	c.lru.MoveToFront(el)
	lo := int(from + 1 - t.first())
	hi := int(to + 1 - t.first())
	return slices.Clone(t.records[lo:hi]), true
}

// dropPartition forgets the tails of partition's streams: after the partition
// moved to another database its records have other positions there.
func (c *tailCache) dropPartition(partition string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for stream, el := range c.streams {
		if stream.Partition == partition {
			c.lru.Remove(el)
			delete(c.streams, stream)
		}
	}
}

// add stores records of the stream (consecutive versions, ascending): they
// extend the cached tail when they continue or overlap it, and replace it
// otherwise.
func (c *tailCache) add(stream journal.StreamID, records []journal.Record) {
	if c == nil || len(records) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.streams[stream]
	if !ok {
		el = c.lru.PushFront(&streamTail{stream: stream})
		c.streams[stream] = el
		for c.lru.Len() > tailStreams {
			last := c.lru.Back()
			c.lru.Remove(last)
			delete(c.streams, last.Value.(*streamTail).stream)
		}
	} else {
		c.lru.MoveToFront(el)
	}
	t := el.Value.(*streamTail)
	first := records[0].Version(stream.Tag)
	switch {
	case len(t.records) == 0 || first > t.last()+1 || first < t.first():
		t.records = slices.Clone(records)
	default:
		for _, r := range records {
			if r.Version(stream.Tag) == t.last()+1 {
				t.records = append(t.records, r)
			}
		}
	}
	// Trimmed in bulk: once a tail holds twice tailRecords, it keeps the
	// newest tailRecords (a copy per add of a full tail cost a stream's
	// whole tail per command, most of the bank's garbage).
	if n := len(t.records); n >= 2*tailRecords {
		t.records = slices.Clone(t.records[n-tailRecords:])
	}
}
