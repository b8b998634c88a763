package journal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"time"
)

// canonicalDomain opens every canonical encoding, so that the bytes of an event
// can never be mistaken for those of another format or a later version of this one.
const canonicalDomain = "scribe.event.v1"

// CanonicalBytes returns the bytes an event's hash covers. Every backend computes
// the same bytes for the same record, so chains verify across backends.
//
// The encoding (version "scribe.event.v1") is a sequence of fields, each of a
// fixed width or length-prefixed, so no two different records encode alike:
//
//	str(s)   = uint64 big-endian byte length of s, then the bytes of s
//	time(t)  = 0x00 if t is zero, else 0x01 then int64 big-endian t.UnixMicro()
//	           (t in UTC, truncated to microseconds)
//	list(xs) = uint64 big-endian count, then str(x) for each x in order
//
//	str("scribe.event.v1")
//	ID                16 raw bytes
//	str(Type)
//	SchemaVersion     int64 big-endian
//	list(Tags)        in the record's (sorted) order
//	str(Data)         the stored, compacted JSON bytes
//	str(Metadata.CorrelationID) str(Metadata.CausationID) str(Metadata.UserID)
//	str(Metadata.IdempotencyKey) list(Metadata.Scopes)
//	str(partition)    Metadata.Partition, "" read as DefaultPartition
//	time(Metadata.CreatedAt)
//	str(Metadata.TraceParent) str(Metadata.TraceState)
//	str("commandHash") str(Metadata.CommandHash)   only when CommandHash is set
//	time(RecordedAt)
//
// (The optional part starts with a zero byte, time(RecordedAt) of a stored
// record with 0x01, so records without a CommandHash hash as they always did.)
//
// Position and Links are not covered: the hash is what the links are made of.
func CanonicalBytes(r *Record) []byte {
	return appendTime(canonicalContent(r), r.RecordedAt)
}

// canonicalContent returns CanonicalBytes(r) without the closing
// time(RecordedAt), with room to append it in place (appendTime), so the bulk
// of the encoding can be built before the record's time is known.
func canonicalContent(r *Record) []byte {
	md := &r.Metadata
	partition := partitionOrDefault(md.Partition)
	// Exact size: 12 length or count prefixes of 8 bytes, the 16-byte ID, the
	// 8-byte schema version, two times of at most 9 bytes, the bytes themselves,
	// and a prefix per tag and per scope.
	n := 12*8 + 16 + 8 + 2*9 + len(canonicalDomain) + len(r.Type) + len(r.Data) +
		len(md.CorrelationID) + len(md.CausationID) + len(md.UserID) + len(md.IdempotencyKey) +
		len(partition) + len(md.TraceParent) + len(md.TraceState) + 16 + len("commandHash") + len(md.CommandHash)
	for _, t := range r.Tags {
		n += 8 + len(t)
	}
	for _, s := range md.Scopes {
		n += 8 + len(s)
	}
	b := make([]byte, 0, n)
	b = appendStr(b, canonicalDomain)
	b = append(b, r.ID[:]...)
	b = appendStr(b, r.Type)
	b = binary.BigEndian.AppendUint64(b, uint64(int64(r.SchemaVersion)))
	b = binary.BigEndian.AppendUint64(b, uint64(len(r.Tags)))
	for _, t := range r.Tags {
		b = appendStr(b, string(t))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(r.Data)))
	b = append(b, r.Data...)
	b = appendStr(b, md.CorrelationID)
	b = appendStr(b, md.CausationID)
	b = appendStr(b, md.UserID)
	b = appendStr(b, md.IdempotencyKey)
	b = binary.BigEndian.AppendUint64(b, uint64(len(md.Scopes)))
	for _, s := range md.Scopes {
		b = appendStr(b, s)
	}
	b = appendStr(b, partition)
	b = appendTime(b, md.CreatedAt)
	b = appendStr(b, md.TraceParent)
	b = appendStr(b, md.TraceState)
	if md.CommandHash != "" {
		b = appendStr(b, "commandHash")
		b = appendStr(b, md.CommandHash)
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.BigEndian.AppendUint64(b, uint64(t.UTC().Truncate(time.Microsecond).UnixMicro()))
}

// ChainHash returns SHA-256 over prev || canonical: the hash of an event whose
// canonical bytes are canonical and whose stream's previous hash is prev (the
// zero Hash for a stream's first event).
func ChainHash(prev Hash, canonical []byte) Hash {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(canonical)
	var out Hash
	h.Sum(out[:0])
	return out
}

