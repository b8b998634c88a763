package evidence

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// ProofFormat is the version of the inclusion proof format.
const ProofFormat = "scribe.proof.v1"

// ErrNotCovered: the event is not in the checkpoint (newer than it, or in
// no stream it covers).
var ErrNotCovered = errors.New("evidence: the event is not covered by the checkpoint")

// Proof shows that one event belongs to a signed checkpoint, without the
// rest of the journal: the event's canonical bytes and previous hash give
// its chain hash; its leaf and EventPath give its stream's root; the
// stream's entry and StreamPath give the checkpoint's root, which the
// signature covers. Its JSON form is the one `scribe proof` prints.
type Proof struct {
	Format     string      `json:"format"`
	Event      ProofEvent  `json:"event"`
	EventPath  AuditPath   `json:"eventPath"`
	Stream     ProofStream `json:"stream"`
	StreamPath AuditPath   `json:"streamPath"`
	Checkpoint Signed      `json:"checkpoint"`
}

// ProofEvent is the proven event: its ID, the stream and version the proof
// places it at, the chain hash of the version before (zero for version 1),
// and its canonical bytes (journal.CanonicalBytes, base64 in JSON): the
// exact bytes its hash covers, from which Verify decodes the event.
type ProofEvent struct {
	ID        uuid.UUID   `json:"id"`
	Partition string      `json:"partition"`
	Tag       journal.Tag `json:"tag"`
	Version   uint64      `json:"version"`
	PrevHash  hexHash     `json:"prevHash"`
	Canonical []byte      `json:"canonical"`
}

// AuditPath is a leaf's place in a tree (0-based Index among Size leaves)
// and its audit path (RFC 9162 section 2.1.3), nearest sibling first.
type AuditPath struct {
	Index  uint64    `json:"index"`
	Size   uint64    `json:"size"`
	Hashes []hexHash `json:"hashes"`
}

// ProofStream is the stream's entry in the checkpoint (StreamHead), hashes
// in hex.
type ProofStream struct {
	Partition string      `json:"partition"`
	Tag       journal.Tag `json:"tag"`
	Version   uint64      `json:"version"`
	Head      hexHash     `json:"head"`
	Root      hexHash     `json:"root"`
}

func (s ProofStream) head() StreamHead {
	return StreamHead{Partition: s.Partition, Tag: s.Tag, Version: s.Version, Head: journal.Hash(s.Head), Root: journal.Hash(s.Root)}
}

// Prove builds the proof that r, as the journal holds it now, is the event
// at its version of stream tag (in r's partition) in c; tag "" picks r's
// first chain tag (journal.ChainTags). It fails with ErrNotCovered when c
// does not cover that version. It does not check that r still is what c
// holds: Check does (a proof of an altered event does not hold).
func Prove(c *Checkpoint, r journal.Record, tag journal.Tag) (*Proof, error) {
	if tag == "" {
		tag = journal.ChainTags(&r.Event)[0]
	}
	var link *journal.StreamLink
	for i := range r.Links {
		if r.Links[i].Tag == tag {
			link = &r.Links[i]
		}
	}
	if link == nil {
		return nil, fmt.Errorf("%w: event %s is not in stream %s", ErrNotCovered, r.ID, tag)
	}
	stream := journal.StreamID{Partition: r.Partition(), Tag: tag}
	si := c.Find(stream)
	if si < 0 {
		return nil, fmt.Errorf("%w: the checkpoint of %s holds no stream %s (made before its first event?)", ErrNotCovered, c.MadeAt.UTC().Format(timeLayout), stream)
	}
	s := &c.Streams[si]
	if link.Version > s.Version {
		return nil, fmt.Errorf("%w: event %s is version %d of %s, the checkpoint of %s covers versions 1 to %d; prove it against a newer checkpoint",
			ErrNotCovered, r.ID, link.Version, stream, c.MadeAt.UTC().Format(timeLayout), s.Version)
	}
	eventPath, err := MerklePath(s.leafHashes(), int(link.Version-1))
	if err != nil {
		return nil, err
	}
	streamLeaves := make([]journal.Hash, len(c.Streams))
	for i := range c.Streams {
		streamLeaves[i] = StreamLeaf(c.Streams[i].StreamHead)
	}
	streamPath, err := MerklePath(streamLeaves, si)
	if err != nil {
		return nil, err
	}
	return &Proof{
		Format:     ProofFormat,
		Event:      ProofEvent{ID: r.ID, Partition: stream.Partition, Tag: tag, Version: link.Version, PrevHash: hexHash(link.PrevHash), Canonical: journal.CanonicalBytes(&r)},
		EventPath:  AuditPath{Index: link.Version - 1, Size: s.Version, Hashes: hexes(eventPath)},
		Stream:     ProofStream{Partition: s.Partition, Tag: s.Tag, Version: s.Version, Head: hexHash(s.Head), Root: hexHash(s.Root)},
		StreamPath: AuditPath{Index: uint64(si), Size: uint64(len(c.Streams)), Hashes: hexes(streamPath)},
		Checkpoint: c.Signed,
	}, nil
}

