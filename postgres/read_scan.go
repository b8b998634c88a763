package postgres

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
)

// recordScanner turns rows of recordCols into records. It decodes the
// columns' binary wire form itself when the statement returns them in
// binary (what pgx asks for with its statement cache, the default): one
// allocation for the links, one for the data and one for the metadata's
// text per record, and the partition, type and tag strings shared between
// the rows of one result, which mostly repeat them (a stream read). Any
// other result form goes through pgx's Scan (scanRecord). A recordScanner
// serves one result set at a time and is not safe for concurrent use.
//
// This is the read path of every actor recovery, runtime.State without a
// snapshot and projection catch-up: BenchmarkStateReplay in runtime guards
// it (37 → 11 allocations per event when it was written).
type recordScanner struct {
	checked, binary bool
	strs            map[string]string
	lastTags        []journal.Tag
}

// recordColOIDs are the types of recordCols, in order: a binary result of
// exactly these is decoded by recordScanner.decode.
var recordColOIDs = [...]uint32{
	pgtype.Int8OID, pgtype.Int8OID, pgtype.UUIDOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int4OID,
	pgtype.TextArrayOID, pgtype.Int8ArrayOID, pgtype.ByteaOID, pgtype.ByteaOID, pgtype.ByteaOID, pgtype.ByteaOID,
	pgtype.TimestamptzOID,
}

// maxInterned bounds the strings a recordScanner shares within one result.
const maxInterned = 1024

// scan reads the current row.
func (s *recordScanner) scan(rows pgx.Rows) (journal.Record, error) {
	if !s.checked {
		s.checked = true
		fds := rows.FieldDescriptions()
		s.binary = len(fds) == len(recordColOIDs)
		for i := 0; s.binary && i < len(fds); i++ {
			// text is the same bytes in either format (pgx asks for it as
			// text); every other column must be binary.
			s.binary = fds[i].DataTypeOID == recordColOIDs[i] && (fds[i].Format == pgx.BinaryFormatCode || recordColOIDs[i] == pgtype.TextOID)
		}
	}
	if !s.binary {
		return scanRecord(rows)
	}
	return s.decode(rows.RawValues())
}

// intern returns b as a string, the same string for equal bytes within
// the result.
func (s *recordScanner) intern(b []byte) string {
	if v, ok := s.strs[string(b)]; ok {
		return v
	}
	v := string(b)
	if s.strs == nil {
		s.strs = make(map[string]string, 8)
	}
	if len(s.strs) < maxInterned {
		s.strs[v] = v
	}
	return v
}

var errWire = errors.New("unexpected binary value")

// decode decodes one row of recordCols in binary form.
func (s *recordScanner) decode(vals [][]byte) (journal.Record, error) {
	var r journal.Record
	if len(vals) != len(recordColOIDs) {
		return r, fmt.Errorf("postgres: a record row has %d columns, want %d", len(vals), len(recordColOIDs))
	}
	for i, v := range vals {
		if v == nil {
			return r, fmt.Errorf("postgres: record column %d is NULL", i)
		}
	}
	commit, ok1 := wireInt64(vals[0])
	seq, ok2 := wireInt64(vals[1])
	if !ok1 || !ok2 || len(vals[2]) != 16 || len(vals[5]) != 4 {
		return r, fmt.Errorf("postgres: record position or ID: %w", errWire)
	}
	r.Position = journal.Position{Commit: uint64(commit), Seq: uint64(seq)}
	copy(r.ID[:], vals[2])
	partition := s.intern(vals[3])
	r.Type = s.intern(vals[4])
	r.SchemaVersion = int(int32(binary.BigEndian.Uint32(vals[5])))
	if err := s.links(&r, vals[6], vals[7], vals[8], vals[9]); err != nil {
		return journal.Record{}, fmt.Errorf("postgres: event %s: %w", r.ID, err)
	}
	r.Data = json.RawMessage(append([]byte(nil), vals[10]...))
	if err := backend.DecodeMetadataJSON(vals[11], &r.Metadata); err != nil {
		return journal.Record{}, fmt.Errorf("postgres: event %s: decode metadata: %w", r.ID, err)
	}
	if r.Metadata.Partition == "" {
		r.Metadata.Partition = partition
	}
	if !r.Metadata.CreatedAt.IsZero() {
		r.Metadata.CreatedAt = r.Metadata.CreatedAt.UTC()
	}
	at, ok := wireTimestamptz(vals[12])
	if !ok {
		return journal.Record{}, fmt.Errorf("postgres: event %s: recorded_at: %w", r.ID, errWire)
	}
	r.RecordedAt = at
	return r, nil
}

