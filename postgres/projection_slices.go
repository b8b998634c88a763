package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// A projection's slices are projection_slices rows, each with its
// checkpoint, lease and the layout it was created with (tag_group,
// partition, slice_count, by_partition; one row with tag_group '' and
// partition '' when unsliced); projection_runners holds the live runners.

var _ projection.Store[pgx.Tx] = (*ProjectionStore)(nil)

// Join implements projection.Store: k's row and its slices as l lays them
// out are created with the membership in one transaction.
func (st *ProjectionStore) Join(ctx context.Context, k projection.Key, l projection.Layout, owner string, ttl time.Duration) ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if owner == "" || ttl <= 0 || (l.Group != "" && (l.Count <= 0 || (l.Partition == "") == (len(l.Partitions) == 0))) {
		return nil, fmt.Errorf("projection %s: Join needs an owner, a positive TTL and, for a tag slicing, its Count and either its Partition or, across several databases, its Partitions", k)
	}
	var members []string
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projections (name, version) VALUES ($1, $2) ON CONFLICT DO NOTHING`, k.Name, k.Version); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT FROM `+st.s+`.projections WHERE name = $1 AND version = $2 FOR UPDATE`, k.Name, k.Version); err != nil {
			return err
		}
		if err := st.layOut(ctx, tx, k, l); err != nil {
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
		return nil, st.translate("join", err)
	}
	slices.Sort(members)
	return members, nil
}

// layOut lays k's slices out as projection.Store.Join says, under the
// lock of the projection's row.
func (st *ProjectionStore) layOut(ctx context.Context, tx pgx.Tx, k projection.Key, l projection.Layout) error {
	sets, err := st.querySlices(ctx, tx, ` WHERE name = $1 AND version = $2`, k.Name, k.Version)
	if err != nil {
		return err
	}
	var have projection.Layout
	n := 0
	if x := sets[k]; x != nil {
		have, n = x.layout, len(x.slices)
	}
	switch {
	case n == 0 && len(l.Partitions) == 0:
		_, err = tx.Exec(ctx, `INSERT INTO `+st.s+`.projection_slices (name, version, slice, tag_group, partition, slice_count)
			SELECT $1, $2, g, $3, $4, $5 FROM generate_series(0, $5 - 1) AS g`, k.Name, k.Version, l.Group, l.Partition, max(1, l.Count))
		return err
	case n > 0 && !l.Same(have):
		return fmt.Errorf("%w: %s is %s, the runner asks for %s; give the new layout a new version", projection.ErrSlicingChanged, k, have.Kind(), l.Kind())
	}
	var add []string
	for _, p := range l.Partitions {
		if !slices.Contains(have.Partitions, p) && !slices.Contains(add, p) {
			add = append(add, p)
		}
	}
	if len(add) == 0 {
		return nil
	}
	per := l.PerPartition()
	_, err = tx.Exec(ctx, `INSERT INTO `+st.s+`.projection_slices (name, version, slice, tag_group, partition, slice_count, by_partition)
		SELECT $1, $2, $3 + (u.n - 1) * $6 + g, $5, u.p, $6, true FROM unnest($4::text[]) WITH ORDINALITY AS u(p, n), generate_series(0, $6 - 1) AS g`,
		k.Name, k.Version, n, add, l.Group, per)
	return err
}

// Leave implements projection.Store.
func (st *ProjectionStore) Leave(ctx context.Context, k projection.Key, owner string) error {
	_, err := st.pool.Exec(ctx, `DELETE FROM `+st.s+`.projection_runners WHERE name = $1 AND version = $2 AND owner = $3`, k.Name, k.Version, owner)
	return st.translate("leave", err)
}

