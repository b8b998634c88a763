package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// TestStaleHeadOfAnExpectedStreamIsFenced: journal one remembers stream B at
// version 1 from its own append; journal two (another process) then appends
// to B. An append through journal one that writes only to A but expects B at
// version 1 must be rejected: the database, not journal one's memory, decides
// whether the expectation holds, even when the append goes out in one round
// trip.
func TestStaleHeadOfAnExpectedStreamIsFenced(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	other, err := postgres.NewJournal(f.pool, f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })

	_, err = f.journal.Append(ctx, []journal.Event{event("Opened", "a"), event("Opened", "b")}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = other.Append(ctx, []journal.Event{event("Changed", "b")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"b": 1}})
	require.NoError(t, err)

	_, err = f.journal.Append(ctx, []journal.Event{event("Changed", "a")},
		journal.AppendOptions{Expect: map[journal.Tag]uint64{"a": 1, "b": 1}})
	require.ErrorIs(t, err, journal.ErrVersionMismatch, "b is at version 2 in the database")

	n := 0
	for _, err := range f.journal.ReadStream(ctx, journal.Stream("a"), 1, 0) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 1, n, "nothing was written to a")
}
