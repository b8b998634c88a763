package backend

import "github.com/scribe-es/scribe/journal"

// LinkRecord fills r.Links: one link per chain tag (journal.ChainTags), in the
// order of r.Tags, or one link to the untagged chain of r's type when r has no
// tags. heads reports a chain's current head, its version and hash before r (0
// and the zero Hash for an empty chain); r becomes version+1 of that chain,
// and its link's Hash is journal.ChainHash(head, journal.CanonicalBytes(r)).
// All other fields of r, including RecordedAt, must be final: the hash covers
// them.
func LinkRecord(r *journal.Record, heads func(journal.Tag) (version uint64, head journal.Hash)) {
	canonical := journal.CanonicalBytes(r)
	tags := journal.ChainTags(&r.Event)
	links := make([]journal.StreamLink, 0, len(tags))
	for _, t := range tags {
		v, head := heads(t)
		links = append(links, journal.StreamLink{Tag: t, Version: v + 1, PrevHash: head, Hash: journal.ChainHash(head, canonical)})
	}
	r.Links = links
}