// VerifyStream walks stream through rd from its checkpoint and checks that
// versions run on without gaps, that each link's PrevHash equals the previous
// event's Hash, and that each Hash equals ChainHash(PrevHash,
// CanonicalBytes(record)). So an altered event (type, schema version, tags,
// data, metadata or recorded-at), a removed or inserted event and re-ordered
// events all break the chain.
//
// When rd also implements Inspector (every Journal does), VerifyStream first
// reads the stream's TagSummary. Its Cut is the checkpoint: the walk starts at
// version Cut.Version+1 with Cut.Hash as the previous hash (version 1 and the
// zero Hash when nothing is archived; VerifyArchive checks the archived part).
// It checks that the stream's events reach the recorded Version and that the
// event at that version carries the recorded HeadHash (the checkpoint's hash
// when the stream is archived whole): a stream whose newest events were
// removed (truncated) fails too. Events appended after the summary was read
// are verified as chain links; a cut that moves while the walk starts is
// followed (the walk starts again from the new checkpoint).
//
// When rd implements IndexedStreamReader, the walk reads through the tag
// index (ReadStreamThroughIndex): a stream whose index and events disagree
// (an index row re-pointed at another event) breaks the chain too.
//
// It returns the number of hot events verified; at the first broken link it
// stops with a *ChainError naming the version and position. A read failure is
// returned as is. An empty or unknown stream verifies with 0 events.
func VerifyStream(ctx context.Context, rd Reader, stream StreamID) (uint64, error) {
	for attempt := 0; ; attempt++ {
		n, err := verifyStream(ctx, rd, stream.Normalize())
		if err != nil && isArchived(err) && attempt < 3 {
			continue // archived between the summary and the read: read the new cut
		}
		return n, err
	}
}

func verifyStream(ctx context.Context, rd Reader, stream StreamID) (uint64, error) {
	in, inspect := rd.(Inspector)
	var recorded TagSummary
	if inspect {
		var err error
		if recorded, err = in.TagSummary(ctx, stream); err != nil {
			return 0, err
		}
	}
	var (
		verified uint64
		cut      = recorded.Cut.Version
		prev     = recorded.Cut.Hash
		last     = recorded.Cut.Position
	)
	read := rd.ReadStream
	if ir, ok := rd.(IndexedStreamReader); ok {
		read = ir.ReadStreamThroughIndex
	}
	for r, err := range read(ctx, stream, cut+1, 0) {
		if err != nil {
			return verified, err
		}
		link, err := checkLink(stream, &r, cut+verified+1, prev)
		if err != nil {
			return verified, err
		}
		if inspect && recorded.Version > 0 && link.Version == recorded.Version && link.Hash != recorded.HeadHash {
			return verified, &ChainError{Stream: stream, Version: link.Version, Position: r.Position, Reason: fmt.Sprintf(
				"the stream's recorded head hash %s is not the hash %s of its event at the recorded version %d", recorded.HeadHash, link.Hash, recorded.Version)}
		}
		prev, last = link.Hash, r.Position
		verified++
	}
	if !inspect {
		return verified, nil
	}
	if cut+verified < recorded.Version {
		return verified, &ChainError{Stream: stream, Version: cut + verified + 1, Position: recorded.LastPosition, Reason: fmt.Sprintf(
			"the stream's recorded version is %d (head hash %s, last position %s) but its events end at version %d (position %s): its newest events were removed",
			recorded.Version, recorded.HeadHash, recorded.LastPosition, cut+verified, last)}
	}
	if cut > 0 && cut == recorded.Version && verified == 0 && recorded.HeadHash != recorded.Cut.Hash {
		return 0, &ChainError{Stream: stream, Version: cut, Position: recorded.Cut.Position, Reason: fmt.Sprintf(
			"the stream is archived whole at version %d, but its checkpoint's hash %s is not its recorded head hash %s", cut, recorded.Cut.Hash, recorded.HeadHash)}
	}
	if recorded.Version == 0 && verified > 0 {
		// Maybe appended after the summary was read: ask again.
		again, err := in.TagSummary(ctx, stream)
		if err != nil {
			return verified, err
		}
		if again.Version == 0 {
			return verified, &ChainError{Stream: stream, Version: verified, Position: last, Reason: fmt.Sprintf(
				"the stream has %d events but records no version or head hash: its stream record was removed", verified)}
		}
	}
	return verified, nil
}

// IndexedStreamReader is an optional capability of a Reader whose ReadStream
// finds a stream's events by the versions they store themselves, where the
// backend also keeps a tag index that fences appends and answers DCB reads:
// the Postgres journal reads an aggregate's events straight from its events
// table, without its event_tags index. ReadStreamThroughIndex is ReadStream
// read in the index's order, each record with its own stored links, so an
// index that no longer matches the events shows as a broken chain in
// VerifyStream, which reads through it. Safe for concurrent use; returned
// records are owned by the caller.
type IndexedStreamReader interface {
	ReadStreamThroughIndex(ctx context.Context, stream StreamID, fromVersion uint64, limit int) iter.Seq2[Record, error]
}
