package pgadmin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/snapshots"
)

// appendN appends n single-tag events to tag, one append each, expecting the
// stream's version, and returns the records.
func appendN(t *testing.T, j journal.Journal, tag journal.Tag, n int) []journal.Record {
	t.Helper()
	ctx := t.Context()
	sum, err := j.TagSummary(ctx, journal.Stream(tag))
	require.NoError(t, err)
	v := sum.Version
	var out []journal.Record
	for i := range n {
		e := event("Changed", tag)
		e.Data = json.RawMessage(fmt.Sprintf(`{"n":%d}`, int(v)+i+1))
		res, err := j.Append(ctx, []journal.Event{e}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: v + uint64(i)}})
		require.NoError(t, err)
		out = append(out, res.Records...)
	}
	return out
}

// count counts the rows of a table of f's schema matching where.
func (f *fixture) count(t *testing.T, table, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+quote(f.cfg.Schema)+`.`+table+` WHERE `+where, args...).Scan(&n))
	return n
}

// keep returns a policy keeping the newest n events of group's streams.
func keep(group string, n uint64, nosnapshot bool) pgadmin.RetentionPolicy {
	return pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{group: {KeepLast: n, NoSnapshotCheck: nosnapshot}}}
}

// TestRetentionRefusesWithoutSnapshot: a policy that would cut an aggregate
// stream past its newest snapshot retires nothing and says which stream
// needs a snapshot; with a snapshot at or after the cut it retires.
func TestRetentionRefusesWithoutSnapshot(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	appendN(t, f.journal, "acct:1", 100)
	appendN(t, f.journal, "acct:2", 5)

	plan, err := f.admin.PlanArchive(ctx, keep("acct", 10, false))
	require.NoError(t, err)
	require.Len(t, plan.Streams, 1, "acct:2 has only 5 events: nothing to retire")
	require.Equal(t, uint64(90), plan.Streams[0].Target)
	require.Contains(t, plan.Streams[0].Refused, "no snapshot at or after version 90")

	_, err = f.admin.Archive(ctx, keep("acct", 10, false), pgadmin.ArchiveOptions{})
	require.ErrorIs(t, err, journal.ErrSnapshotRequired)
	var sr *pgadmin.SnapshotRequiredError
	require.ErrorAs(t, err, &sr)
	require.Equal(t, journal.Stream("acct:1"), sr.Streams[0].Stream)
	require.Contains(t, err.Error(), "default/acct:1 (cut 90 asked, newest snapshot 0)")
	require.Contains(t, err.Error(), "Nothing was retired")
	sum, err := f.journal.TagSummary(ctx, journal.Stream("acct:1"))
	require.NoError(t, err)
	require.True(t, sum.Cut.IsZero(), "nothing was retired")
	require.Equal(t, 100, f.count(t, "event_tags", "tag = 'acct:1'"))

	// A snapshot below the cut is not enough.
	require.NoError(t, f.snapshots.Save(ctx, snapshots.Snapshot{Stream: journal.Stream("acct:1"), Version: 50, SchemaVersion: 1, State: []byte(`{}`)}))
	_, err = f.admin.Archive(ctx, keep("acct", 10, false), pgadmin.ArchiveOptions{})
	require.ErrorIs(t, err, journal.ErrSnapshotRequired)
	require.Contains(t, err.Error(), "newest snapshot 50")

	// Up to the snapshot is fine, and so is a group marked nosnapshot.
	prog, err := f.admin.Archive(ctx, pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{"acct": {BeforeSnapshot: true}}}, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(50), prog.Versions)
	sum, err = f.journal.TagSummary(ctx, journal.Stream("acct:1"))
	require.NoError(t, err)
	require.Equal(t, uint64(50), sum.Cut.Version)

	prog, err = f.admin.Archive(ctx, keep("acct", 10, true), pgadmin.ArchiveOptions{BatchSize: 7})
	require.NoError(t, err)
	require.Equal(t, uint64(40), prog.Versions)
	require.Equal(t, 6, prog.Batches, "40 versions in batches of at most 7")
	n, err := journal.VerifyStream(ctx, f.journal, journal.Stream("acct:1"))
	require.NoError(t, err)
	require.Equal(t, uint64(10), n)

	_, err = pgadmin.ParseRetentionRule("snapshot,nosnapshot")
	require.Error(t, err)
	r, err := pgadmin.ParseRetentionRule("age:720h,nosnapshot")
	require.NoError(t, err)
	require.Equal(t, "age:720h0m0s,nosnapshot", r.String())
}

