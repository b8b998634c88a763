package journal

import (
	"context"
	"errors"
)

// errorTypes names the sentinels for ErrorType, most specific first (an
// error may match several: an unknown outcome is usually also unavailable).
var errorTypes = []struct {
	err  error
	name string
}{
	{ErrConfiguration, "configuration"},
	{ErrOutcomeUnknown, "outcome_unknown"},
	{ErrNodeSuperseded, "node_superseded"},
	{ErrVersionMismatch, "version_mismatch"},
	{ErrAppendConditionFailed, "append_condition_failed"},
	{ErrSessionExpired, "session_expired"},
	{ErrInvalidSession, "invalid_session"},
	{ErrStoreNotOpen, "store_not_open"},
	{ErrOpenTimeout, "open_timeout"},
	{ErrInvalidEvent, "invalid_event"},
	{ErrDuplicateMismatch, "duplicate_mismatch"},
	{ErrInvalidQuery, "invalid_query"},
	{ErrNotFound, "not_found"},
	{ErrArchived, "archived"},
	{ErrStreamRetired, "stream_retired"},
	{ErrSnapshotRequired, "snapshot_required"},
	{ErrUnavailable, "unavailable"},
	{context.DeadlineExceeded, "deadline_exceeded"},
	{context.Canceled, "canceled"},
}

// ErrorType returns the OpenTelemetry error.type of a failed journal call:
// the snake-case name of the first of this package's sentinels err matches
// ("version_mismatch", "session_expired", "unavailable", …; an unknown
// outcome is "outcome_unknown"), "deadline_exceeded" or "canceled" for a
// context's error, "_OTHER" for anything else, and "" for nil. The set of
// values is small and stable, as metric attributes need.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	for _, t := range errorTypes {
		if errors.Is(err, t.err) {
			return t.name
		}
	}
	return "_OTHER"
}
