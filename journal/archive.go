package journal

import (
	"context"
	"errors"
	"fmt"
	"iter"
)

// Checkpoint is a stream's cut: where its retired (archived) events end and
// its hot events begin. Version is the version of the newest archived event
// (0: nothing archived), Hash its chain hash (the PrevHash of version
// Version+1) and Position its position. A stream's chain is verified from its
// checkpoint (VerifyStream), and its archived part against it
// (VerifyArchive). Cuts only move forward; each stream's cut is its own.
type Checkpoint struct {
	Version  uint64
	Hash     Hash
	Position Position
}

// IsZero reports that nothing of the stream is archived.
func (c Checkpoint) IsZero() bool { return c.Version == 0 }

// ArchiveReader is an optional capability of a Journal whose backend retires
// events into an archive (the Postgres journal; the in-memory journal never
// archives and does not implement it). Find it by type assertion:
//
//	if ar, ok := j.(journal.ArchiveReader); ok { ... }
//
// Reader.ReadStream never reads the archive: asked for a version at or below
// the stream's cut it fails with an *ArchivedError, so a recovery that would
// silently miss history fails loudly instead. ReadStreamWithArchive is the
// explicit, slower way to read a stream's whole history. Safe for concurrent
// use; returned records are owned by the caller.
type ArchiveReader interface {
	// ReadStreamWithArchive is ReadStream over the stream's archived and hot
	// events alike: it yields the records with version ≥ fromVersion (at most
	// limit, 0: no limit) in version order and never fails with ErrArchived.
	// An event retired while the read runs is still yielded once.
	ReadStreamWithArchive(ctx context.Context, stream StreamID, fromVersion uint64, limit int) iter.Seq2[Record, error]
}

// VerifyArchive walks the archived part of stream (versions 1 to cut.Version)
// through ar and checks its chain as VerifyStream checks the hot part: versions
// without gaps from 1, each PrevHash the previous Hash (zero for version 1),
// each Hash recomputed from the record, and that the chain ends exactly at
// the checkpoint (version cut.Version with hash cut.Hash at position
// cut.Position). It returns the number of archived events verified, or a
// *ChainError at the first broken link. A zero cut verifies 0 events.
func VerifyArchive(ctx context.Context, ar ArchiveReader, stream StreamID, cut Checkpoint) (uint64, error) {
	stream = stream.Normalize()
	if cut.IsZero() {
		return 0, nil
	}
	var (
		verified uint64
		prev     Hash
		last     Position
	)
	for r, err := range ar.ReadStreamWithArchive(ctx, stream, 1, int(min(cut.Version, 1<<62))) {
		if err != nil {
			return verified, err
		}
		link, err := checkLink(stream, &r, verified+1, prev)
		if err != nil {
			return verified, err
		}
		prev, last = link.Hash, r.Position
		verified++
	}
	if verified < cut.Version {
		return verified, &ChainError{Stream: stream, Version: verified + 1, Position: cut.Position, Reason: fmt.Sprintf(
			"the stream's checkpoint is at version %d (position %s) but its archived events end at version %d (position %s): archived events were removed",
			cut.Version, cut.Position, verified, last)}
	}
	if prev != cut.Hash || last != cut.Position {
		return verified, &ChainError{Stream: stream, Version: cut.Version, Position: last, Reason: fmt.Sprintf(
			"the archived event at the checkpoint's version %d has hash %s at position %s, but the checkpoint records hash %s at position %s",
			cut.Version, prev, last, cut.Hash, cut.Position)}
	}
	return verified, nil
}

// checkLink checks r's link of stream: it must exist, be in stream's
// partition, carry version want and PrevHash prev, and its Hash must match
// r's content. It returns the link.
func checkLink(stream StreamID, r *Record, want uint64, prev Hash) (*StreamLink, error) {
	broken := func(version uint64, format string, args ...any) error {
		return &ChainError{Stream: stream, Version: version, Position: r.Position, Reason: fmt.Sprintf(format, args...)}
	}
	var link *StreamLink
	for i := range r.Links {
		if r.Links[i].Tag == stream.Tag {
			link = &r.Links[i]
			break
		}
	}
	if link == nil {
		return nil, broken(want, "event %s read from the stream has no link for tag %q", r.ID, stream.Tag)
	}
	if r.Partition() != stream.Partition {
		return nil, broken(link.Version, "event %s belongs to partition %q, not %q", r.ID, r.Partition(), stream.Partition)
	}
	if link.Version != want {
		return nil, broken(link.Version, "expected version %d, found version %d (an event was removed, inserted or moved)", want, link.Version)
	}
	if link.PrevHash != prev {
		return nil, broken(link.Version, "previous hash %s does not equal the hash %s of version %d (an event was removed, inserted or moved)", link.PrevHash, prev, want-1)
	}
	if got := ChainHash(link.PrevHash, CanonicalBytes(r)); got != link.Hash {
		return nil, broken(link.Version, "stored hash %s does not match the event's content (recomputed %s): the event was altered after it was written", link.Hash, got)
	}
	return link, nil
}

// isArchived reports an ErrArchived error.
func isArchived(err error) bool { return errors.Is(err, ErrArchived) }
