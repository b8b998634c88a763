package evidence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// Format is the version of the signed statement (and of its byte encoding
// and tree hashing) this package writes and reads.
const Format = "scribe.checkpoint.v1"

// Errors of signed checkpoints and proofs, matched with errors.Is.
var (
	// ErrWrongKey: the checkpoint was signed with another key than the one
	// given (its key ID names the signing key).
	ErrWrongKey = errors.New("evidence: signed with another key")
	// ErrBadSignature: the signature does not verify over the statement:
	// the statement or the signature was altered.
	ErrBadSignature = errors.New("evidence: the signature does not verify")
	// ErrCorrupt: a checkpoint file's stream list or event hashes do not
	// add up to its signed root, or the file cannot be decoded.
	ErrCorrupt = errors.New("evidence: checkpoint file corrupt")
	// ErrFormat: a statement, file or proof of an unknown format version.
	ErrFormat = errors.New("evidence: unknown format")
	// ErrProof: an inclusion proof does not lead to its checkpoint's root,
	// or its event is not what it claims.
	ErrProof = errors.New("evidence: the proof does not hold")
)

// Statement is what a checkpoint's signature covers: the root of the
// two-level Merkle tree over every stream's events, and what was counted.
// Its byte encoding (SignedBytes) is fixed by Format.
type Statement struct {
	// Journal labels the journal the checkpoint was made of (the CLI uses
	// the Postgres schema); informational, but signed.
	Journal string
	// Position is the journal's head when the checkpoint was begun: each
	// stream is covered at least up to its last event at or below it.
	Position journal.Position
	// MadeAt is when the checkpoint was begun (UTC, microseconds).
	MadeAt time.Time
	// Streams and Events count the streams and the events (stream leaves
	// and event leaves, an event with two tags counted in each) covered.
	Streams uint64
	Events  uint64
	// Root is the root of the tree over the stream leaves.
	Root journal.Hash
	// KeyID is SHA-256 of the signing key's 32-byte Ed25519 public key.
	KeyID journal.Hash
}

// SignedBytes returns the exact bytes an Ed25519 signature covers:
//
//	str("scribe.checkpoint.v1") str(Journal)
//	uint64 Position.Commit, uint64 Position.Seq
//	int64 MadeAt.UnixMicro()
//	uint64 Streams, uint64 Events
//	Root (32 bytes), KeyID (32 bytes)
//
// with str(s) a uint64 big-endian length and the bytes, every integer
// big-endian.
func (s Statement) SignedBytes() []byte {
	b := make([]byte, 0, 8+len(Format)+8+len(s.Journal)+5*8+64)
	b = appendStr(b, Format)
	b = appendStr(b, s.Journal)
	b = binary.BigEndian.AppendUint64(b, s.Position.Commit)
	b = binary.BigEndian.AppendUint64(b, s.Position.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(s.MadeAt.UnixMicro()))
	b = binary.BigEndian.AppendUint64(b, s.Streams)
	b = binary.BigEndian.AppendUint64(b, s.Events)
	b = append(b, s.Root[:]...)
	return append(b, s.KeyID[:]...)
}

// Signed is a statement with its signature: what a checkpoint file opens
// with and what an inclusion proof carries.
type Signed struct {
	Statement
	Signature []byte
}

// signedJSON is Signed's JSON form: one object, hashes in lowercase hex,
// the signature in standard base64, the position "commit.seq", the time
// RFC 3339 in UTC with microseconds.
type signedJSON struct {
	Format    string           `json:"format"`
	Journal   string           `json:"journal"`
	Position  journal.Position `json:"position"`
	MadeAt    string           `json:"madeAt"`
	Streams   uint64           `json:"streams"`
	Events    uint64           `json:"events"`
	Root      hexHash          `json:"root"`
	KeyID     hexHash          `json:"keyId"`
	Signature []byte           `json:"signature"`
}

const timeLayout = "2006-01-02T15:04:05.000000Z"

