package backend

import (
	"encoding/binary"

	"github.com/scribe-es/scribe/journal"
	"time"
)

// CanonicalContent returns journal.CanonicalBytes(r) without its closing
// RecordedAt field, so a backend can build the bulk of the encoding before
// the record's time is known (for example outside a lock) and finish it with
// SealCanonical. SealCanonical(CanonicalContent(r), r.RecordedAt) equals
// journal.CanonicalBytes(r).
func CanonicalContent(r *journal.Record) []byte {
	c := *r
	c.RecordedAt = time.Time{}
	b := journal.CanonicalBytes(&c) // ends with the one-byte encoding of a zero time
	return b[:len(b)-1]
}

// SealCanonical appends the encoding of the record time t to content (as
// returned by CanonicalContent) and returns the record's canonical bytes. It
// may reuse content's array.
func SealCanonical(content []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(content, 0)
	}
	content = append(content, 1)
	return binary.BigEndian.AppendUint64(content, uint64(t.UTC().Truncate(time.Microsecond).UnixMicro()))
}

// LinkCanonical fills r.Links as LinkRecord does, for a record whose canonical
// bytes are already known: canonical must equal journal.CanonicalBytes(r). It
// reuses r.Links' array when that has room for every chain tag.
func LinkCanonical(r *journal.Record, canonical []byte, heads func(journal.Tag) (version uint64, head journal.Hash)) {
	links := r.Links[:0]
	for _, t := range journal.ChainTags(&r.Event) {
		v, head := heads(t)
		links = append(links, journal.StreamLink{Tag: t, Version: v + 1, PrevHash: head, Hash: journal.ChainHash(head, canonical)})
	}
	r.Links = links
}
