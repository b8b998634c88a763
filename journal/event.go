package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
)

// DefaultPartition is the partition (tenant) of events and streams whose
// partition is left empty.
const DefaultPartition = "default"

// MaxTypeLength and MaxTagLength bound an event's type and each of its tags, in bytes.
const (
	MaxTypeLength = 256
	MaxTagLength  = 256
)

// DefaultMaxDataSize is the default limit of an event's Data, in bytes (1 MiB).
const DefaultMaxDataSize = 1 << 20

// Tag names a tag stream, in "group:value" form ("account:42"). The group is the
// text before the first colon; a tag without a colon has the whole tag as its group.
type Tag string

// Group returns the text before the first colon, or the whole tag when it has none.
func (t Tag) Group() string {
	if i := strings.IndexByte(string(t), ':'); i >= 0 {
		return string(t[:i])
	}
	return string(t)
}

// Value returns the text after the first colon, or "" when the tag has none.
func (t Tag) Value() string {
	if i := strings.IndexByte(string(t), ':'); i >= 0 {
		return string(t[i+1:])
	}
	return ""
}

// NewTag joins a group and a value into a tag: NewTag("account", "42") == "account:42".
func NewTag(group, value string) Tag { return Tag(group + ":" + value) }

// ReservedTagPrefix begins the tags of the journal's own streams. An event may
// not carry such a tag and a query may not name one (ErrInvalidEvent,
// ErrInvalidQuery); ReadStream, TagSummary, TagsOfGroup and VerifyStream
// accept them, so the journal's own chains are read and verified like any
// stream.
const ReservedTagPrefix = "$"

// UntaggedGroup is the tag group of the untagged chains (see UntaggedChain).
const UntaggedGroup = ReservedTagPrefix + "untagged"

// IsReserved reports whether t is a tag of the journal's own streams.
func (t Tag) IsReserved() bool { return strings.HasPrefix(string(t), ReservedTagPrefix) }

// UntaggedChain returns the tag of the hash chain that covers the untagged
// events of type eventType: "$untagged:" + eventType. Each partition has one
// such chain per event type. An untagged event is version n of its chain
// exactly as a tagged event is version n of each of its tags' streams, so
// the chain's head is recorded (TagSummary), read (ReadStream) and verified
// (VerifyStream) like a stream's, and TagsOfGroup(partition, UntaggedGroup)
// lists a partition's untagged chains.
//
// One chain per type, not one per partition: appends to one chain take
// turns (each links to the previous head), so untagged events of different
// types are appended concurrently, and only those of one type wait for each
// other. The chain's tag is not among the event's Tags: a query by tags never
// matches an untagged event, a query by its type does.
func UntaggedChain(eventType string) Tag { return Tag(UntaggedGroup + ":" + eventType) }

// ChainTags returns the tags of the streams whose hash chains cover e: its
// Tags, or, for an event without tags, its untagged chain (UntaggedChain).
// A stored Record has one Link per chain tag, in this order.
func ChainTags(e *Event) []Tag {
	if len(e.Tags) > 0 {
		return e.Tags
	}
	return []Tag{UntaggedChain(e.Type)}
}

// StreamID identifies a tag stream: a tag within a partition. The zero Partition
// means DefaultPartition.
type StreamID struct {
	Partition string
	Tag       Tag
}

// Stream returns the StreamID of tag in the default partition.
func Stream(tag Tag) StreamID { return StreamID{Partition: DefaultPartition, Tag: tag} }

// Normalize returns id with an empty partition replaced by DefaultPartition.
func (id StreamID) Normalize() StreamID {
	if id.Partition == "" {
		id.Partition = DefaultPartition
	}
	return id
}

// String renders "partition/tag".
func (id StreamID) String() string {
	id = id.Normalize()
	return id.Partition + "/" + string(id.Tag)
}

// Metadata is the message and context metadata stored with every event. All
// fields are optional. It is part of the hash chain.
type Metadata struct {
	CorrelationID  string    `json:"correlationId,omitempty"`
	CausationID    string    `json:"causationId,omitempty"`
	UserID         string    `json:"userId,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	Scopes         []string  `json:"scopes,omitempty"`
	Partition      string    `json:"partition,omitempty"` // tenant; "" means DefaultPartition
	CreatedAt      time.Time `json:"createdAt,omitzero"`
	// TraceParent and TraceState carry the W3C trace context of the command
	// that caused the event.
	TraceParent string `json:"traceParent,omitempty"`
	TraceState  string `json:"traceState,omitempty"`
	// CommandHash fingerprints the command that caused the event (set by the
	// runtime for commands with an IdempotencyKey), so that a repeat of the
	// key with a different command is told apart from a retry, also after a
	// restart.
	CommandHash string `json:"commandHash,omitempty"`
}

// Event is what a writer appends. ID must be a non-nil UUID (v7 preferred, see
// NewEventID) and is the idempotency key of the append. Type is non-empty and at
// most MaxTypeLength bytes. Tags is a set (no duplicates, none empty, none
// reserved) and may be empty: as in the DCB model, an event without tags is
// found by its type, and it is chained in its type's untagged chain
// (UntaggedChain). Backends store Tags sorted. Data must be a JSON object. All events of one append share one
// partition (Metadata.Partition).
type Event struct {
	ID            uuid.UUID
	Type          string
	SchemaVersion int
	Tags          []Tag
	Data          json.RawMessage
	Metadata      Metadata
}

// NewEventID returns a fresh UUIDv7 (time-ordered) event ID.
func NewEventID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// HasTag reports whether the event carries tag.
func (e Event) HasTag(tag Tag) bool {
	for _, t := range e.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// Hash is a SHA-256 digest in a tag stream's hash chain.
type Hash [sha256.Size]byte

// String renders the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// StreamLink is an event's place in one of its tag streams: its per-tag version
// and the hash chain values of that stream.
type StreamLink struct {
	Tag     Tag
	Version uint64
	// PrevHash is the Hash of the previous event of the stream (zero for version 1).
	PrevHash Hash
	// Hash is ChainHash(PrevHash, CanonicalBytes(record)).
	Hash Hash
}

// Record is an Event as stored. Tags are sorted; Links has one entry per chain
// tag (ChainTags): one per tag, in the same order as Tags, or, for an event
// without tags, exactly one, for its untagged chain. Metadata.Partition is
// always set (never "").
type Record struct {
	Event
	Position   Position
	RecordedAt time.Time // set by the backend, truncated to microseconds, UTC
	Links      []StreamLink
}

// Version returns the event's version within tag's stream, or 0 when the event
// does not carry tag.
func (r Record) Version(tag Tag) uint64 {
	for _, l := range r.Links {
		if l.Tag == tag {
			return l.Version
		}
	}
	return 0
}

// Partition returns the record's partition.
func (r Record) Partition() string {
	if r.Metadata.Partition == "" {
		return DefaultPartition
	}
	return r.Metadata.Partition
}