// TestReadBeforeCutIsTyped: ReadStream from a version at or below the cut
// fails with an *journal.ArchivedError naming the cut; from the version after
// it, it reads the hot events; ReadStreamWithArchive reads everything.
func TestReadBeforeCutIsTyped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	recs := appendN(t, f.journal, "acct:1", 30)
	_, err := f.admin.Archive(ctx, keep("acct", 10, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)

	for _, from := range []uint64{0, 1, 20} {
		var got error
		for _, err := range f.journal.ReadStream(ctx, journal.Stream("acct:1"), from, 0) {
			got = err
		}
		require.ErrorIs(t, got, journal.ErrArchived, "from %d", from)
		var ae *journal.ArchivedError
		require.True(t, errors.As(got, &ae))
		require.Equal(t, uint64(20), ae.CutVersion)
		require.Equal(t, recs[19].Position, ae.CutPosition)
		require.Contains(t, got.Error(), "read from version 21 on")
	}
	var hot []journal.Record
	for r, err := range f.journal.ReadStream(ctx, journal.Stream("acct:1"), 21, 0) {
		require.NoError(t, err)
		hot = append(hot, r)
	}
	require.Equal(t, recs[20:], hot)

	var all []journal.Record
	for r, err := range f.journal.ReadStreamWithArchive(ctx, journal.Stream("acct:1"), 1, 0) {
		require.NoError(t, err)
		all = append(all, r)
	}
	require.Equal(t, recs, all)
	var some []journal.Record
	for r, err := range f.journal.ReadStreamWithArchive(ctx, journal.Stream("acct:1"), 15, 10) {
		require.NoError(t, err)
		some = append(some, r)
	}
	require.Equal(t, recs[14:24], some, "across the cut, with a limit")

	// A stream read past its end reports nothing, not an archive error.
	for _, err := range f.journal.ReadStream(ctx, journal.Stream("acct:1"), 31, 0) {
		require.NoError(t, err)
	}
}