// Claim implements projection.Store.
func (st *ProjectionStore) Claim(ctx context.Context, k projection.Key, owner string, ttl time.Duration, want []int) ([]projection.Lease, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if owner == "" || ttl <= 0 {
		return nil, fmt.Errorf("projection %s: Claim needs an owner and a positive TTL", k)
	}
	var out []projection.Lease
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var paused bool
		var active int
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT paused FROM `+st.s+`.projections WHERE name = $1 AND version = $2), false),
				coalesce((SELECT version FROM `+st.s+`.projection_active WHERE name = $1), 0)`, k.Name, k.Version).Scan(&paused, &active); err != nil {
			return err
		}
		switch {
		case paused:
			return fmt.Errorf("%w: %s (resume it with `scribe projections resume`)", projection.ErrPaused, k)
		case active > k.Version:
			return fmt.Errorf("%w: %s is active", projection.ErrSuperseded, projection.Key{Name: k.Name, Version: active})
		}
		rows, err := tx.Query(ctx, `UPDATE `+st.s+`.projection_slices SET owner = $3, epoch = epoch + 1,
				lease_until = clock_timestamp() + $4::interval, updated_at = clock_timestamp()
			WHERE name = $1 AND version = $2 AND slice = ANY($5::int[]) AND (owner = '' OR owner = $3 OR lease_until <= clock_timestamp())
			RETURNING slice, epoch, commit_xid, seq, events, partition, member, event_id`, k.Name, k.Version, owner, interval(ttl), want)
		if err != nil {
			return err
		}
		var l projection.Lease
		var epoch, commit, seq, events int64
		var id *uuid.UUID
		if _, err := pgx.ForEachRow(rows, []any{&l.Slice, &epoch, &commit, &seq, &events, &l.Partition, &l.Member, &id}, func() error {
			l.Key, l.Owner, l.Epoch, l.TTL, l.Events, l.EventID = k, owner, uint64(epoch), ttl, uint64(events), uuid.Nil
			l.Checkpoint = journal.Position{Commit: uint64(commit), Seq: uint64(seq)}
			if id != nil {
				l.EventID = *id
			}
			out = append(out, l)
			return nil
		}); err != nil {
			return err
		}
		if len(out) > 0 {
			_, err = tx.Exec(ctx, `UPDATE `+st.s+`.projections SET state = `+stateAfterSQL(projection.OpClaim, "state", "paused")+`, updated_at = clock_timestamp()
				WHERE name = $1 AND version = $2 AND state <> 'running'`, k.Name, k.Version)
		}
		return err
	})
	if errors.Is(err, projection.ErrPaused) || errors.Is(err, projection.ErrSuperseded) {
		return nil, err
	}
	if err != nil {
		return nil, st.translate("claim", err)
	}
	slices.SortFunc(out, func(a, b projection.Lease) int { return a.Slice - b.Slice })
	return out, nil
}

// sliceArgs returns the slices and epochs of ls as arrays.
func sliceArgs(ls []projection.Lease) ([]int32, []int64) {
	s, e := make([]int32, len(ls)), make([]int64, len(ls))
	for i, l := range ls {
		s[i], e[i] = int32(l.Slice), int64(l.Epoch)
	}
	return s, e
}

// Renew implements projection.Store.
func (st *ProjectionStore) Renew(ctx context.Context, ls []projection.Lease) ([]int, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	l0 := ls[0]
	sl, ep := sliceArgs(ls)
	var active int
	if err := st.pool.QueryRow(ctx, `SELECT coalesce((SELECT version FROM `+st.s+`.projection_active WHERE name = $1), 0)`, l0.Key.Name).Scan(&active); err != nil {
		return nil, st.translate("renew", err)
	}
	if active > l0.Key.Version {
		return nil, fmt.Errorf("%w: %s is active", projection.ErrSuperseded, projection.Key{Name: l0.Key.Name, Version: active})
	}
	rows, err := st.pool.Query(ctx, `UPDATE `+st.s+`.projection_slices s SET lease_until = clock_timestamp() + $4::interval
		FROM unnest($5::int[], $6::bigint[]) AS u(slice, epoch)
		WHERE s.name = $1 AND s.version = $2 AND s.owner = $3 AND s.slice = u.slice AND s.epoch = u.epoch AND s.lease_until > clock_timestamp()
		RETURNING s.slice`, l0.Key.Name, l0.Key.Version, l0.Owner, interval(l0.TTL), sl, ep)
	if err != nil {
		return nil, st.translate("renew", err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, st.translate("renew", err)
	}
	var lost []int
	for _, l := range ls {
		if !slices.Contains(kept, int32(l.Slice)) {
			lost = append(lost, l.Slice)
		}
	}
	return lost, nil
}

// Release implements projection.Store.
func (st *ProjectionStore) Release(ctx context.Context, ls []projection.Lease) error {
	if len(ls) == 0 {
		return nil
	}
	sl, ep := sliceArgs(ls)
	_, err := st.pool.Exec(ctx, `UPDATE `+st.s+`.projection_slices s SET owner = '', lease_until = '-infinity', updated_at = clock_timestamp()
		FROM unnest($4::int[], $5::bigint[]) AS u(slice, epoch)
		WHERE s.name = $1 AND s.version = $2 AND s.owner = $3 AND s.slice = u.slice AND s.epoch = u.epoch`,
		ls[0].Key.Name, ls[0].Key.Version, ls[0].Owner, sl, ep)
	return st.translate("release", err)
}

// Commit implements projection.Store: one transaction locks the slices' rows,
// checks leases and checkpoints, runs apply and moves the checkpoints.
func (st *ProjectionStore) Commit(ctx context.Context, ls []projection.Lease, records []journal.Record, sl []int, apply func(ctx context.Context, tx pgx.Tx) error) error {
	if err := projection.CheckCommitArgs(ls, records, sl); err != nil {
		return err
	}
	k, ttl := ls[0].Key, ls[0].TTL
	byslice := make(map[int]projection.Lease, len(ls))
	want := make([]int32, 0, len(ls))
	for _, l := range ls {
		byslice[l.Slice] = l
		want = append(want, int32(l.Slice))
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return st.translate("commit: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit this is a no-op
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, strconv.FormatInt(max(ttl.Milliseconds(), 1), 10))
	b.Queue(`SELECT s.slice, s.epoch, s.owner, s.lease_until > clock_timestamp(), s.commit_xid, s.seq,
			coalesce((SELECT version FROM `+st.s+`.projection_active a WHERE a.name = s.name), 0)
		FROM `+st.s+`.projection_slices s WHERE s.name = $1 AND s.version = $2 AND s.slice = ANY($3::int[])
		ORDER BY s.slice FOR UPDATE OF s`, k.Name, k.Version, want)
	br := tx.SendBatch(ctx, b)
	_, err = br.Exec()
	var fenced error
	found := 0
	if err == nil {
		var cur projection.SliceStatus
		var live bool
		var active int
		var epoch, commit, seq int64
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			_, err = pgx.ForEachRow(rows, []any{&cur.Slice, &epoch, &cur.Owner, &live, &commit, &seq, &active}, func() error {
				found++
				cur.Epoch, cur.Checkpoint = uint64(epoch), journal.Position{Commit: uint64(commit), Seq: uint64(seq)}
				if fenced == nil {
					fenced = byslice[cur.Slice].CheckCommit(cur, live, active)
				}
				return nil
			})
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st.translate("commit: lock", err)
	}
	if fenced != nil {
		return fenced
	}
	if found != len(ls) {
		return fmt.Errorf("%w: %s has no row for some of slices %v (was it reset?)", projection.ErrFenced, k, want)
	}
	if err := st.applyBuffered(ctx, tx, projection.FirstPosition(records), apply); err != nil {
		return err
	}
	n := len(ls)
	us, ue, uc, uq, un := make([]int32, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	um, ui := make([]string, 0, n), make([]*uuid.UUID, 0, n)
	for _, l := range ls {
		last, id := l.Checkpoint, l.EventID
		var count int64
		for i := range records {
			if sl[i] == l.Slice {
				last, id, count = records[i].Position, records[i].ID, count+1
			}
		}
		if l.PassedID != uuid.Nil {
			last, id = l.Passed, l.PassedID
		}
		var idp *uuid.UUID
		if id != uuid.Nil {
			idp = &id
		}
		us, ue, uc, uq, un = append(us, int32(l.Slice)), append(ue, int64(l.Epoch)), append(uc, i64(last.Commit)), append(uq, i64(last.Seq)), append(un, count)
		um, ui = append(um, l.Member), append(ui, idp)
	}
	tag, err := tx.Exec(ctx, `UPDATE `+st.s+`.projection_slices s SET commit_xid = u.c, seq = u.q, events = s.events + u.n,
			member = u.m, event_id = u.i, lease_until = clock_timestamp() + $3::interval, updated_at = clock_timestamp()
		FROM unnest($4::int[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::uuid[]) AS u(slice, epoch, c, q, n, m, i)
		WHERE s.name = $1 AND s.version = $2 AND s.slice = u.slice AND s.epoch = u.epoch`,
		k.Name, k.Version, interval(ttl), us, ue, uc, uq, un, um, ui)
	if err != nil {
		return st.translate("commit: checkpoints", err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("%w: the slice rows of %s changed under their locks", projection.ErrFenced, k)
	}
	// Only a commit after a claim or a failure changes the projection's
	// row: the commits of disjoint slices do not wait for each other there.
	if _, err := tx.Exec(ctx, `UPDATE `+st.s+`.projections SET state = `+stateAfterSQL(projection.OpCommit, "state", "paused")+`, error = '',
			failed_xid = 0, failed_seq = 0, updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND (state <> 'running' OR error <> '')`, k.Name, k.Version); err != nil {
		return st.translate("commit: state", err)
	}
	return st.translate("commit", tx.Commit(ctx))
}

// Fail implements projection.Store.
func (st *ProjectionStore) Fail(ctx context.Context, l projection.Lease, pos journal.Position, msg string) error {
	tag, err := st.pool.Exec(ctx, `UPDATE `+st.s+`.projections SET state = `+stateAfterSQL(projection.OpFail, "state", "paused")+`, failed_xid = $5, failed_seq = $6, error = $7, updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2
		  AND EXISTS (SELECT FROM `+st.s+`.projection_slices WHERE name = $1 AND version = $2 AND slice = $3 AND epoch = $4)`,
		l.Key.Name, l.Key.Version, l.Slice, int64(l.Epoch), i64(pos.Commit), i64(pos.Seq), msg)
	if err != nil {
		return st.translate("fail", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: slice %d of %s moved on to a newer epoch", projection.ErrFenced, l.Slice, l.Key)
	}
	return nil
}

// Slices implements projection.Store.
func (st *ProjectionStore) Slices(ctx context.Context, k projection.Key) ([]projection.SliceStatus, projection.Layout, error) {
	sets, err := st.querySlices(ctx, st.pool, ` WHERE name = $1 AND version = $2`, k.Name, k.Version)
	if x := sets[k]; err == nil && x != nil {
		return x.slices, x.layout, nil
	}
	return nil, projection.Layout{}, st.translate("slices", err)
}

// sliceSet is one projection's slices as querySlices reads them.
type sliceSet struct {
	layout projection.Layout
	slices []projection.SliceStatus
	// live[i] reports whether slices[i]'s lease is held and unexpired by
	// the database's clock.
	live []bool
}

// querySlices reads the slice rows that where (with args) selects, in one
// query of db, by projection.
func (st *ProjectionStore) querySlices(ctx context.Context, db querier, where string, args ...any) (map[projection.Key]*sliceSet, error) {
	rows, err := db.Query(ctx, `SELECT name, version, slice, commit_xid, seq, events, owner, epoch, CASE WHEN isfinite(lease_until) THEN lease_until END,
			owner <> '' AND lease_until > clock_timestamp(), tag_group, partition, slice_count, member, event_id, by_partition
		FROM `+st.s+`.projection_slices`+where+` ORDER BY name, version, slice`, args...)
	if err != nil {
		return nil, err
	}
	out := map[projection.Key]*sliceSet{}
	var k projection.Key
	var x projection.SliceStatus
	var commit, seq, events, epoch int64
	var until *time.Time
	var id *uuid.UUID
	var live bool
	var l projection.Layout
	var byPartition bool
	_, err = pgx.ForEachRow(rows, []any{&k.Name, &k.Version, &x.Slice, &commit, &seq, &events, &x.Owner, &epoch, &until, &live, &l.Group, &x.Partition, &l.Count, &x.Member, &id, &byPartition}, func() error {
		s := out[k]
		if s == nil {
			s = &sliceSet{}
			out[k] = s
		}
		x.Checkpoint, x.Events, x.Epoch = journal.Position{Commit: uint64(commit), Seq: uint64(seq)}, uint64(events), uint64(epoch)
		x.LeaseUntil, x.EventID = time.Time{}, uuid.Nil
		if until != nil {
			x.LeaseUntil = until.UTC()
		}
		if id != nil {
			x.EventID = *id
		}
		switch {
		case byPartition:
			if !slices.Contains(s.layout.Partitions, x.Partition) {
				s.layout.Partitions = append(s.layout.Partitions, x.Partition)
			}
			if l.Group != "" {
				s.layout.Group, s.layout.Count = l.Group, l.Count
			}
		case l.Group != "":
			s.layout.Group, s.layout.Count, s.layout.Partition = l.Group, l.Count, x.Partition
		}
		s.slices, s.live = append(s.slices, x), append(s.live, live)
		return nil
	})
	return out, err
}
