package pgadmin

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/projection"
)

// SliceLag is how far one slice of a sliced projection is behind.
type SliceLag struct {
	// Events counts the slice's events after its checkpoint; with AtLeast,
	// the count stopped there (SliceLags' atMost) and there are more.
	Events  uint64
	AtLeast bool
	// Oldest is when the oldest of them was recorded (zero when none): the
	// slice's lag in time is its age.
	Oldest time.Time
}

// TotalSliceLag sums a sliced projection's slice lags up: the events behind
// over all slices (AtLeast when any slice's count stopped at its cap) and
// the oldest of them.
func TotalSliceLag(lags []SliceLag) SliceLag {
	var total SliceLag
	for _, l := range lags {
		total.Events += l.Events
		total.AtLeast = total.AtLeast || l.AtLeast
		if !l.Oldest.IsZero() && (total.Oldest.IsZero() || l.Oldest.Before(total.Oldest)) {
			total.Oldest = l.Oldest
		}
	}
	return total
}

// SliceLags returns each slice of projection k's lag (in slice order, as
// postgres.ProjectionStore.Slices lists them): its events after its
// checkpoint, counted up to atMost (0: all) on the tag index the runner
// reads, and the oldest one's time. Not gated; no archive changes a lag.
func (a *Admin) SliceLags(ctx context.Context, k projection.Key, atMost int) ([]SliceLag, error) {
	rows, err := a.pool.Query(ctx, a.sliceLagsSQL(atMost), k.Name, k.Version)
	if err != nil {
		return nil, a.translate("projections: slice lags", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SliceLag, error) {
		var n int64
		var oldest *time.Time
		err := r.Scan(&n, &oldest)
		l := SliceLag{Events: uint64(n), AtLeast: atMost > 0 && n >= int64(atMost)}
		if oldest != nil {
			l.Oldest = oldest.UTC()
		}
		return l, err
	})
	if err != nil {
		return nil, a.translate("projections: slice lags", err)
	}
	return out, nil
}

// sliceLagsSQL is SliceLags' statement ($1 name, $2 version). A slice of a
// sliced projection counts its tag slices' entries in the tag index after
// its checkpoint; a slice of a projection across several databases
// (by_partition) its partition's events after its checkpoint (those with a
// tag of its tag slice when it is sliced by tag too: the deliveries it has
// not applied, counted on the events table, which keeps every event after
// its checkpoint hot), when the checkpoint is a position of this database
// (nothing applied yet, or its event is here: hot or archived), and
// nothing otherwise (its position is another database's).
func (a *Admin) sliceLagsSQL(atMost int) string {
	limit := ""
	if atMost > 0 {
		limit = " LIMIT " + strconv.Itoa(atMost)
	}
	const behind = `et.partition = s.partition AND split_part(et.tag, ':', 1) = s.tag_group
			  AND et.commit_xid >= s.commit_xid AND (et.commit_xid, et.seq) > (s.commit_xid, s.seq)
			  AND __S__.scribe_slice(et.tag) >= s.slice * (1024 / s.slice_count)
			  AND __S__.scribe_slice(et.tag) < (s.slice + 1) * (1024 / s.slice_count)`
	const feed = `(s.partition = '' OR e.partition = s.partition) AND e.commit_xid >= s.commit_xid AND (e.commit_xid, e.seq) > (s.commit_xid, s.seq)
			  AND (s.tag_group = '' OR EXISTS (SELECT FROM unnest(e.tags) AS t(tag) WHERE split_part(t.tag, ':', 1) = s.tag_group
				AND __S__.scribe_slice(t.tag) >= s.slice % s.slice_count * (1024 / s.slice_count)
				AND __S__.scribe_slice(t.tag) < (s.slice % s.slice_count + 1) * (1024 / s.slice_count)))`
	const here = `(s.event_id IS NULL
			OR EXISTS (SELECT FROM __S__.events x WHERE x.commit_xid = s.commit_xid AND x.seq = s.seq AND x.id = s.event_id)
			OR EXISTS (SELECT FROM __S__.events_archive x WHERE x.commit_xid = s.commit_xid AND x.seq = s.seq AND x.id = s.event_id))`
	return a.sql(`SELECT
			CASE WHEN s.tag_group <> '' AND NOT s.by_partition THEN
				(SELECT count(*) FROM (SELECT DISTINCT et.commit_xid, et.seq FROM __S__.event_tags et WHERE ` + behind + limit + `) d)
			WHEN ` + here + ` THEN
				(SELECT count(*) FROM (SELECT FROM __S__.events e WHERE ` + feed + limit + `) d)
			ELSE 0 END,
			CASE WHEN s.tag_group <> '' AND NOT s.by_partition THEN
				(SELECT e.recorded_at FROM __S__.event_tags et JOIN __S__.events e ON e.commit_xid = et.commit_xid AND e.seq = et.seq
					WHERE ` + behind + ` ORDER BY et.commit_xid, et.seq LIMIT 1)
			WHEN ` + here + ` THEN
				(SELECT e.recorded_at FROM __S__.events e WHERE ` + feed + ` ORDER BY e.commit_xid, e.seq LIMIT 1)
			END
		FROM __S__.projection_slices s WHERE s.name = $1 AND s.version = $2 ORDER BY s.slice`)
}