// MarshalJSON renders the signed statement as one JSON object (see the
// package documentation for its fields).
func (s Signed) MarshalJSON() ([]byte, error) {
	return json.Marshal(signedJSON{Format: Format, Journal: s.Journal, Position: s.Position,
		MadeAt: s.MadeAt.UTC().Format(timeLayout), Streams: s.Streams, Events: s.Events,
		Root: hexHash(s.Root), KeyID: hexHash(s.KeyID), Signature: s.Signature})
}

// UnmarshalJSON reads what MarshalJSON writes; another format fails with
// ErrFormat.
func (s *Signed) UnmarshalJSON(b []byte) error {
	var v signedJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("%w: the signed statement is not valid JSON: %v", ErrCorrupt, err)
	}
	if v.Format != Format {
		return fmt.Errorf("%w: the statement's format is %q; this scribe reads %q", ErrFormat, v.Format, Format)
	}
	t, err := time.Parse(timeLayout, v.MadeAt)
	if err != nil {
		return fmt.Errorf("%w: madeAt %q is not a time in the form %s", ErrCorrupt, v.MadeAt, timeLayout)
	}
	*s = Signed{Statement: Statement{Journal: v.Journal, Position: v.Position, MadeAt: t, Streams: v.Streams,
		Events: v.Events, Root: journal.Hash(v.Root), KeyID: journal.Hash(v.KeyID)}, Signature: v.Signature}
	return nil
}

// KeyID returns the key ID of pub: SHA-256 of its 32 bytes.
func KeyID(pub ed25519.PublicKey) journal.Hash { return sha256.Sum256(pub) }

// Verify checks that the statement was signed by pub: its key ID is pub's
// (else ErrWrongKey) and the signature verifies over SignedBytes (else
// ErrBadSignature). It says nothing of the streams (Checkpoint.Verify).
func (s Signed) Verify(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("evidence: the public key has %d bytes, an Ed25519 key has %d", len(pub), ed25519.PublicKeySize)
	}
	if id := KeyID(pub); id != s.KeyID {
		return fmt.Errorf("%w: the checkpoint names signing key %s, the public key given is %s; pass the public key of the key that signed it",
			ErrWrongKey, short(s.KeyID), short(id))
	}
	if !ed25519.Verify(pub, s.SignedBytes(), s.Signature) {
		return fmt.Errorf("%w: the checkpoint of %s (root %s) was altered after it was signed, or its signature was",
			ErrBadSignature, s.MadeAt.UTC().Format(time.RFC3339), short(s.Root))
	}
	return nil
}

// StreamHead is one stream's entry in a checkpoint: the stream, its
// version (event count) covered, its chain head hash at that version and
// the root of the tree over its event leaves 1..Version.
type StreamHead struct {
	Partition string
	Tag       journal.Tag
	Version   uint64
	Head      journal.Hash
	Root      journal.Hash
}

// ID returns the stream's journal ID.
func (s StreamHead) ID() journal.StreamID {
	return journal.StreamID{Partition: s.Partition, Tag: s.Tag}
}

// Leaf is one event as a checkpoint holds it: its ID and its chain hash in
// the stream.
type Leaf struct {
	ID   uuid.UUID
	Hash journal.Hash
}

// Stream is a stream's entry with its leaves, Leaves[v-1] being version v.
type Stream struct {
	StreamHead
	Leaves []Leaf
}

// leafHashes returns the event leaf hashes of s.
func (s *Stream) leafHashes() []journal.Hash {
	out := make([]journal.Hash, len(s.Leaves))
	for i, l := range s.Leaves {
		out[i] = EventLeaf(l.ID, l.Hash)
	}
	return out
}

// Checkpoint is a signed statement with everything it covers: every stream,
// ordered by partition then tag (byte order), each with its event leaves.
// Made by Make, signed by Sign, stored by a Sink, read by Decode.
type Checkpoint struct {
	Signed
	Streams []Stream
}

