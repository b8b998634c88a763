package erasure

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/scribe-es/scribe/journal"
)

// A snapshot holds decoded state, that is the plaintext of every personal
// field its stream's events carry. So the snapshot of a stream bound to
// subjects is sealed as a whole under a key derived from all of their data
// keys: once any of them is erased, the snapshot can never be opened again
// (OpenSnapshot reports it unusable and the stream is replayed from the
// journal, where the erased fields read as zero values). A snapshot that
// was taken, dumped or backed up before an erasure is thus shredded with
// the key, like the events.

// snapshotMagic starts a sealed snapshot's state.
const snapshotMagic = "scribe.sealed-snapshot.v1\n"

// IsSealedSnapshot reports whether state is a sealed snapshot.
func IsSealedSnapshot(state []byte) bool { return bytes.HasPrefix(state, []byte(snapshotMagic)) }

type snapshotHeader struct {
	Subjects []string `json:"subjects"`
}

// snapshotKey derives the key of a snapshot of stream from its subjects'
// keys (subjects sorted): SHA-256 over a label, the stream and each
// subject with its key, all length-prefixed.
func snapshotKey(stream journal.StreamID, subjects []string, keys map[string]DataKey) (DataKey, error) {
	h := sha256.New()
	put := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte("scribe.snapshot-key.v1"))
	put([]byte(stream.Normalize().String()))
	for _, s := range subjects {
		k, ok := keys[s]
		if !ok || !k.Valid() {
			return DataKey{}, fmt.Errorf("%w: subject %q", ErrKeyMissing, s)
		}
		put([]byte(s))
		put(k.k.k[:])
	}
	return DataKeyFromBytes(h.Sum(nil))
}

func snapshotAAD(stream journal.StreamID, version uint64, schema int) []byte {
	return fmt.Appendf(nil, "scribe.snapshot.v1|%s|%d|%d", stream.Normalize().String(), version, schema)
}

// SealSnapshot seals a snapshot's state of stream at version (state schema
// schema) under the keys of subjects (the subjects bound to the stream;
// keys must hold each one's key).
func SealSnapshot(state []byte, stream journal.StreamID, version uint64, schema int, subjects []string, keys map[string]DataKey) ([]byte, error) {
	subjects = slices.Clone(subjects)
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)
	key, err := snapshotKey(stream, subjects, keys)
	if err != nil {
		return nil, err
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	hdr, err := json.Marshal(snapshotHeader{Subjects: subjects})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(snapshotMagic)+4+len(hdr)+nonceSize+len(state)+aead.Overhead())
	out = append(out, snapshotMagic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(hdr)))
	out = append(out, hdr...)
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("erasure: reading a random nonce: %w", err)
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, state, append(snapshotAAD(stream, version, schema), hdr...)), nil
}

// SnapshotSubjects returns the subjects a sealed snapshot is sealed for.
func SnapshotSubjects(sealed []byte) ([]string, error) {
	hdr, _, err := splitSnapshot(sealed)
	if err != nil {
		return nil, err
	}
	return hdr.Subjects, nil
}

func splitSnapshot(sealed []byte) (snapshotHeader, []byte, error) {
	var h snapshotHeader
	if !IsSealedSnapshot(sealed) {
		return h, nil, fmt.Errorf("%w: not a sealed snapshot", ErrCorrupt)
	}
	rest := sealed[len(snapshotMagic):]
	if len(rest) < 4 {
		return h, nil, fmt.Errorf("%w: sealed snapshot truncated", ErrCorrupt)
	}
	n := int(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if n > len(rest) {
		return h, nil, fmt.Errorf("%w: sealed snapshot truncated", ErrCorrupt)
	}
	if err := json.Unmarshal(rest[:n], &h); err != nil {
		return h, nil, fmt.Errorf("%w: sealed snapshot header", ErrCorrupt)
	}
	return h, rest, nil
}

// OpenSnapshot opens a sealed snapshot. usable is false when one of its
// subjects was erased (in keys.Erased) or is unknown: the snapshot must be
// ignored and the stream replayed. An error means it is damaged.
func OpenSnapshot(sealed []byte, stream journal.StreamID, version uint64, schema int, keys Lookup) (state []byte, usable bool, err error) {
	hdr, rest, err := splitSnapshot(sealed)
	if err != nil {
		return nil, false, err
	}
	hdrLen := int(binary.BigEndian.Uint32(sealed[len(snapshotMagic):]))
	hdrBytes, body := rest[:hdrLen], rest[hdrLen:]
	for _, s := range hdr.Subjects {
		if _, gone := keys.Erased[s]; gone {
			return nil, false, nil
		}
		if _, ok := keys.Keys[s]; !ok {
			return nil, false, nil
		}
	}
	key, err := snapshotKey(stream, hdr.Subjects, keys.Keys)
	if err != nil {
		return nil, false, nil
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, false, err
	}
	if len(body) < nonceSize+aead.Overhead() {
		return nil, false, fmt.Errorf("%w: sealed snapshot truncated", ErrCorrupt)
	}
	plain, err := aead.Open(nil, body[:nonceSize], body[nonceSize:], append(snapshotAAD(stream, version, schema), hdrBytes...))
	if err != nil {
		return nil, false, fmt.Errorf("%w: the snapshot of stream %s at version %d does not authenticate", ErrCorrupt, stream, version)
	}
	return plain, true, nil
}
