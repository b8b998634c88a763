package pgadmin_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// archivedPartition fills partition p of f with streams whose oldest events
// are archived: four account streams, a transfer between acct:0 and acct:1,
// an event of acct:2 also linked to ledger:x (its acct:2 tag row archived,
// the event hot while ledger:x holds it), and acct:3 retired behind a
// tombstone and archived whole.
func archivedPartition(t *testing.T, f *fixture, p string) {
	t.Helper()
	ctx := t.Context()
	depositAll(t, f, p, 4, 6)
	_, err := f.journal.Append(ctx, []journal.Event{inPartition(p, "Posted", "acct:2", "ledger:x")}, journal.AppendOptions{})
	require.NoError(t, err)
	depositAll(t, f, p, 3, 4)
	_, err = f.admin.RetireStream(ctx, journal.StreamID{Partition: p, Tag: "acct:3"})
	require.NoError(t, err)
	policy := keep("acct", 3, true)
	policy.Partition = p
	_, err = f.admin.Archive(ctx, policy, pgadmin.ArchiveOptions{BatchSize: 5})
	require.NoError(t, err)
}

// TestPartitionMoveCarriesArchivesAndTombstones moves a partition with
// archived events and a tombstoned stream there and back: every archived
// event stays archived, every stream keeps its cut (version and hash; the
// cut's position is the target's) and tombstone, each chain verifies across
// archive and hot events, a read below a cut is refused as on the source,
// the archive reader yields every version, and the retired stream still
// refuses appends.
func TestPartitionMoveCarriesArchivesAndTombstones(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	archivedPartition(t, a, "arch")
	want := holding(t, a, "arch")
	require.NotEmpty(t, want.Archived)
	require.True(t, want.Streams["acct:3"].Retired)
	require.Equal(t, want.Streams["acct:3"].Version, want.Streams["acct:3"].Cut, "the retired stream is archived whole")
	var heldHot int
	require.NoError(t, a.pool.QueryRow(ctx, `SELECT count(*) FROM `+quote(a.cfg.Schema)+`.event_tags_archive ta
		JOIN `+quote(a.cfg.Schema)+`.events e ON e.commit_xid = ta.commit_xid AND e.seq = ta.seq WHERE ta.partition = 'arch'`).Scan(&heldHot))
	require.Positive(t, heldHot, "an event is hot while one of its tag rows is archived")

	rep, err := pgadmin.MovePartition(ctx, moveSpec(a, b, "arch", "b"))
	require.NoError(t, err)
	require.EqualValues(t, len(want.Archived), rep.Archived)
	require.Equal(t, 1, rep.Tombstones)
	requireMoved(t, want, a, b, "arch", "b")

	acct0 := journal.StreamID{Partition: "arch", Tag: "acct:0"}
	for _, err := range b.journal.ReadStream(ctx, acct0, 1, 0) {
		require.ErrorIs(t, err, journal.ErrArchived, "a read below the cut is refused on the target too")
		break
	}
	n := 0
	for r, err := range b.journal.ReadStreamWithArchive(ctx, acct0, 1, 0) {
		require.NoError(t, err)
		n++
		require.EqualValues(t, n, r.Version("acct:0"))
	}
	require.EqualValues(t, want.Streams["acct:0"].Version, n)
	_, err = b.journal.Append(ctx, []journal.Event{inPartition("arch", "Deposited", "acct:3")}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrStreamRetired)
	var retired *journal.StreamRetiredError
	require.True(t, errors.As(err, &retired))

	// And back.
	rep, err = pgadmin.MovePartition(ctx, moveSpec(b, a, "arch", "a"))
	require.NoError(t, err)
	require.False(t, rep.Resumed)
	requireMoved(t, want, b, a, "arch", "a")
}

// TestPartitionMoveFollowsTheArchiverDuringTheMove runs the archiver and
// RetireStream on the source while the partition moves: after the fence
// (events the target copied hot are archived on the source, a stream is
// tombstoned) and again after the copy was verified (cuts move further):
// the streams step archives on the target what the source archived, and
// the switch, finding the source changed since, sends the move back to
// copy the streams again. The target ends as the source was at the switch.
func TestPartitionMoveFollowsTheArchiverDuringTheMove(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := setup(t), setup(t)
	depositAll(t, a, "arch", 4, 8)
	archive := func(keepLast uint64) {
		policy := keep("acct", keepLast, true)
		policy.Partition = "arch"
		_, err := a.admin.Archive(ctx, policy, pgadmin.ArchiveOptions{})
		require.NoError(t, err)
	}
	var atSwitch partitionCopy
	var steps []pgadmin.MoveStep
	verified := 0
	spec := moveSpec(a, b, "arch", "b")
	spec.Progress = func(p pgadmin.MoveProgress) {
		steps = append(steps, p.Step)
		switch p.Step {
		case pgadmin.MoveFence:
			_, err := a.admin.RetireStream(ctx, journal.StreamID{Partition: "arch", Tag: "acct:3"})
			require.NoError(t, err)
			archive(5)
		case pgadmin.MoveVerify:
			if verified++; verified == 1 {
				archive(2)
			}
		case pgadmin.MoveSwitch:
			atSwitch = holding(t, a, "arch")
		}
	}
	_, err := pgadmin.MovePartition(ctx, spec)
	require.NoError(t, err, "steps %v", steps)
	require.Equal(t, 2, verified, "the switch sent the move back once: %v", steps)
	require.True(t, atSwitch.Streams["acct:3"].Retired)
	require.EqualValues(t, 2, atSwitch.Streams["acct:0"].Version-atSwitch.Streams["acct:0"].Cut)
	requireMoved(t, atSwitch, a, b, "arch", "b")
}
