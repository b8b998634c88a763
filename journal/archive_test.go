package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// cutJournal is a memory journal whose stream has a cut: ReadStream below it
// fails as an archiving backend's does, ReadStreamWithArchive reads it all,
// and TagSummary reports the checkpoint.
type cutJournal struct {
	*memory.Journal
	cut journal.Checkpoint
}

func (c *cutJournal) ReadStream(ctx context.Context, s journal.StreamID, from uint64, limit int) iter.Seq2[journal.Record, error] {
	if from <= c.cut.Version {
		return func(yield func(journal.Record, error) bool) {
			yield(journal.Record{}, &journal.ArchivedError{Stream: s, CutVersion: c.cut.Version, CutPosition: c.cut.Position, FromVersion: from})
		}
	}
	return c.Journal.ReadStream(ctx, s, from, limit)
}

func (c *cutJournal) ReadStreamWithArchive(ctx context.Context, s journal.StreamID, from uint64, limit int) iter.Seq2[journal.Record, error] {
	return c.Journal.ReadStream(ctx, s, from, limit)
}

func (c *cutJournal) TagSummary(ctx context.Context, s journal.StreamID) (journal.TagSummary, error) {
	sum, err := c.Journal.TagSummary(ctx, s)
	sum.Cut = c.cut
	return sum, err
}

// cutAt appends n events to stream "s:1" and returns a journal cut at
// version cut, and the records.
func cutAt(t *testing.T, n, cut int) (*cutJournal, []journal.Record) {
	t.Helper()
	m := memory.New()
	var recs []journal.Record
	for i := range n {
		res, err := m.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "T", Tags: []journal.Tag{"s:1"}, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}, journal.AppendOptions{})
		require.NoError(t, err)
		recs = append(recs, res.Records...)
	}
	c := &cutJournal{Journal: m}
	if cut > 0 {
		r := recs[cut-1]
		c.cut = journal.Checkpoint{Version: uint64(cut), Hash: r.Links[0].Hash, Position: r.Position}
	}
	return c, recs
}

// VerifyStream starts at the checkpoint; VerifyArchive checks the archived
// part ends exactly there; a checkpoint whose hash or position does not match
// the events is reported, as is a stream archived whole whose head is not the
// checkpoint.
func TestVerifyFromCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := journal.Stream("s:1")
	c, recs := cutAt(t, 10, 6)
	n, err := journal.VerifyStream(ctx, c, s)
	require.NoError(t, err)
	require.Equal(t, uint64(4), n)
	n, err = journal.VerifyArchive(ctx, c, s, c.cut)
	require.NoError(t, err)
	require.Equal(t, uint64(6), n)

	wrong := c.cut
	wrong.Hash = recs[4].Links[0].Hash
	c.cut = wrong
	_, err = journal.VerifyStream(ctx, c, s)
	var ce *journal.ChainError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(7), ce.Version, "version 7's previous hash is not the checkpoint's")
	_, err = journal.VerifyArchive(ctx, c, s, wrong)
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Reason, "but the checkpoint records hash")

	short := journal.Checkpoint{Version: 12, Hash: recs[9].Links[0].Hash, Position: recs[9].Position}
	_, err = journal.VerifyArchive(ctx, c, s, short)
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Reason, "archived events were removed")

	whole, recs := cutAt(t, 3, 3)
	n, err = journal.VerifyStream(ctx, whole, s)
	require.NoError(t, err)
	require.Zero(t, n)
	whole.cut.Hash = recs[1].Links[0].Hash
	_, err = journal.VerifyStream(ctx, whole, s)
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Reason, "archived whole at version 3")

	none, _ := cutAt(t, 3, 0)
	n, err = journal.VerifyArchive(ctx, none, s, none.cut)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestRetentionErrors(t *testing.T) {
	t.Parallel()
	s := journal.Stream("account:1")
	ae := &journal.ArchivedError{Stream: s, CutVersion: 9, FromVersion: 3}
	require.ErrorIs(t, fmt.Errorf("read: %w", ae), journal.ErrArchived)
	require.False(t, errors.Is(ae, journal.ErrStreamRetired))
	require.Contains(t, ae.Error(), "read from version 10 on")
	ae.Retired = true
	require.ErrorIs(t, ae, journal.ErrStreamRetired)
	re := &journal.StreamRetiredError{Stream: s, Version: 9}
	require.ErrorIs(t, re, journal.ErrStreamRetired)
	require.Equal(t, "stream_retired", journal.ErrorType(re))
	require.Equal(t, "archived", journal.ErrorType(&journal.ArchivedError{}))
	require.Equal(t, "snapshot_required", journal.ErrorType(fmt.Errorf("x: %w", journal.ErrSnapshotRequired)))
}
