package evidence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// ParseCanonical decodes bytes written by journal.CanonicalBytes (format
// "scribe.event.v1") back into the record they encode: ID, type, schema
// version, tags, data, metadata and recorded-at (no position or links:
// the encoding holds none). It succeeds only when encoding the result
// again gives exactly b, so what it returns is what a hash over b covers.
func ParseCanonical(b []byte) (journal.Record, error) {
	p := canonicalParser{b: b}
	var r journal.Record
	if dom := p.str(); dom != "scribe.event.v1" {
		if p.err == nil {
			p.err = fmt.Errorf("the encoding is %q, not scribe.event.v1", dom)
		}
		return r, p.err
	}
	copy(r.ID[:], p.take(16))
	r.Type = p.str()
	r.SchemaVersion = int(int64(p.u64()))
	for _, t := range p.list() {
		r.Tags = append(r.Tags, journal.Tag(t))
	}
	r.Data = []byte(p.str())
	md := &r.Metadata
	md.CorrelationID, md.CausationID, md.UserID, md.IdempotencyKey = p.str(), p.str(), p.str(), p.str()
	md.Scopes = p.list()
	md.Partition = p.str()
	md.CreatedAt = p.time()
	md.TraceParent, md.TraceState = p.str(), p.str()
	if p.err == nil && len(p.b) > 0 && !(p.b[0] == 1 || len(p.b) == 1) {
		if p.str() != "commandHash" && p.err == nil {
			p.err = errors.New("an unknown optional field")
		}
		md.CommandHash = p.str()
	}
	r.RecordedAt = p.time()
	if p.err != nil {
		return journal.Record{}, p.err
	}
	if len(p.b) > 0 {
		return journal.Record{}, fmt.Errorf("%d bytes follow the encoding", len(p.b))
	}
	if !bytes.Equal(journal.CanonicalBytes(&r), b) {
		return journal.Record{}, errors.New("the bytes are not in canonical form")
	}
	return r, nil
}

type canonicalParser struct {
	b   []byte
	err error
}

func (p *canonicalParser) take(n uint64) []byte {
	if p.err != nil {
		return nil
	}
	if uint64(len(p.b)) < n {
		p.err = errors.New("the encoding ends early")
		return nil
	}
	out := p.b[:n]
	p.b = p.b[n:]
	return out
}

func (p *canonicalParser) u64() uint64 {
	b := p.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (p *canonicalParser) str() string { return string(p.take(p.u64())) }

func (p *canonicalParser) list() []string {
	n := p.u64()
	if n > uint64(len(p.b))/8 {
		if p.err == nil {
			p.err = errors.New("a list longer than the encoding")
		}
		return nil
	}
	var out []string
	for range n {
		out = append(out, p.str())
	}
	return out
}

func (p *canonicalParser) time() time.Time {
	b := p.take(1)
	if b == nil || b[0] == 0 {
		return time.Time{}
	}
	return time.UnixMicro(int64(p.u64())).UTC()
}
