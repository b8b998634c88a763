package cluster

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/clusterpb"
	"github.com/scribe-es/scribe/internal/usercode"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/tagconsistency"
)

// RemoteError is an error returned by another cluster member. Message is
// the original error's text; errors.Is matches every sentinel the original
// matched among the built-in codes (journal.ErrVersionMismatch,
// journal.ErrSessionExpired, runtime.ErrPanic, ...) and Config.Errors. Typed
// details (fields of *journal.VersionMismatchError, panic values) do not
// cross members.
type RemoteError struct {
	// Member is the address of the member that returned the error.
	Member string
	// Message is the original error's text.
	Message string
	// Codes are the wire codes of the sentinels the original error matched.
	Codes []string

	sentinels []error
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the sentinels the original error matched.
func (e *RemoteError) Unwrap() []error { return e.sentinels }

// codeNotOwner answers an envelope sent to a member that no longer hosts its
// stream; the caller routes it again (it was not executed).
const codeNotOwner = "scribe.not_owner"

// builtinErrorCodes are the sentinels that always cross members.
func builtinErrorCodes() []ErrorCode {
	return []ErrorCode{
		{Code: "scribe.version_mismatch", Err: journal.ErrVersionMismatch},
		{Code: "scribe.append_condition_failed", Err: journal.ErrAppendConditionFailed},
		{Code: "scribe.session_expired", Err: journal.ErrSessionExpired},
		{Code: "scribe.invalid_session", Err: journal.ErrInvalidSession},
		{Code: "scribe.lease_revoked", Err: journal.ErrLeaseRevoked},
		{Code: "scribe.store_not_open", Err: journal.ErrStoreNotOpen},
		{Code: "scribe.open_timeout", Err: journal.ErrOpenTimeout},
		{Code: "scribe.invalid_event", Err: journal.ErrInvalidEvent},
		{Code: "scribe.duplicate_mismatch", Err: journal.ErrDuplicateMismatch},
		{Code: "scribe.invalid_query", Err: journal.ErrInvalidQuery},
		{Code: "scribe.not_found", Err: journal.ErrNotFound},
		{Code: "scribe.outcome_unknown", Err: journal.ErrOutcomeUnknown},
		{Code: "scribe.unavailable", Err: journal.ErrUnavailable},
		{Code: "scribe.node_superseded", Err: journal.ErrNodeSuperseded},
		{Code: "scribe.archived", Err: journal.ErrArchived},
		{Code: "scribe.stream_retired", Err: journal.ErrStreamRetired},
		{Code: "scribe.partition_moving", Err: journal.ErrPartitionMoving},
		{Code: "scribe.partition_moved", Err: journal.ErrPartitionMoved},
		{Code: "scribe.configuration", Err: journal.ErrConfiguration},
		{Code: "scribe.lease_lost", Err: actors.ErrLeaseLost},
		{Code: "scribe.overloaded", Err: actors.ErrOverloaded},
		{Code: "scribe.foreign_tags", Err: actors.ErrForeignTags},
		{Code: "scribe.shutdown", Err: actors.ErrShutdown},
		{Code: "scribe.no_aggregate", Err: actors.ErrNoAggregate},
		{Code: "scribe.panic", Err: usercode.ErrPanic},
		{Code: "scribe.reservation_timeout", Err: tagconsistency.ErrReservationTimeout},
		{Code: "scribe.reservation_lost", Err: tagconsistency.ErrReservationLost},
		{Code: "scribe.unknown_aggregate", Err: runtime.ErrUnknownAggregate},
		{Code: "scribe.unknown_event", Err: runtime.ErrUnknownEvent},
		{Code: "scribe.unknown_command", Err: runtime.ErrUnknownCommand},
		{Code: "scribe.node_unavailable", Err: runtime.ErrNodeUnavailable},
		{Code: "scribe.node_fenced", Err: runtime.ErrNodeFenced},
		{Code: "scribe.idempotency_key_reused", Err: runtime.ErrIdempotencyKeyReused},
		{Code: "scribe.conflict", Err: tagconsistency.ErrConflict},
		{Code: "scribe.invalid_command", Err: tagconsistency.ErrInvalidCommand},
		{Code: "scribe.no_key_store", Err: runtime.ErrNoKeyStore},
		{Code: "scribe.subject_erased", Err: erasure.ErrSubjectErased},
		{Code: "scribe.key_missing", Err: erasure.ErrKeyMissing},
		{Code: "scribe.key_store_unavailable", Err: erasure.ErrKeyStoreUnavailable},
		{Code: "scribe.erasure_corrupt", Err: erasure.ErrCorrupt},
		{Code: "scribe.erasure_invalid_argument", Err: erasure.ErrInvalidArgument},
		{Code: "scribe.deadline_exceeded", Err: context.DeadlineExceeded},
		{Code: "scribe.canceled", Err: context.Canceled},
		{Code: codeNotOwner, Err: errNotOwner},
	}
}

var errNotOwner = errors.New("cluster: member does not host the stream")

func (c *clusterNode) encodeError(err error) *clusterpb.Error {
	e := &clusterpb.Error{Message: err.Error()}
	for _, ec := range c.codes {
		if errors.Is(err, ec.Err) {
			e.Codes = append(e.Codes, ec.Code)
		}
	}
	return e
}

func (c *clusterNode) decodeError(e *clusterpb.Error, member string) error {
	re := &RemoteError{Member: member, Message: e.Message, Codes: e.Codes}
	for _, code := range e.Codes {
		if rebuild := c.rebuild[code]; rebuild != nil {
			re.sentinels = append(re.sentinels, rebuild(e.Message))
		} else if s := c.byCode[code]; s != nil {
			re.sentinels = append(re.sentinels, s)
		}
	}
	if re.Message == "" {
		re.Message = "cluster: member " + member + " failed with codes " + strings.Join(e.Codes, ", ")
	}
	return re
}

func hasCode(e *clusterpb.Error, code string) bool {
	for _, c := range e.Codes {
		if c == code {
			return true
		}
	}
	return false
}

func streamFromPB(s *clusterpb.Stream) journal.StreamID {
	if s == nil {
		return journal.StreamID{}.Normalize()
	}
	return journal.StreamID{Partition: s.Partition, Tag: journal.Tag(s.Tag)}.Normalize()
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func metadataToPB(m journal.Metadata) *clusterpb.Metadata {
	return &clusterpb.Metadata{
		CorrelationId:      m.CorrelationID,
		CausationId:        m.CausationID,
		UserId:             m.UserID,
		IdempotencyKey:     m.IdempotencyKey,
		Scopes:             m.Scopes,
		Partition:          m.Partition,
		CreatedAtUnixNanos: unixNanos(m.CreatedAt),
		TraceParent:        m.TraceParent,
		TraceState:         m.TraceState,
		CommandHash:        m.CommandHash,
	}
}

func metadataFromPB(m *clusterpb.Metadata) journal.Metadata {
	if m == nil {
		return journal.Metadata{}
	}
	return journal.Metadata{
		CorrelationID:  m.CorrelationId,
		CausationID:    m.CausationId,
		UserID:         m.UserId,
		IdempotencyKey: m.IdempotencyKey,
		Scopes:         m.Scopes,
		Partition:      m.Partition,
		CreatedAt:      fromUnixNanos(m.CreatedAtUnixNanos),
		TraceParent:    m.TraceParent,
		TraceState:     m.TraceState,
		CommandHash:    m.CommandHash,
	}
}

func recordsToPB(recs []journal.Record) []*clusterpb.Record {
	if len(recs) == 0 {
		return nil
	}
	out := make([]*clusterpb.Record, len(recs))
	for i := range recs {
		r := &recs[i]
		pr := &clusterpb.Record{
			Id:                  r.ID[:],
			Type:                r.Type,
			SchemaVersion:       int32(r.SchemaVersion),
			Data:                r.Data,
			Metadata:            metadataToPB(r.Metadata),
			Commit:              r.Position.Commit,
			Seq:                 r.Position.Seq,
			RecordedAtUnixNanos: unixNanos(r.RecordedAt),
		}
		for _, t := range r.Tags {
			pr.Tags = append(pr.Tags, string(t))
		}
		for _, l := range r.Links {
			pr.Links = append(pr.Links, &clusterpb.StreamLink{Tag: string(l.Tag), Version: l.Version, PrevHash: l.PrevHash[:], Hash: l.Hash[:]})
		}
		out[i] = pr
	}
	return out
}

func recordsFromPB(prs []*clusterpb.Record) []journal.Record {
	if len(prs) == 0 {
		return nil
	}
	out := make([]journal.Record, len(prs))
	for i, pr := range prs {
		r := &out[i]
		r.ID, _ = uuid.FromBytes(pr.Id)
		r.Type = pr.Type
		r.SchemaVersion = int(pr.SchemaVersion)
		r.Data = pr.Data
		r.Metadata = metadataFromPB(pr.Metadata)
		r.Position = journal.Position{Commit: pr.Commit, Seq: pr.Seq}
		r.RecordedAt = fromUnixNanos(pr.RecordedAtUnixNanos)
		for _, t := range pr.Tags {
			r.Tags = append(r.Tags, journal.Tag(t))
		}
		for _, l := range pr.Links {
			sl := journal.StreamLink{Tag: journal.Tag(l.Tag), Version: l.Version}
			copy(sl.PrevHash[:], l.PrevHash)
			copy(sl.Hash[:], l.Hash)
			r.Links = append(r.Links, sl)
		}
	}
	return out
}