// TestSharedEventLeavesWithItsLastChain: an event linked to two chains stays
// in the hot events table, readable through the other stream, until both
// streams' cuts passed it.
func TestSharedEventLeavesWithItsLastChain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	_, err := f.journal.Append(ctx, []journal.Event{event("Opened", "a:x"), event("Opened", "b:y")}, journal.AppendOptions{})
	require.NoError(t, err)
	shared, err := f.journal.Append(ctx, []journal.Event{event("Moved", "a:x", "b:y")}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = f.journal.Append(ctx, []journal.Event{event("Changed", "a:x"), event("Changed", "b:y")}, journal.AppendOptions{})
	require.NoError(t, err)
	id := shared.Records[0].ID

	_, err = f.admin.Archive(ctx, keep("a", 1, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, f.count(t, "events", "id = $1", id), "b:y still links it")
	require.Equal(t, 0, f.count(t, "events_archive", "id = $1", id))
	require.Equal(t, 1, f.count(t, "events_archive", "type = 'Opened'"), "a:x's own old event left")
	var ys []journal.Record
	for r, err := range f.journal.ReadStream(ctx, journal.Stream("b:y"), 1, 0) {
		require.NoError(t, err)
		ys = append(ys, r)
	}
	require.Len(t, ys, 3)
	require.Equal(t, id, ys[1].ID)

	_, err = f.admin.Archive(ctx, keep("b", 1, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, 0, f.count(t, "events", "id = $1", id))
	require.Equal(t, 1, f.count(t, "events_archive", "id = $1", id), "moved once both cuts passed it")
	for _, tag := range []journal.Tag{"a:x", "b:y"} {
		n, err := journal.VerifyStream(ctx, f.journal, journal.Stream(tag))
		require.NoError(t, err)
		require.Equal(t, uint64(1), n)
		sum, err := f.journal.TagSummary(ctx, journal.Stream(tag))
		require.NoError(t, err)
		n, err = journal.VerifyArchive(ctx, f.journal, journal.Stream(tag), sum.Cut)
		require.NoError(t, err)
		require.Equal(t, uint64(2), n)
	}
}

// TestRetiredStreamRefusesAppends: after RetireStream every append naming
// the stream fails with ErrStreamRetired, through a warm and a cold journal
// (direct and read attempts), whatever the append expects; the version is
// never reused; an archive run retires the stream's events whole, and the
// stream still verifies.
func TestRetiredStreamRefusesAppends(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	appendN(t, f.journal, "acct:closed", 5) // the journal remembers the head: a direct attempt next
	_, err := f.journal.Append(ctx, []journal.Event{event("Opened", "acct:open")}, journal.AppendOptions{})
	require.NoError(t, err)

	sum, err := f.admin.RetireStream(ctx, journal.Stream("acct:closed"))
	require.NoError(t, err)
	require.True(t, sum.Retired)
	require.Equal(t, uint64(5), sum.Version)

	cold, err := postgres.NewJournal(f.pool, f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cold.Close() })
	for name, j := range map[string]*postgres.Journal{"warm": f.journal, "cold": cold} {
		for _, opts := range []journal.AppendOptions{
			{Expect: map[journal.Tag]uint64{"acct:closed": 5}},
			{},
		} {
			_, err := j.Append(ctx, []journal.Event{event("Changed", "acct:closed")}, opts)
			require.ErrorIs(t, err, journal.ErrStreamRetired, name)
			var re *journal.StreamRetiredError
			require.ErrorAs(t, err, &re)
			require.Equal(t, uint64(5), re.Version)
			require.Contains(t, err.Error(), "a retry cannot succeed")
		}
		_, err := j.Append(ctx, []journal.Event{event("Moved", "acct:closed", "acct:open")}, journal.AppendOptions{})
		require.ErrorIs(t, err, journal.ErrStreamRetired, "%s: an event naming it with another tag", name)
		_, err = j.Append(ctx, []journal.Event{event("Changed", "acct:open")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"acct:closed": 5}})
		require.ErrorIs(t, err, journal.ErrStreamRetired, "%s: an expectation names it", name)
	}
	_, err = f.journal.Append(ctx, []journal.Event{event("Changed", "acct:open")}, journal.AppendOptions{})
	require.NoError(t, err, "other streams go on")
	require.Equal(t, 0, f.count(t, "event_tags", "tag = 'acct:closed' AND version > 5"), "version 6 was never written")

	_, err = f.admin.RetireStream(ctx, journal.Stream("acct:closed"))
	require.NoError(t, err, "retiring again does nothing")
	_, err = f.admin.RetireStream(ctx, journal.Stream("acct:never"))
	require.ErrorIs(t, err, journal.ErrNotFound)

	// Any archive run retires a tombstoned stream whole, without a snapshot.
	prog, err := f.admin.Archive(ctx, pgadmin.RetentionPolicy{}, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(5), prog.Versions)
	require.Equal(t, 0, f.count(t, "events", "'acct:closed' = ANY(tags)"))
	sum, err = f.journal.TagSummary(ctx, journal.Stream("acct:closed"))
	require.NoError(t, err)
	require.Equal(t, uint64(5), sum.Cut.Version)
	require.Equal(t, sum.HeadHash, sum.Cut.Hash)
	n, err := journal.VerifyStream(ctx, f.journal, journal.Stream("acct:closed"))
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = cold.Append(ctx, []journal.Event{event("Changed", "acct:closed")}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrStreamRetired, "still refused once archived")
	var readErr error
	for _, err := range f.journal.ReadStream(ctx, journal.Stream("acct:closed"), 1, 0) {
		readErr = err
	}
	require.ErrorIs(t, readErr, journal.ErrArchived)
	require.ErrorIs(t, readErr, journal.ErrStreamRetired, "a recovery of a retired stream says so")
	require.Contains(t, readErr.Error(), "is retired (tombstone)")
}

// TestRetentionOfUntaggedChains: the untagged events' chains (group
// journal.UntaggedGroup) retire by their own rule, without snapshots; their
// events leave the hot table and the chains verify from their checkpoints
// and against them.
func TestRetentionOfUntaggedChains(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	for range 3 {
		_, err := f.journal.Append(ctx, []journal.Event{event("Tick"), event("Tick"), event("Tock")}, journal.AppendOptions{})
		require.NoError(t, err)
	}
	plan, err := f.admin.PlanArchive(ctx, keep(journal.UntaggedGroup, 1, false))
	require.NoError(t, err)
	require.Len(t, plan.Streams, 2)
	require.Empty(t, plan.Refused(), "untagged chains need no snapshot")
	prog, err := f.admin.Archive(ctx, keep(journal.UntaggedGroup, 1, false), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(5+2), prog.Versions)
	require.Equal(t, uint64(7), prog.Events)
	require.Equal(t, 2, f.count(t, "events", "true"))
	for tag, hot := range map[journal.Tag]uint64{journal.UntaggedChain("Tick"): 1, journal.UntaggedChain("Tock"): 1} {
		stream := journal.Stream(tag)
		n, err := journal.VerifyStream(ctx, f.journal, stream)
		require.NoError(t, err)
		require.Equal(t, hot, n)
		sum, err := f.journal.TagSummary(ctx, stream)
		require.NoError(t, err)
		_, err = journal.VerifyArchive(ctx, f.journal, stream, sum.Cut)
		require.NoError(t, err)
	}
}

