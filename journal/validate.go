package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// MaxPartitionLength bounds a partition name, in bytes.
const MaxPartitionLength = 256

// Bounds of an event's metadata, the same on every backend (PrepareAppend
// enforces them): an identifier is at most MaxMetadataIDLength bytes of UTF-8
// text without control characters; a W3C traceparent is at most
// MaxTraceParentLength bytes and a tracestate MaxTraceStateLength; there are at
// most MaxScopes scopes of at most MaxMetadataIDLength bytes each. Values are
// bounded because every event stores them and indexes (correlation ID) and
// caches (idempotency key) hold them: one caller's megabyte header must not
// cost every reader.
const (
	MaxMetadataIDLength  = 256
	MaxTraceParentLength = 55
	MaxTraceStateLength  = 512
	MaxScopes            = 64
)

// Limited is implemented by journals that report the limits they validate
// appends with, so a writer (the stream actor) can validate one command's
// events exactly as the journal will, before they join a batch.
type Limited interface {
	// Limits returns the limits of Append's validation. Safe for concurrent use.
	Limits() Limits
}

// InlineAppender is an optional capability of a journal whose Append is
// bounded in-process work (no I/O, network or timer wait): a caller may run it
// on its own goroutine instead of handing it to an I/O worker. InlineAppend
// returns the journal that has the capability; a caller trusts it only when
// that is the journal it appends to, so a type that embeds such a journal
// (and may wrap Append in slower work) does not pass for one. Such an Append
// keeps nothing of its AppendOptions once it returns (it reads them, copying
// what it stores), so an inline caller may reuse their maps and slices for
// its next append (the stream actor does).
type InlineAppender interface {
	InlineAppend() Appender
}

// Limits bounds what an append may carry.
type Limits struct {
	// MaxDataSize is the largest Data an event may carry, in bytes, measured
	// after compaction. 0 means DefaultMaxDataSize.
	MaxDataSize int
}

func (l Limits) maxDataSize() int {
	if l.MaxDataSize <= 0 {
		return DefaultMaxDataSize
	}
	return l.MaxDataSize
}

// PrepareAppend validates an append and returns normalized copies of the events
// and their partition. Backends call it before they write anything; it never
// modifies the caller's events, slices or options.
//
// An event may carry no tags; it is then covered by its type's untagged chain
// (UntaggedChain). No event may carry a reserved tag (ReservedTagPrefix).
//
// Normalization: Tags are sorted ascending; Data is
// compacted exactly as json.Compact does (backends store and return exactly these bytes);
// Metadata.Partition is set ("" becomes DefaultPartition); Metadata.CreatedAt is
// converted to UTC and truncated to microseconds; empty Scopes become nil.
//
// With opts.Prepared set to Prepare's result for these events, it returns the
// prepared copies without validating them again.
//
// A malformed event or event list fails with an *InvalidEventError (errors.Is
// ErrInvalidEvent) naming the event's index (-1 for the list or the options) and
// the field. A malformed Condition query fails with an error wrapping
// ErrInvalidQuery.
func PrepareAppend(events []Event, opts AppendOptions, limits Limits) ([]Event, string, error) {
	if len(events) == 0 {
		return nil, "", &InvalidEventError{Index: -1, Field: "events", Reason: "the event list is empty; append at least one event"}
	}
	if out, partition, ok := opts.Prepared.reuse(events, limits); ok {
		if err := checkOptions(opts, partition); err != nil {
			return nil, "", err
		}
		return out, partition, nil
	}
	out := make([]Event, len(events))
	var seen map[uuid.UUID]int // past a few events; fewer are compared pairwise
	if len(events) > 8 {
		seen = make(map[uuid.UUID]int, len(events))
	}
	partition := ""
	for i := range events {
		ev, err := prepareEvent(i, &events[i], limits)
		if err != nil {
			return nil, "", err
		}
		j, dup := -1, false
		if seen != nil {
			j, dup = seen[ev.ID]
			seen[ev.ID] = i
		} else {
			for k := range i {
				if out[k].ID == ev.ID {
					j, dup = k, true
					break
				}
			}
		}
		if dup {
			return nil, "", &InvalidEventError{Index: i, Field: "ID", Reason: fmt.Sprintf("event ID %s is also the ID of event %d of this append; give every event its own ID (NewEventID)", ev.ID, j)}
		}
		if i == 0 {
			partition = ev.Metadata.Partition
		} else if ev.Metadata.Partition != partition {
			return nil, "", &InvalidEventError{Index: i, Field: "Metadata.Partition", Reason: fmt.Sprintf("partition %q differs from partition %q of event 0; all events of one append must share a partition, so append them separately", ev.Metadata.Partition, partition)}
		}
		out[i] = ev
	}
	if err := checkOptions(opts, partition); err != nil {
		return nil, "", err
	}
	return out, partition, nil
}