// links fills r.Tags and r.Links from the tags (text[]), versions (int8[])
// and hash columns, as scanRecord does.
func (s *recordScanner) links(r *journal.Record, tagsRaw, versionsRaw, prevHashes, hashes []byte) error {
	tags, err := wireArray(tagsRaw, pgtype.TextOID)
	if err != nil {
		return fmt.Errorf("tags: %w", err)
	}
	versions, err := wireArray(versionsRaw, pgtype.Int8OID)
	if err != nil {
		return fmt.Errorf("versions: %w", err)
	}
	n := tags.n
	if n == 0 {
		return nil
	}
	if versions.n != n || len(prevHashes) != 32*n || len(hashes) != 32*n {
		return fmt.Errorf("%d tags but %d versions and %d/%d hash bytes", n, versions.n, len(prevHashes), len(hashes))
	}
	r.Links = make([]journal.StreamLink, n)
	for i := range n {
		t, ok := tags.next()
		v, ok2 := versions.next()
		if !ok || !ok2 || len(v) != 8 {
			return errWire
		}
		l := &r.Links[i]
		l.Tag = journal.Tag(s.intern(t))
		l.Version = binary.BigEndian.Uint64(v)
		copy(l.PrevHash[:], prevHashes[32*i:])
		copy(l.Hash[:], hashes[32*i:])
	}
	// The tags column holds the event's chain tags (journal.ChainTags): its
	// tags, or the one reserved tag of its untagged chain, which is a link
	// but not a tag of the event.
	if n == 1 && r.Links[0].Tag.IsReserved() {
		return nil
	}
	if !sameTags(s.lastTags, r.Links) {
		s.lastTags = make([]journal.Tag, n)
		for i := range r.Links {
			s.lastTags[i] = r.Links[i].Tag
		}
	}
	// Consecutive records of a stream carry the same tags: they share one
	// slice, capped so that an append to one copies it.
	r.Tags = s.lastTags[:n:n]
	return nil
}

func sameTags(tags []journal.Tag, links []journal.StreamLink) bool {
	if len(tags) != len(links) {
		return false
	}
	for i := range tags {
		if tags[i] != links[i].Tag {
			return false
		}
	}
	return true
}

// wireInt64 decodes a binary int8.
func wireInt64(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// pgEpoch is the zero of Postgres' binary timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// wireTimestamptz decodes a binary timestamptz (microseconds since
// 2000-01-01 UTC) to a UTC time; infinities are refused.
func wireTimestamptz(b []byte) (time.Time, bool) {
	us, ok := wireInt64(b)
	if !ok || us == math.MaxInt64 || us == math.MinInt64 {
		return time.Time{}, false
	}
	return pgEpoch.Add(time.Duration(us/1e6) * time.Second).Add(time.Duration(us%1e6) * time.Microsecond), true
}

// wireArrayIter walks the elements of a one-dimensional binary array.
type wireArrayIter struct {
	n    int
	rest []byte
}

// wireArray parses a binary array header: empty (no dimensions) or one
// dimension of non-NULL elements of type elem.
func wireArray(b []byte, elem uint32) (wireArrayIter, error) {
	if len(b) < 12 {
		return wireArrayIter{}, errWire
	}
	dims := binary.BigEndian.Uint32(b)
	if dims == 0 {
		return wireArrayIter{}, nil
	}
	if dims != 1 || len(b) < 20 || binary.BigEndian.Uint32(b[8:]) != elem {
		return wireArrayIter{}, errWire
	}
	n := int(int32(binary.BigEndian.Uint32(b[12:])))
	if n < 0 {
		return wireArrayIter{}, errWire
	}
	return wireArrayIter{n: n, rest: b[20:]}, nil
}

// next returns the next element's bytes; false at a NULL or a short buffer.
func (it *wireArrayIter) next() ([]byte, bool) {
	if len(it.rest) < 4 {
		return nil, false
	}
	l := int(int32(binary.BigEndian.Uint32(it.rest)))
	if l < 0 || len(it.rest) < 4+l {
		return nil, false
	}
	v := it.rest[4 : 4+l]
	it.rest = it.rest[4+l:]
	return v, true
}
