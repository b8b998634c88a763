package erasure_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

func TestSnapshotSealing(t *testing.T) {
	t.Parallel()
	a, err := erasure.NewDataKey()
	require.NoError(t, err)
	b, err := erasure.NewDataKey()
	require.NoError(t, err)
	stream := journal.Stream("campaign:spring")
	state := []byte(`{"names":["` + secretName + `"]}`)
	keys := map[string]erasure.DataKey{"a": a, "b": b}
	sealed, err := erasure.SealSnapshot(state, stream, 7, 1, []string{"b", "a", "b"}, keys)
	require.NoError(t, err)
	require.True(t, erasure.IsSealedSnapshot(sealed))
	require.NotContains(t, string(sealed), secretName)
	subs, err := erasure.SnapshotSubjects(sealed)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, subs)

	got, ok, err := erasure.OpenSnapshot(sealed, stream, 7, 1, erasure.Lookup{Keys: keys})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, state, got)

	// Any one subject erased: unusable, not an error.
	_, ok, err = erasure.OpenSnapshot(sealed, stream, 7, 1, erasure.Lookup{Keys: map[string]erasure.DataKey{"a": a}, Erased: map[string]erasure.Erasure{"b": {}}})
	require.NoError(t, err)
	require.False(t, ok)

	// Bound to its stream and version.
	_, _, err = erasure.OpenSnapshot(sealed, journal.Stream("campaign:autumn"), 7, 1, erasure.Lookup{Keys: keys})
	require.ErrorIs(t, err, erasure.ErrCorrupt)
	_, _, err = erasure.OpenSnapshot(sealed, stream, 8, 1, erasure.Lookup{Keys: keys})
	require.ErrorIs(t, err, erasure.ErrCorrupt)

	_, err = erasure.SealSnapshot(state, stream, 7, 1, []string{"a", "c"}, keys)
	require.ErrorIs(t, err, erasure.ErrKeyMissing)
}