// TestArchiveWhileAppending: archive runs (small batches, streams shared by
// two-tag events) race appends to the same streams: every append succeeds
// (an append and a batch take the streams' locks in one order, so neither
// deadlocks), each stream's versions are stored exactly once, hot or
// archived, and every chain verifies from its checkpoint and against it.
func TestArchiveWhileAppending(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	tags := []journal.Tag{"p:1", "p:2", "p:3"}
	const perWriter = 60
	errs := make(chan error, len(tags))
	for i := range tags {
		go func() {
			for range perWriter {
				// Each event is in two streams, in either order of locks.
				if _, err := f.journal.Append(ctx, []journal.Event{event("Moved", tags[i], tags[(i+1)%len(tags)])}, journal.AppendOptions{}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	archived := uint64(0)
	finished := 0
	for finished < len(tags) {
		select {
		case err := <-errs:
			require.NoError(t, err)
			finished++
		default:
			prog, err := f.admin.Archive(ctx, keep("p", 5, true), pgadmin.ArchiveOptions{BatchSize: 3})
			require.NoError(t, err)
			archived += prog.Versions
		}
	}
	prog, err := f.admin.Archive(ctx, keep("p", 5, true), pgadmin.ArchiveOptions{BatchSize: 3})
	require.NoError(t, err)
	archived += prog.Versions
	t.Logf("%d stream versions archived while and after %d appends ran", archived, len(tags)*perWriter)
	for _, tag := range tags {
		stream := journal.Stream(tag)
		sum, err := f.journal.TagSummary(ctx, stream)
		require.NoError(t, err)
		require.Equal(t, uint64(2*perWriter), sum.Version)
		require.Equal(t, sum.Version-5, sum.Cut.Version)
		n, err := journal.VerifyStream(ctx, f.journal, stream)
		require.NoError(t, err)
		require.Equal(t, uint64(5), n)
		a, err := journal.VerifyArchive(ctx, f.journal, stream, sum.Cut)
		require.NoError(t, err)
		require.Equal(t, sum.Cut.Version, a)
		require.Equal(t, int(sum.Version), f.count(t, "event_tags", "tag = $1", string(tag))+f.count(t, "event_tags_archive", "tag = $1", string(tag)))
	}
	require.Equal(t, len(tags)*perWriter, f.count(t, "events", "true")+f.count(t, "events_archive", "true"))
	require.Equal(t, 0, f.count(t, "events e", "EXISTS (SELECT 1 FROM "+quote(f.cfg.Schema)+".events_archive a WHERE a.id = e.id)"), "no event in both tables")
}

// TestArchiveWaitsForProjections: a projection whose checkpoint is behind
// some events keeps those events in the feed, and their tag index rows
// with the streams' cuts (an unsliced projection may read them through
// the tag index); once it moves on, the next archive run moves them.
func TestArchiveWaitsForProjections(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	recs := appendN(t, f.journal, "acct:1", 20)
	s := quote(f.cfg.Schema)
	_, err := f.pool.Exec(ctx, `INSERT INTO `+s+`.projections (name, version, commit_xid, seq) VALUES ('balances', 1, $1, $2)`,
		int64(recs[9].Position.Commit), int64(recs[9].Position.Seq))
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO `+s+`.projections (name, version, commit_xid, seq) VALUES ('old', 1, 0, 0), ('old', 2, $1, $2)`,
		int64(recs[19].Position.Commit), int64(recs[19].Position.Seq))
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO `+s+`.projection_active (name, version) VALUES ('old', 2)`)
	require.NoError(t, err)

	prog, err := f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(10), prog.Versions, "the stream's cut moves to 10, where 'balances' is, not to 15")
	require.Equal(t, uint64(10), prog.Events, "only the events 'balances' has applied leave the feed; the superseded 'old' version holds nothing")
	var feed []journal.Record
	for r, err := range f.journal.ReadAll(ctx, recs[9].Position, 0) {
		require.NoError(t, err)
		feed = append(feed, r)
	}
	require.Equal(t, recs[10:], feed, "the projection still finds what it has not applied")

	_, err = f.pool.Exec(ctx, `UPDATE `+s+`.projections SET commit_xid = $1, seq = $2 WHERE name = 'balances'`,
		int64(recs[19].Position.Commit), int64(recs[19].Position.Seq))
	require.NoError(t, err)
	prog, err = f.admin.Archive(ctx, keep("acct", 5, true), pgadmin.ArchiveOptions{BatchSize: 2})
	require.NoError(t, err)
	require.Equal(t, uint64(5), prog.Versions, "the cut moves on to 15")
	require.Equal(t, uint64(5), prog.Events, "with the events below it")
	require.Equal(t, 5, f.count(t, "events", "true"))
	n, err := journal.VerifyStream(ctx, f.journal, journal.Stream("acct:1"))
	require.NoError(t, err)
	require.Equal(t, uint64(5), n)
}

// TestRetentionByAge: age:DURATION retires the prefix of each stream recorded
// before Now minus the duration, by the events' RecordedAt.
func TestRetentionByAge(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := t0
	f := setup(t, func(c *postgres.Config) {
		c.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	ctx := t.Context()
	for i := range 10 { // version i+1 recorded at t0 + i hours
		mu.Lock()
		now = t0.Add(time.Duration(i) * time.Hour)
		mu.Unlock()
		appendN(t, f.journal, "log:1", 1)
	}
	appendN(t, f.journal, "log:2", 1) // recorded at t0+9h: young

	policy := pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{"log": {KeepFor: 3 * time.Hour, NoSnapshotCheck: true}}, Now: t0.Add(9 * time.Hour)}
	plan, err := f.admin.PlanArchive(ctx, policy)
	require.NoError(t, err)
	require.Len(t, plan.Streams, 1)
	require.Equal(t, uint64(6), plan.Streams[0].Target, "versions 1-6 were recorded before t0+6h")
	require.Equal(t, "age:3h0m0s,nosnapshot", plan.Streams[0].Rule)
	_, err = f.admin.Archive(ctx, policy, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	sum, err := f.journal.TagSummary(ctx, journal.Stream("log:1"))
	require.NoError(t, err)
	require.Equal(t, uint64(6), sum.Cut.Version)
	require.Equal(t, t0, sum.FirstRecordedAt, "the summary still knows the archived first event's time")

	policy.Now = t0.Add(100 * time.Hour)
	plan, err = f.admin.PlanArchive(ctx, policy)
	require.NoError(t, err)
	require.Len(t, plan.Streams, 2, "everything is old now")
	require.Equal(t, uint64(10), plan.Streams[0].Target)
}

// TestSchemaWithoutRetentionIsNotOpen: on a schema whose retention migration
// is missing, reads that need the cut fail with ErrStoreNotOpen saying to
// migrate, not with a bare SQL error.
func TestSchemaWithoutRetentionIsNotOpen(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	_, err := f.pool.Exec(ctx, `ALTER TABLE `+quote(f.cfg.Schema)+`.streams DROP COLUMN cut_version`)
	require.NoError(t, err)
	_, err = f.journal.TagSummary(ctx, journal.Stream("acct:1"))
	require.ErrorIs(t, err, journal.ErrStoreNotOpen)
	require.Contains(t, err.Error(), "scribe migrate up")
}

// TestArchivedEventIDsStayTaken: an append of events that were archived is
// answered as a duplicate with the original records (through a journal that
// remembers the stream's head, a direct attempt, and a cold one), a partial
// overlap fails with ErrDuplicateMismatch, and ReadEvent finds an archived
// event.
func TestArchivedEventIDsStayTaken(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	evs := []journal.Event{event("Changed", "acct:1"), event("Changed", "acct:1")}
	first, err := f.journal.Append(ctx, evs, journal.AppendOptions{})
	require.NoError(t, err)
	appendN(t, f.journal, "acct:1", 3)
	_, err = f.admin.Archive(ctx, keep("acct", 1, true), pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	require.Equal(t, 0, f.count(t, "events", "id = $1", evs[0].ID))

	cold, err := postgres.NewJournal(f.pool, f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cold.Close() })
	for name, j := range map[string]*postgres.Journal{"warm": f.journal, "cold": cold} {
		res, err := j.Append(ctx, evs, journal.AppendOptions{})
		require.NoError(t, err, name)
		require.True(t, res.Duplicate, name)
		require.Equal(t, first.Records, res.Records, name)
		_, err = j.Append(ctx, []journal.Event{evs[0], event("Changed", "acct:1")}, journal.AppendOptions{})
		require.ErrorIs(t, err, journal.ErrDuplicateMismatch, name)
	}
	sum, err := f.journal.TagSummary(ctx, journal.Stream("acct:1"))
	require.NoError(t, err)
	require.Equal(t, uint64(5), sum.Version, "nothing was appended")
	got, err := f.journal.ReadEvent(ctx, evs[1].ID)
	require.NoError(t, err)
	require.Equal(t, first.Records[1], got)
}
