package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/snapshots"
)

// scribe snapshots drop deletes an aggregate's snapshots below a schema
// version, then all of them, leaving other aggregates' alone; an aggregate
// without snapshots fails and deletes nothing.
func TestSnapshotsDrop(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	save, count := snapshotRows(t, f)
	save("", "account:a", 10, 1)
	save("", "account:a", 20, 2)
	save("", "account:b", 10, 1)
	save("tenant-b", "account:c", 10, 1)
	save("", "accounts:x", 10, 1) // another group sharing the prefix
	save("", "transfer:t", 10, 1)

	res := f.scribe(t, "snapshots", "drop")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "-aggregate")

	res = f.scribe(t, "snapshots", "drop", "-aggregate", "account", "-below-version", "2", "-partition", "default")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, `deleted 2 of 3 snapshots of aggregate "account" (the snapshots below state schema version 2) from 2 streams`)
	require.Equal(t, 4, count())

	res = f.scribe(t, "-json", "snapshots", "drop", "-aggregate", "account")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.EqualValues(t, 2, rows[0]["deleted"], "the rest, in every partition")
	require.Equal(t, 2, count(), "accounts:x and transfer:t stay")

	res = f.scribe(t, "snapshots", "drop", "-aggregate", "account")
	require.Equal(t, exitFailure, res.code, "nothing left to drop")
	require.Contains(t, res.stderr, `no snapshots of aggregate "account" in any partition`)
	res = f.scribe(t, "snapshots", "drop", "-aggregate", "nosuch", "-below-version", "3")
	require.Equal(t, exitFailure, res.code)
	require.Equal(t, 2, count())
}

// scribe snapshots prune with a -partition or -tag that selects no stream
// with snapshots exits 1 naming it and deletes nothing; a matching selector
// prunes as asked.
func TestSnapshotsPruneSelectorsMustMatch(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	save, count := snapshotRows(t, f)
	for v := uint64(1); v <= 3; v++ {
		save("east", "account:a", v*10, 1)
	}

	res := f.scribe(t, "snapshots", "prune", "-keep", "1", "-partition", "esat")
	require.Equal(t, exitFailure, res.code, res.stdout)
	require.Contains(t, res.stderr, `partition "esat" has no snapshots; nothing deleted`)
	res = f.scribe(t, "snapshots", "prune", "-keep", "1", "-partition", "east", "-tag", "account:b")
	require.Equal(t, exitFailure, res.code, res.stdout)
	require.Contains(t, res.stderr, "has no snapshots; nothing deleted")
	require.Contains(t, res.stderr, "account:b")
	require.Equal(t, 3, count(), "nothing deleted")

	res = f.scribe(t, "snapshots", "prune", "-keep", "1", "-partition", "east")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "deleted 2 snapshots of 1 streams")
	require.Equal(t, 1, count())
	res = f.scribe(t, "snapshots", "prune", "-keep", "1")
	require.Equal(t, exitOK, res.code, "no selector: nothing to prune is not an error: %s", res.stderr)
}

// snapshotRows gives f's schema a snapshot store: save stores an empty
// state for a stream at a version and state schema version, count counts
// the snapshots table's rows.
func snapshotRows(t *testing.T, f *fixture) (save func(partition string, tag journal.Tag, v uint64, schema int), count func() int) {
	t.Helper()
	ctx := t.Context()
	st, err := postgres.NewSnapshotStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	save = func(partition string, tag journal.Tag, v uint64, schema int) {
		require.NoError(t, st.Save(ctx, snapshots.Snapshot{Stream: journal.StreamID{Partition: partition, Tag: tag}.Normalize(), Version: v, SchemaVersion: schema, State: []byte(`{}`)}))
	}
	count = func() int {
		var n int
		require.NoError(t, f.pool.QueryRow(ctx, "SELECT count(*) FROM "+f.schema+".snapshots").Scan(&n))
		return n
	}
	return save, count
}