func prepareEvent(i int, in *Event, limits Limits) (Event, error) {
	fail := func(field, format string, args ...any) (Event, error) {
		return Event{}, &InvalidEventError{Index: i, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if in.ID == uuid.Nil {
		return fail("ID", "the event ID is the nil UUID; set it with NewEventID()")
	}
	if in.Type == "" {
		return fail("Type", "the event type is empty; name the event type (e.g. \"AccountOpened\")")
	}
	if len(in.Type) > MaxTypeLength {
		return fail("Type", "the event type is %d bytes long, over the limit of %d; use a shorter type name", len(in.Type), MaxTypeLength)
	}
	if reason := badText(in.Type); reason != "" {
		return fail("Type", "the event type %s", reason)
	}
	if in.SchemaVersion < 0 {
		return fail("SchemaVersion", "the schema version is %d; use 0 or a positive version", in.SchemaVersion)
	}

	ev := Event{ID: in.ID, Type: in.Type, SchemaVersion: in.SchemaVersion}

	// An event without tags is valid (the DCB model allows it): it is
	// chained in its type's untagged chain (see UntaggedChain).
	if len(in.Tags) > 0 {
		tags := slices.Clone(in.Tags)
		for k, t := range tags {
			if t == "" {
				return fail(tagField(k), "the tag is empty; remove it or give it a \"group:value\" name")
			}
			if len(t) > MaxTagLength {
				return fail(tagField(k), "the tag is %d bytes long, over the limit of %d; use a shorter tag", len(t), MaxTagLength)
			}
			if reason := badText(string(t)); reason != "" {
				return fail(tagField(k), "the tag %s", reason)
			}
			if t.IsReserved() {
				return fail(tagField(k), "the tag %q begins with %q, which is reserved for the journal's own chains; rename it", t, ReservedTagPrefix)
			}
		}
		slices.Sort(tags)
		for k := 1; k < len(tags); k++ {
			if tags[k] == tags[k-1] {
				return fail("Tags", "tag %q appears more than once; tags are a set, list each tag once", tags[k])
			}
		}
		ev.Tags = tags
	}

	data, err := prepareData(in.Data, limits)
	if err != "" {
		return fail("Data", "%s", err)
	}
	ev.Data = data

	md, field, reason := prepareMetadata(in.Metadata)
	if reason != "" {
		return fail(field, "%s", reason)
	}
	ev.Metadata = md
	return ev, nil
}

// prepareData compacts raw and checks that it is one JSON object within the
// size limit. It returns a reason on failure.
func prepareData(raw json.RawMessage, limits Limits) (json.RawMessage, string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, "the event data is empty; give it a JSON object (use {} for no fields)"
	}
	if !utf8.Valid(raw) {
		return nil, "the event data is not valid UTF-8; encode text as UTF-8 JSON"
	}
	data, err := compactJSON(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return nil, fmt.Sprintf("the event data is not valid JSON (%v); give it a JSON object", err)
	}
	if data[0] != '{' {
		return nil, fmt.Sprintf("the event data is a JSON %s, not an object; wrap it in an object such as {\"value\": ...}", jsonKind(data[0]))
	}
	if max := limits.maxDataSize(); len(data) > max {
		return nil, fmt.Sprintf("the event data is %d bytes (compacted), over the limit of %d bytes; store large payloads elsewhere and reference them", len(data), max)
	}
	return json.RawMessage(data), ""
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "array"
	case '"':
		return "string"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	default:
		return "number"
	}
}

