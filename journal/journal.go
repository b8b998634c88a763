package journal

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/google/uuid"
)

// AppendOptions control one Append. All fields are optional.
type AppendOptions struct {
	// Expect maps a tag to the version its stream (in the events' partition) must
	// have before this append; 0 means the stream must be empty. Tags not in the
	// map are not checked. This is the actor path: cheap and exact.
	Expect map[Tag]uint64
	// Condition, if set, is a DCB append condition checked atomically with the write.
	Condition *AppendCondition
	// Leases fence the append: each lease must be the current, unexpired lease of
	// its stream, or the append fails with ErrSessionExpired or ErrInvalidSession.
	Leases []Lease
	// Prepared, if set, is Prepare's result for exactly these events, so the
	// journal does not validate them again: the writer validated each
	// command's events on its own (the stream actor does) and joined them
	// (JoinPrepared). The journal then stores the prepared copies. When it
	// does not match the events (another count or other IDs, in order) or
	// was prepared under looser limits than the journal's, it is ignored and
	// the events are validated as usual.
	Prepared Prepared
}

// AppendResult reports a successful append.
type AppendResult struct {
	// Records are the stored events, in append order, with positions, per-tag
	// versions, recorded-at and hash chain links.
	Records []Record
	// Duplicate is true when every event ID was already stored: the original
	// records are returned and nothing was written.
	Duplicate bool
}

// Last returns the position of the last record (zero when there are none).
func (r AppendResult) Last() Position {
	if len(r.Records) == 0 {
		return Position{}
	}
	return r.Records[len(r.Records)-1].Position
}

// ReadOptions shape a DCB Read. They never change which events match.
type ReadOptions struct {
	// From is inclusive: forwards, the first position returned is ≥ From;
	// backwards, the first position returned is ≤ From (zero From means the head).
	From Position
	// Limit caps the number of records, applied after filtering; 0 means no limit.
	Limit int
	// Backwards returns matches in descending position order.
	Backwards bool
}

// Appender writes events.
type Appender interface {
	// Append stores events atomically: all or nothing. The events share one
	// partition. Per-tag versions are assigned without gaps. It fails with
	// ErrInvalidEvent (nothing written), ErrVersionMismatch, ErrAppendConditionFailed,
	// ErrStreamRetired (a named stream has a tombstone; final),
	// ErrSessionExpired / ErrInvalidSession, ErrDuplicateMismatch,
	// ErrOutcomeUnknown, or the context's error. When every event ID is already
	// stored it returns the original records with Duplicate set and writes
	// nothing (no condition, expectation or lease is checked in that case).
	// Safe for concurrent use.
	Append(ctx context.Context, events []Event, opts AppendOptions) (AppendResult, error)
}

// Reader reads stored events. Every method is safe for concurrent use. Iterators
// yield records in ascending position order unless stated otherwise; an error
// ends the iteration as the last (zero Record, err) pair. A caller may stop early.
// Returned records are owned by the caller.
type Reader interface {
	// ReadStream yields the records of a tag stream with version ≥ fromVersion
	// (versions start at 1), at most limit of them (0: no limit). On a
	// backend that archives, a fromVersion at or below the stream's cut
	// yields an *ArchivedError (ErrArchived) naming the cut: start at
	// Cut.Version+1, or read through an ArchiveReader.
	ReadStream(ctx context.Context, stream StreamID, fromVersion uint64, limit int) iter.Seq2[Record, error]
	// Read yields the records matching q (a DCB read). An invalid query yields ErrInvalidQuery.
	Read(ctx context.Context, q Query, opts ReadOptions) iter.Seq2[Record, error]
	// ReadAll yields every record of every partition with position > after, at
	// most limit (0: no limit). It never yields a position below one it or an
	// earlier call has already shown (gap-free for catch-up readers).
	ReadAll(ctx context.Context, after Position, limit int) iter.Seq2[Record, error]
	// ReadEvent returns the record with the given event ID, or ErrNotFound.
	ReadEvent(ctx context.Context, id uuid.UUID) (Record, error)
	// Head returns the position of the newest visible event (zero when empty).
	Head(ctx context.Context) (Position, error)
	// ReadByCorrelation yields the records whose Metadata.CorrelationID
	// equals correlationID, in position order. An empty correlationID yields
	// an error wrapping ErrInvalidQuery.
	ReadByCorrelation(ctx context.Context, correlationID string) iter.Seq2[Record, error]
	// ReadTypes yields the records q selects (see TypeQuery) in position
	// order, ascending or descending, at most q.Limit of them. To resume,
	// pass the last record's Position as q.Cursor.
	ReadTypes(ctx context.Context, q TypeQuery) iter.Seq2[Record, error]
}

