package tagconsistency

import (
	"container/list"
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
