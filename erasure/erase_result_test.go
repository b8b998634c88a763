package erasure_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// Erase says whether the subject was known and where its record is, also
// on a repeat; an unknown subject is erased (blocked) but reported unknown.
func TestEraseReportsKnownAndPosition(t *testing.T) {
	ctx := t.Context()
	j := memory.New()
	ks := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	_, err := ks.DataKey(ctx, "ada")
	require.NoError(t, err)

	e, err := erasure.Erase(ctx, erasure.EraseParams{Journal: j, KeyStore: ks, Subject: "ada", By: "ticket-1"})
	require.NoError(t, err)
	require.True(t, e.Known)
	require.False(t, e.Repeat)
	require.NotEqual(t, journal.Position{}, e.Position)
	var recorded journal.Position
	for rec, err := range j.Read(ctx, erasure.RecordQuery(), journal.ReadOptions{}) {
		require.NoError(t, err)
		recorded = rec.Position
	}
	require.Equal(t, recorded, e.Position, "the position of the erasure record")

	again, err := erasure.Erase(ctx, erasure.EraseParams{Journal: j, KeyStore: ks, Subject: "ada", By: "ticket-2"})
	require.NoError(t, err)
	require.True(t, again.Repeat)
	require.True(t, again.Known)
	require.Equal(t, e.Position, again.Position)

	typo, err := erasure.Erase(ctx, erasure.EraseParams{Journal: j, KeyStore: ks, Subject: "adaa", By: "ticket-3"})
	require.NoError(t, err)
	require.False(t, typo.Known, "a subject with no key and no erasure is reported unknown")
	require.Equal(t, erasure.ErasureComplete, typo.State, "and blocked all the same")
}