// TypeQuery selects events by type and time, across partitions, for
// Reader.ReadTypes.
type TypeQuery struct {
	// Types are the event types to read; at least one, none empty.
	Types []string
	// From and To bound RecordedAt to [From, To); a zero bound is open.
	From, To time.Time
	// Descending reads from the newest event backwards.
	Descending bool
	// Cursor resumes a read: only events after it (before it when
	// Descending) are read. Zero starts at the beginning (or the end).
	Cursor Position
	// Limit is the most records to read; 0 means no limit.
	Limit int
}

// Validate reports a query ReadTypes rejects, wrapping ErrInvalidQuery.
func (q TypeQuery) Validate() error {
	switch {
	case len(q.Types) == 0:
		return fmt.Errorf("%w: ReadTypes: no types given; name at least one event type", ErrInvalidQuery)
	case slices.Contains(q.Types, ""):
		return fmt.Errorf("%w: ReadTypes: an event type is empty", ErrInvalidQuery)
	case q.Limit < 0:
		return fmt.Errorf("%w: ReadTypes: the limit is %d; give 0 for no limit or a positive number", ErrInvalidQuery, q.Limit)
	case !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To):
		return fmt.Errorf("%w: ReadTypes: the time range [%s, %s) is empty; From must be before To", ErrInvalidQuery, q.From.Format(time.RFC3339Nano), q.To.Format(time.RFC3339Nano))
	}
	return nil
}

// inRange reports whether t is in q's time range.
func (q TypeQuery) inRange(t time.Time) bool {
	return (q.From.IsZero() || !t.Before(q.From)) && (q.To.IsZero() || t.Before(q.To))
}

// Subscriber streams matching events as they are stored.
type Subscriber interface {
	// Subscribe yields every record matching q with position > after: first the
	// stored ones (catch-up), then new ones as they commit (live), in ascending
	// position order without gaps, until ctx ends (the last pair is then
	// (zero, ctx.Err())) or the consumer stops. Delivery is at-least-once across
	// resumptions: resume from the last position processed.
	Subscribe(ctx context.Context, q Query, after Position) iter.Seq2[Record, error]
}

// TagSummary describes one tag stream.
type TagSummary struct {
	Stream StreamID
	// Version is the stream's current version, which is also its event count.
	Version uint64
	// HeadHash is the chain hash of the stream's newest event (version
	// Version), as the backend recorded it when that event was appended, not
	// read back from the event; zero for a stream without events.
	// VerifyStream compares it with the last event it reads, so a stream
	// whose newest events were removed is detected.
	HeadHash Hash
	// FirstPosition and LastPosition are the positions of the stream's first
	// and newest events; FirstRecordedAt and LastRecordedAt their RecordedAt.
	// All are zero for a stream without events.
	FirstPosition   Position
	LastPosition    Position
	FirstRecordedAt time.Time
	LastRecordedAt  time.Time
	// Cut is the stream's checkpoint: versions 1 to Cut.Version were retired
	// into the archive and ReadStream fails with an *ArchivedError below
	// Cut.Version+1. Zero when nothing is archived (and on backends that never
	// archive). FirstPosition and FirstRecordedAt still describe the stream's
	// first event ever, archived or not.
	Cut Checkpoint
	// Retired reports a tombstone: the stream was closed for good at Version,
	// and every append naming it fails with ErrStreamRetired.
	Retired bool
}

// TypeSummary counts the events of one type, across partitions.
type TypeSummary struct {
	Type  string
	Count uint64
	// FirstPosition and LastPosition are the positions of the type's first
	// and newest events; FirstRecordedAt and LastRecordedAt the earliest and
	// latest RecordedAt among its events.
	FirstPosition   Position
	LastPosition    Position
	FirstRecordedAt time.Time
	LastRecordedAt  time.Time
}

// Inspector answers summary questions. Safe for concurrent use.
type Inspector interface {
	// TagSummary returns the summary of one stream; an unknown stream has
	// Version 0 and zero positions (no error).
	TagSummary(ctx context.Context, stream StreamID) (TagSummary, error)
	// TagsOfGroup lists the streams of a partition whose tag group is group,
	// ordered by tag.
	TagsOfGroup(ctx context.Context, partition, group string) ([]TagSummary, error)
	// TypeSummaries counts events per type across the journal, ordered by type.
	TypeSummaries(ctx context.Context) ([]TypeSummary, error)
	// CountAfter counts the events with position > after.
	CountAfter(ctx context.Context, after Position) (uint64, error)
}

// Journal is the whole storage contract. Implementations are safe for
// concurrent use by many goroutines.
type Journal interface {
	Appender
	Reader
	Subscriber
	Inspector
}