// Sign sets the statement's key ID to priv's and signs it. The key stays
// with the caller; nothing of it but the signature and the key ID is kept.
func (c *Checkpoint) Sign(priv ed25519.PrivateKey) error {
	if len(priv) != ed25519.PrivateKeySize {
		return fmt.Errorf("evidence: the private key has %d bytes, an Ed25519 key has %d", len(priv), ed25519.PrivateKeySize)
	}
	c.KeyID = KeyID(priv.Public().(ed25519.PublicKey))
	c.Signature = ed25519.Sign(priv, c.SignedBytes())
	return nil
}

// Verify checks the signature with pub (Signed.Verify) and that the
// streams and their leaves add up to the signed root and counts: each
// stream's root is the root of its leaves, its head its last leaf's hash,
// streams are in order without repeats, and the stream leaves' root is the
// statement's Root. A file altered anywhere fails with ErrCorrupt (naming
// the stream) or ErrBadSignature.
func (c *Checkpoint) Verify(pub ed25519.PublicKey) error {
	if err := c.Signed.Verify(pub); err != nil {
		return err
	}
	return c.checkTree()
}

// checkTree checks that c's streams add up to its statement.
func (c *Checkpoint) checkTree() error {
	if uint64(len(c.Streams)) != c.Statement.Streams {
		return fmt.Errorf("%w: the statement counts %d streams, the file holds %d", ErrCorrupt, c.Statement.Streams, len(c.Streams))
	}
	var events uint64
	leaves := make([]journal.Hash, len(c.Streams))
	for i := range c.Streams {
		s := &c.Streams[i]
		if i > 0 && compareStreams(c.Streams[i-1].StreamHead, s.StreamHead) >= 0 {
			return fmt.Errorf("%w: stream %s is out of order or repeated", ErrCorrupt, s.ID())
		}
		if s.Version == 0 || uint64(len(s.Leaves)) != s.Version {
			return fmt.Errorf("%w: stream %s: version %d, %d event hashes", ErrCorrupt, s.ID(), s.Version, len(s.Leaves))
		}
		if s.Head != s.Leaves[len(s.Leaves)-1].Hash {
			return fmt.Errorf("%w: stream %s: its head is not its last event's hash", ErrCorrupt, s.ID())
		}
		if MerkleRoot(s.leafHashes()) != s.Root {
			return fmt.Errorf("%w: stream %s: its event hashes do not add up to its root", ErrCorrupt, s.ID())
		}
		events += s.Version
		leaves[i] = StreamLeaf(s.StreamHead)
	}
	if events != c.Statement.Events {
		return fmt.Errorf("%w: the statement counts %d events, the file holds %d", ErrCorrupt, c.Statement.Events, events)
	}
	if MerkleRoot(leaves) != c.Root {
		return fmt.Errorf("%w: the streams do not add up to the signed root %s", ErrCorrupt, short(c.Root))
	}
	return nil
}

// Find returns the index of stream in c.Streams, or -1.
func (c *Checkpoint) Find(stream journal.StreamID) int {
	stream = stream.Normalize()
	i, ok := slices.BinarySearchFunc(c.Streams, StreamHead{Partition: stream.Partition, Tag: stream.Tag},
		func(s Stream, t StreamHead) int { return compareStreams(s.StreamHead, t) })
	if !ok {
		return -1
	}
	return i
}

// compareStreams orders streams by partition, then tag, byte order.
func compareStreams(a, b StreamHead) int {
	if c := strings.Compare(a.Partition, b.Partition); c != 0 {
		return c
	}
	return strings.Compare(string(a.Tag), string(b.Tag))
}

// hexHash is a Hash in JSON as lowercase hex.
type hexHash journal.Hash

func (h hexHash) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h[:])), nil }

func (h *hexHash) UnmarshalText(b []byte) error {
	if len(b) != 2*len(h) {
		return fmt.Errorf("a hash is %d hex digits, got %d", 2*len(h), len(b))
	}
	_, err := hex.Decode(h[:], b)
	return err
}

// short renders the first 8 bytes of h in hex, enough to tell keys and
// roots apart in a message.
func short(h journal.Hash) string { return hex.EncodeToString(h[:8]) }
