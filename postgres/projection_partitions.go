package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/projection"
)

// A projection across several databases (projection.PartitionedSource)
// keeps one projection_slices row per partition (migration 12): tag_group
// is empty, partition names the slice's partition, and member and event_id
// place its checkpoint independently of the database (see
// projection.SliceLease). Leases, commits, pauses and resets are those of
// sliced projections.

// JoinPartitions implements projection.SliceStore: it adds a slice for
// each partition that has none, numbered after the existing ones, in one
// transaction with the membership (concurrent joins add each partition
// once: the rows are locked while numbered).
func (st *ProjectionStore) JoinPartitions(ctx context.Context, k projection.Key, partitions []string, owner string, ttl time.Duration) ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if owner == "" || ttl <= 0 {
		return nil, fmt.Errorf("projection %s: JoinPartitions needs an owner and a positive TTL", k)
	}
	return st.join(ctx, k, owner, ttl, func(tx pgx.Tx) error {
		// The projection's row serializes joins that add slices.
		if _, err := tx.Exec(ctx, `SELECT FROM `+st.s+`.projections WHERE name = $1 AND version = $2 FOR UPDATE`, k.Name, k.Version); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT tag_group, partition FROM `+st.s+`.projection_slices WHERE name = $1 AND version = $2 ORDER BY slice`, k.Name, k.Version)
		if err != nil {
			return err
		}
		type slice struct{ group, partition string }
		have, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (slice, error) {
			var x slice
			return x, r.Scan(&x.group, &x.partition)
		})
		if err != nil {
			return err
		}
		var add []string
		for _, x := range have {
			if x.group != "" {
				return fmt.Errorf("%w: %s is sliced by group %q; a projection across several databases has one slice per partition: give it a new version", projection.ErrSlicingChanged, k, x.group)
			}
		}
		for _, p := range partitions {
			if !slices.ContainsFunc(have, func(x slice) bool { return x.partition == p }) && !slices.Contains(add, p) {
				add = append(add, p)
			}
		}
		if len(add) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+st.s+`.projection_slices (name, version, slice, tag_group, partition, slice_count)
			SELECT $1, $2, $3 + u.n - 1, '', u.p, 1 FROM unnest($4::text[]) WITH ORDINALITY AS u(p, n)`, k.Name, k.Version, len(have), add)
		return err
	})
}

// join creates k's row in projections when it has none, runs shape (which
// creates or checks k's slices) and records owner as a live runner until
// ttl from now, in one transaction, and returns the live runners, sorted.
// A projection that applied events unsliced cannot be sliced
// (projection.ErrSlicingChanged).
func (st *ProjectionStore) join(ctx context.Context, k projection.Key, owner string, ttl time.Duration, shape func(tx pgx.Tx) error) ([]string, error) {
	var members []string
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projections (name, version) VALUES ($1, $2) ON CONFLICT DO NOTHING`, k.Name, k.Version); err != nil {
			return err
		}
		var unsliced int64
		if err := tx.QueryRow(ctx, `SELECT p.events FROM `+st.s+`.projections p WHERE p.name = $1 AND p.version = $2
			AND NOT EXISTS (SELECT FROM `+st.s+`.projection_slices s WHERE s.name = $1 AND s.version = $2)`, k.Name, k.Version).Scan(&unsliced); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if unsliced > 0 {
			return fmt.Errorf("%w: %s applied %d events as an unsliced projection; give the slicing a new version", projection.ErrSlicingChanged, k, unsliced)
		}
		if err := shape(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projection_runners AS r (name, version, owner, lease_until)
			VALUES ($1, $2, $3, clock_timestamp() + $4::interval)
			ON CONFLICT (name, version, owner) DO UPDATE SET lease_until = EXCLUDED.lease_until`, k.Name, k.Version, owner, interval(ttl)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+st.s+`.projection_runners WHERE name = $1 AND version = $2 AND lease_until <= clock_timestamp()`, k.Name, k.Version); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT owner FROM `+st.s+`.projection_runners WHERE name = $1 AND version = $2`, k.Name, k.Version)
		if err != nil {
			return err
		}
		members, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if errors.Is(err, projection.ErrSlicingChanged) {
		return nil, err
	}
	if err != nil {
		return nil, st.translate("join slices", err)
	}
	slices.Sort(members)
	return members, nil
}
