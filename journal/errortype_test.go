package journal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// ErrorType names the sentinel a wrapped error matches, the most specific
// one first, and falls back to _OTHER.
func TestErrorType(t *testing.T) {
	t.Parallel()
	require.Equal(t, "", journal.ErrorType(nil))
	require.Equal(t, "version_mismatch", journal.ErrorType(fmt.Errorf("append: %w", journal.ErrVersionMismatch)))
	require.Equal(t, "outcome_unknown", journal.ErrorType(fmt.Errorf("%w: %w", journal.ErrUnavailable, journal.ErrOutcomeUnknown)))
	require.Equal(t, "deadline_exceeded", journal.ErrorType(fmt.Errorf("read: %w", context.DeadlineExceeded)))
	require.Equal(t, "_OTHER", journal.ErrorType(errors.New("disk on fire")))
}
