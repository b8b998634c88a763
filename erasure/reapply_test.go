package erasure_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// TestReapplyRecorded: a key store that never saw an erasure the journal
// records (restored from an older backup) has the subject's key; a dry run
// names the subject and changes nothing; ReapplyRecorded erases it
// (complete, key refused, by from the record) and leaves the other subject
// and the journal alone; a second run finds nothing to do.
func TestReapplyRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := memory.New()
	current := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	restored := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	for _, ks := range []erasure.KeyStore{current, restored} {
		for _, s := range []string{"c-1", "c-2"} {
			_, err := ks.DataKey(ctx, s)
			require.NoError(t, err)
		}
	}
	_, err := erasure.Erase(ctx, erasure.EraseParams{Journal: j, KeyStore: current, Subject: "c-1", By: "dpo-7"})
	require.NoError(t, err)
	head, err := j.Head(ctx)
	require.NoError(t, err)

	planned, err := erasure.ReapplyRecorded(ctx, erasure.ReapplyParams{Journal: j, KeyStore: restored, DryRun: true})
	require.NoError(t, err)
	require.Len(t, planned, 1)
	require.Equal(t, "c-1", planned[0].Subject)
	require.Equal(t, erasure.NotErased, planned[0].State)
	look, err := restored.Lookup(ctx, []string{"c-1"})
	require.NoError(t, err)
	require.Contains(t, look.Keys, "c-1", "a dry run changes nothing")

	done, err := erasure.ReapplyRecorded(ctx, erasure.ReapplyParams{Journal: j, KeyStore: restored})
	require.NoError(t, err)
	require.Len(t, done, 1)
	require.Equal(t, "c-1", done[0].Subject)
	require.Equal(t, "dpo-7", done[0].By)
	require.Equal(t, erasure.ErasureComplete, done[0].State)
	look, err = restored.Lookup(ctx, []string{"c-1", "c-2"})
	require.NoError(t, err)
	require.NotContains(t, look.Keys, "c-1")
	require.Contains(t, look.Erased, "c-1")
	require.Contains(t, look.Keys, "c-2", "a subject without a record keeps its key")
	_, err = restored.DataKey(ctx, "c-1")
	require.ErrorIs(t, err, erasure.ErrSubjectErased)
	after, err := j.Head(ctx)
	require.NoError(t, err)
	require.Equal(t, head, after, "the record is not appended again")

	again, err := erasure.ReapplyRecorded(ctx, erasure.ReapplyParams{Journal: j, KeyStore: restored})
	require.NoError(t, err)
	require.Empty(t, again)
}

// TestReapplyStoppedMidwayCompletes: a re-apply stopped after its first
// step (BeginErasure on the restored key store, dated now, while the
// journal's record holds the original time) is completed by
// CompletePending: the record already there counts as appended, not as a
// mismatching duplicate, and nothing is appended.
func TestReapplyStoppedMidwayCompletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := memory.New()
	current := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	_, err := erasure.Erase(ctx, erasure.EraseParams{Journal: j, KeyStore: current, Subject: "c-1", By: "dpo-7"})
	require.NoError(t, err)
	head, err := j.Head(ctx)
	require.NoError(t, err)

	restored := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	_, err = restored.DataKey(ctx, "c-1")
	require.NoError(t, err)
	_, err = restored.BeginErasure(ctx, "c-1", "dpo-7") // the re-apply's first step; then it stops
	require.NoError(t, err)
	done, err := erasure.CompletePending(ctx, erasure.CompleteParams{Journal: j, KeyStore: restored})
	require.NoError(t, err)
	require.Len(t, done, 1)
	require.Equal(t, erasure.ErasureComplete, done[0].State)
	after, err := j.Head(ctx)
	require.NoError(t, err)
	require.Equal(t, head, after)

	// A record of another subject under the same ID never counts: an
	// event that is not an erasure record still fails the append.
	_, err = j.Append(ctx, []journal.Event{{ID: erasure.RecordID("c-2"), Type: "Other", SchemaVersion: 1, Data: []byte(`{}`),
		Metadata: journal.Metadata{Partition: journal.DefaultPartition}}}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = restored.BeginErasure(ctx, "c-2", "dpo-8")
	require.NoError(t, err)
	_, err = erasure.CompletePending(ctx, erasure.CompleteParams{Journal: j, KeyStore: restored})
	require.ErrorIs(t, err, journal.ErrDuplicateMismatch)
}