// prepareMetadata returns a normalized copy of md, or the failing field and reason.
func prepareMetadata(md Metadata) (Metadata, string, string) {
	texts := []struct {
		field string
		value string
	}{
		{"Metadata.CorrelationID", md.CorrelationID},
		{"Metadata.CausationID", md.CausationID},
		{"Metadata.UserID", md.UserID},
		{"Metadata.IdempotencyKey", md.IdempotencyKey},
		{"Metadata.Partition", md.Partition},
		{"Metadata.TraceParent", md.TraceParent},
		{"Metadata.TraceState", md.TraceState},
		{"Metadata.CommandHash", md.CommandHash},
	}
	for _, t := range texts {
		if reason := badText(t.value); reason != "" {
			return Metadata{}, t.field, "the value " + reason
		}
	}
	ids := []struct {
		field string
		value string
		max   int
	}{
		{"Metadata.CorrelationID", md.CorrelationID, MaxMetadataIDLength},
		{"Metadata.CausationID", md.CausationID, MaxMetadataIDLength},
		{"Metadata.UserID", md.UserID, MaxMetadataIDLength},
		{"Metadata.IdempotencyKey", md.IdempotencyKey, MaxMetadataIDLength},
		{"Metadata.TraceParent", md.TraceParent, MaxTraceParentLength},
		{"Metadata.TraceState", md.TraceState, MaxTraceStateLength},
		{"Metadata.CommandHash", md.CommandHash, MaxMetadataIDLength},
	}
	for _, id := range ids {
		if len(id.value) > id.max {
			return Metadata{}, id.field, fmt.Sprintf("the value is %d bytes long, over the limit of %d bytes; use a shorter value", len(id.value), id.max)
		}
		if i := strings.IndexFunc(id.value, unicode.IsControl); i >= 0 {
			return Metadata{}, id.field, fmt.Sprintf("the value contains the control character %U at byte %d; use printable text", []rune(id.value[i:])[0], i)
		}
	}
	if len(md.Scopes) > MaxScopes {
		return Metadata{}, "Metadata.Scopes", fmt.Sprintf("there are %d scopes, over the limit of %d; merge or drop scopes", len(md.Scopes), MaxScopes)
	}
	if len(md.Partition) > MaxPartitionLength {
		return Metadata{}, "Metadata.Partition", fmt.Sprintf("the partition is %d bytes long, over the limit of %d; use a shorter partition name", len(md.Partition), MaxPartitionLength)
	}
	for k, s := range md.Scopes {
		if reason := badText(s); reason != "" {
			return Metadata{}, fmt.Sprintf("Metadata.Scopes[%d]", k), "the scope " + reason
		}
		if len(s) > MaxMetadataIDLength {
			return Metadata{}, fmt.Sprintf("Metadata.Scopes[%d]", k), fmt.Sprintf("the scope is %d bytes long, over the limit of %d bytes; use a shorter scope", len(s), MaxMetadataIDLength)
		}
	}
	if md.Partition == "" {
		md.Partition = DefaultPartition
	}
	if len(md.Scopes) == 0 {
		md.Scopes = nil
	} else {
		md.Scopes = slices.Clone(md.Scopes)
	}
	if !md.CreatedAt.IsZero() {
		md.CreatedAt = md.CreatedAt.UTC().Truncate(time.Microsecond)
	} else {
		md.CreatedAt = time.Time{}
	}
	return md, "", ""
}

// badText explains why s cannot be stored portably (every backend must return
// it byte for byte), or returns "".
func badText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8; use UTF-8 text"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL byte; remove it"
	}
	return ""
}

func checkOptions(opts AppendOptions, partition string) error {
	for tag := range opts.Expect {
		if tag == "" {
			return &InvalidEventError{Index: -1, Field: "Expect", Reason: "an expected version is keyed by the empty tag; key each expectation by a stream's tag"}
		}
	}
	if opts.Condition != nil {
		if err := opts.Condition.FailIfEventsMatch.Validate(); err != nil {
			return fmt.Errorf("journal: append condition: %w", err)
		}
	}
	for k, l := range opts.Leases {
		field := func() string { return fmt.Sprintf("Leases[%d]", k) }
		if l.Stream.Tag == "" {
			return &InvalidEventError{Index: -1, Field: field(), Reason: "the lease's stream tag is empty; pass the lease returned by Sessions.Acquire"}
		}
		if p := l.Stream.Normalize().Partition; p != partition {
			return &InvalidEventError{Index: -1, Field: field(), Reason: fmt.Sprintf("the lease is for stream %s in partition %q but the events are in partition %q; fence with leases of the events' partition", l.Stream, p, partition)}
		}
	}
	return nil
}

func partitionOrDefault(p string) string {
	if p == "" {
		return DefaultPartition
	}
	return p
}

// tagField names tag k of an event in an error; built only once a tag is
// known to be bad, not for every tag of every event.
func tagField(k int) string { return "Tags[" + strconv.Itoa(k) + "]" }
