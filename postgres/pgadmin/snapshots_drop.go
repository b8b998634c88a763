package pgadmin

import (
	"context"
	"fmt"
	"strings"

	"github.com/scribe-es/scribe/journal"
)

// SnapshotDrop selects the snapshots DropSnapshots deletes.
type SnapshotDrop struct {
	// Aggregate is the aggregate (tag group) whose streams' snapshots are
	// deleted. Required.
	Aggregate string
	// Partition limits the drop to one partition; "" means every partition.
	Partition string
	// BelowSchemaVersion, when positive, deletes only the snapshots stamped
	// with a state schema version below it; 0 deletes them all.
	BelowSchemaVersion int
}

// SnapshotDropResult is what DropSnapshots found and deleted.
type SnapshotDropResult struct {
	// Found counts the aggregate's snapshots in the partition(s) before the
	// drop, Deleted those deleted, Streams the streams they belonged to.
	Found, Deleted, Streams int
}

// dropSnapshotsSQL deletes an aggregate's snapshots (a range of the
// primary key per partition: tags from "group:" up to "group;", ';' being
// the byte after ':'), counting what it found.
const dropSnapshotsSQL = `WITH agg AS (
		SELECT partition, tag, version, schema_version FROM __S__.snapshots
		WHERE ($1 = '' OR partition = $1) AND tag >= $2 AND tag < $3),
	del AS (
		DELETE FROM __S__.snapshots s USING agg
		WHERE s.partition = agg.partition AND s.tag = agg.tag AND s.version = agg.version
			AND ($4 = 0 OR agg.schema_version < $4)
		RETURNING s.partition, s.tag)
	SELECT (SELECT count(*) FROM agg), (SELECT count(*) FROM del), (SELECT count(DISTINCT (partition, tag)) FROM del)`

// DropSnapshots deletes the snapshots of an aggregate's streams, all of them or
// those below a state schema version, in one statement: the streams replay
// from their events (or an older snapshot) at their next recovery. A stream
// actor that is running keeps its state and saves its next snapshot as
// usual. Found says whether the aggregate had any snapshot to drop.
func (a *Admin) DropSnapshots(ctx context.Context, d SnapshotDrop) (SnapshotDropResult, error) {
	switch {
	case d.Aggregate == "" || strings.ContainsRune(d.Aggregate, ':'):
		return SnapshotDropResult{}, fmt.Errorf("%w: postgres: snapshots drop: aggregate %q: give an aggregate name (a tag group, without ':')", journal.ErrInvalidQuery, d.Aggregate)
	case d.BelowSchemaVersion < 0:
		return SnapshotDropResult{}, fmt.Errorf("%w: postgres: snapshots drop: schema version %d; give a positive version or 0 for all", journal.ErrInvalidQuery, d.BelowSchemaVersion)
	}
	partition := d.Partition
	var found, deleted, streams int64
	err := a.pool.QueryRow(ctx, a.sql(dropSnapshotsSQL), partition, d.Aggregate+":", d.Aggregate+";", d.BelowSchemaVersion).Scan(&found, &deleted, &streams)
	if err != nil {
		return SnapshotDropResult{}, a.translate("snapshots: drop", err)
	}
	return SnapshotDropResult{Found: int(found), Deleted: int(deleted), Streams: int(streams)}, nil
}