// Proven is what a proof that holds shows: the event as its canonical bytes
// encode it, its place, and the signed checkpoint that holds it.
type Proven struct {
	Record     journal.Record // ID, type, schema version, tags, data, metadata, recorded-at
	Stream     journal.StreamID
	Version    uint64
	Hash       journal.Hash
	Checkpoint Signed
}

// Verify checks the proof offline with the signer's public key: Check,
// then the checkpoint's signature (ErrWrongKey, ErrBadSignature).
func (p *Proof) Verify(pub ed25519.PublicKey) (Proven, error) {
	out, err := p.Check()
	if err != nil {
		return Proven{}, err
	}
	if err := p.Checkpoint.Verify(pub); err != nil {
		return Proven{}, err
	}
	return out, nil
}

// Check checks everything but the signature: the canonical bytes decode
// to an event with the proof's ID, partition and chain tag; its chain hash
// (over the previous hash and those bytes) and its audit path lead to the
// stream's root; the stream's entry and its path lead to the checkpoint's
// root. A failure wraps ErrProof (or ErrFormat) and says which step failed.
func (p *Proof) Check() (Proven, error) {
	if p.Format != ProofFormat {
		return Proven{}, fmt.Errorf("%w: the proof's format is %q; this scribe reads %q", ErrFormat, p.Format, ProofFormat)
	}
	fail := func(format string, args ...any) (Proven, error) {
		return Proven{}, fmt.Errorf("%w: "+format, append([]any{ErrProof}, args...)...)
	}
	rec, err := ParseCanonical(p.Event.Canonical)
	if err != nil {
		return fail("the event's canonical bytes: %v", err)
	}
	ev := p.Event
	stream := journal.StreamID{Partition: ev.Partition, Tag: ev.Tag}
	switch {
	case rec.ID != ev.ID:
		return fail("the canonical bytes are of event %s, the proof names event %s", rec.ID, ev.ID)
	case rec.Partition() != ev.Partition:
		return fail("event %s is in partition %q, the proof places it in %q", ev.ID, rec.Partition(), ev.Partition)
	case !hasChainTag(&rec.Event, ev.Tag):
		return fail("event %s is in no chain %q", ev.ID, ev.Tag)
	case ev.Version == 0 || p.EventPath.Index != ev.Version-1:
		return fail("the event's version %d is not its tree index %d plus one", ev.Version, p.EventPath.Index)
	case ev.Version == 1 && journal.Hash(ev.PrevHash) != journal.Hash{}:
		return fail("the event is version 1, whose previous hash is zero, the proof gives %s", journal.Hash(ev.PrevHash))
	case p.Stream.Partition != ev.Partition || p.Stream.Tag != ev.Tag:
		return fail("the proof's stream %s/%s is not the event's %s", p.Stream.Partition, p.Stream.Tag, stream)
	case p.EventPath.Size != p.Stream.Version:
		return fail("the event's tree has %d leaves, the stream's version is %d", p.EventPath.Size, p.Stream.Version)
	case p.StreamPath.Size != p.Checkpoint.Streams:
		return fail("the streams' tree has %d leaves, the checkpoint counts %d streams", p.StreamPath.Size, p.Checkpoint.Streams)
	}
	hash := journal.ChainHash(journal.Hash(ev.PrevHash), ev.Canonical)
	if ev.Version == p.Stream.Version && hash != journal.Hash(p.Stream.Head) {
		return fail("event %s is the stream's checkpointed head, but its hash %s is not the head %s: the event differs from the one checkpointed", ev.ID, short(hash), short(journal.Hash(p.Stream.Head)))
	}
	root, err := RootFromPath(EventLeaf(ev.ID, hash), p.EventPath.Index, p.EventPath.Size, hashes(p.EventPath.Hashes))
	if err != nil {
		return fail("event path: %v", err)
	}
	if root != journal.Hash(p.Stream.Root) {
		return fail("event %s (hash %s) and its path lead to root %s, not the stream's root %s in the checkpoint: the event differs from the one checkpointed",
			ev.ID, short(hash), short(root), short(journal.Hash(p.Stream.Root)))
	}
	top, err := RootFromPath(StreamLeaf(p.Stream.head()), p.StreamPath.Index, p.StreamPath.Size, hashes(p.StreamPath.Hashes))
	if err != nil {
		return fail("stream path: %v", err)
	}
	if top != p.Checkpoint.Root {
		return fail("stream %s and its path lead to root %s, not the checkpoint's root %s", stream, short(top), short(p.Checkpoint.Root))
	}
	return Proven{Record: rec, Stream: stream, Version: ev.Version, Hash: hash, Checkpoint: p.Checkpoint}, nil
}

func hasChainTag(e *journal.Event, tag journal.Tag) bool {
	for _, t := range journal.ChainTags(e) {
		if t == tag {
			return true
		}
	}
	return false
}

func hexes(hs []journal.Hash) []hexHash {
	out := make([]hexHash, len(hs))
	for i, h := range hs {
		out[i] = hexHash(h)
	}
	return out
}

func hashes(hs []hexHash) []journal.Hash {
	out := make([]journal.Hash, len(hs))
	for i, h := range hs {
		out[i] = journal.Hash(h)
	}
	return out
}
