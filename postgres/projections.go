package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// ProjectionStore is the Postgres projection.Store: checkpoints, leases and
// dead letters in the projections tables of Config.Schema (migration 3),
// rows read models (projection.RowStore, migration 7) and sliced
// projections (projection.SliceStore, migration 9: see
// projection_slices.go). A projection's
// handler receives the pgx.Tx that also moves its checkpoint, so a read
// model in the same database (its own tables, or Rows) is updated exactly
// once per event.
//
// Fencing: Commit locks the projection's row (SELECT … FOR UPDATE) and checks
// the lease's epoch, owner, expiry (by the database clock) and the expected
// checkpoint before the handler runs; claims, renewals and resets wait for
// that lock. So at most one batch of a projection is applied at a time,
// across processes, and a runner that lost its lease applies nothing. The
// transaction sets idle_in_transaction_session_timeout to the lease's TTL, so
// a paused runner cannot hold the row past its lease.
type ProjectionStore struct {
	pool *pgxpool.Pool
	cfg  Config
	s    string
	// buffers holds the rows buffer of each transaction a Commit or a
	// replay passes to its handler (pgx.Tx → *rowBuffer).
	buffers sync.Map
}

var (
	_ projection.Store[pgx.Tx]              = (*ProjectionStore)(nil)
	_ projection.DeadLetterReplayer[pgx.Tx] = (*ProjectionStore)(nil)
	_ projection.Pauser                     = (*ProjectionStore)(nil)
)

// NewProjectionStore returns a ProjectionStore on pool and cfg.Schema. It
// does no I/O: run Migrate first, or calls fail with journal.ErrStoreNotOpen.
func NewProjectionStore(pool *pgxpool.Pool, cfg Config) (*ProjectionStore, error) {
	if pool == nil {
		return nil, errors.New("postgres: NewProjectionStore: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &ProjectionStore{pool: pool, cfg: cfg, s: cfg.quotedSchema()}, nil
}

func (st *ProjectionStore) translate(op string, err error) error {
	return translateErr(st.cfg.Schema, "projections: "+op, err)
}

// stateAfterSQL is the SQL expression of the state a projections row is in
// after op: projection.State.Next, evaluated on the row's state column
// (col) and on whether the pause holds after op (paused: a boolean SQL
// expression), so that both stores move states by the same table.
func stateAfterSQL(op projection.Operation, col, paused string) string {
	arms := func(p bool) string {
		var b strings.Builder
		b.WriteString("CASE " + col)
		for _, s := range projection.AllStates() {
			b.WriteString(" WHEN '" + string(s) + "' THEN '" + string(s.Next(op, p)) + "'")
		}
		b.WriteString(" ELSE " + col + " END")
		return b.String()
	}
	return "CASE WHEN " + paused + " THEN " + arms(true) + " ELSE " + arms(false) + " END"
}

func interval(d time.Duration) string {
	return strconv.FormatInt(d.Microseconds(), 10) + " microseconds"
}

// Claim implements projection.Store.
func (st *ProjectionStore) Claim(ctx context.Context, k projection.Key, owner string, ttl time.Duration) (projection.Lease, error) {
	if err := k.Validate(); err != nil {
		return projection.Lease{}, err
	}
	if owner == "" || ttl <= 0 {
		return projection.Lease{}, fmt.Errorf("projection %s: Claim needs an owner and a positive TTL", k)
	}
	l := projection.Lease{Key: k, Owner: owner, TTL: ttl}
	var commit, seq, events int64
	err := st.pool.QueryRow(ctx, `INSERT INTO `+st.s+`.projections AS p (name, version, owner, epoch, lease_until, state, updated_at)
		VALUES ($1, $2, $3, 1, clock_timestamp() + $4::interval, 'running', clock_timestamp())
		ON CONFLICT (name, version) DO UPDATE SET owner = EXCLUDED.owner, epoch = p.epoch + 1,
			lease_until = EXCLUDED.lease_until, updated_at = EXCLUDED.updated_at,
			state = `+stateAfterSQL(projection.OpClaim, "p.state", "p.paused")+`
		WHERE NOT p.paused AND (p.owner = '' OR p.owner = EXCLUDED.owner OR p.lease_until <= clock_timestamp())
		RETURNING epoch, commit_xid, seq, events`, k.Name, k.Version, owner, interval(ttl)).Scan(&l.Epoch, &commit, &seq, &events)
	if errors.Is(err, pgx.ErrNoRows) {
		var holder string
		var until *time.Time // NULL for a released lease ('-infinity')
		var paused bool
		if err := st.pool.QueryRow(ctx, `SELECT owner, CASE WHEN lease_until > '-infinity' THEN lease_until END, paused
			FROM `+st.s+`.projections WHERE name = $1 AND version = $2`, k.Name, k.Version).Scan(&holder, &until, &paused); err != nil {
			return projection.Lease{}, st.translate("claim", err)
		}
		if paused {
			return projection.Lease{}, fmt.Errorf("%w: %s (resume it with `scribe projections resume`)", projection.ErrPaused, k)
		}
		if until == nil {
			return projection.Lease{}, fmt.Errorf("%w: %s is held by %q", projection.ErrLeaseHeld, k, holder)
		}
		return projection.Lease{}, fmt.Errorf("%w: %s holds %s until %s", projection.ErrLeaseHeld, holder, k, until.UTC().Format(time.RFC3339Nano))
	}
	if err != nil {
		return projection.Lease{}, st.translate("claim", err)
	}
	l.Checkpoint = journal.Position{Commit: uint64(commit), Seq: uint64(seq)}
	l.Events = uint64(events)
	return l, nil
}

// Pause implements projection.Pauser: it fences the current lease (a new
// epoch), records the pause and leaves checkpoint, rows and dead letters as
// they are.
func (st *ProjectionStore) Pause(ctx context.Context, k projection.Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	tag, err := st.pool.Exec(ctx, `UPDATE `+st.s+`.projections SET paused = true, epoch = epoch + 1, owner = '', lease_until = '-infinity',
			state = `+stateAfterSQL(projection.OpPause, "state", "true")+`, updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND NOT paused`, k.Name, k.Version)
	if err != nil {
		return st.translate("pause", err)
	}
	if tag.RowsAffected() > 0 {
		// A sliced projection's slice leases are fenced too.
		if _, err := st.pool.Exec(ctx, `UPDATE `+st.s+`.projection_slices SET epoch = epoch + 1, owner = '', lease_until = '-infinity'
			WHERE name = $1 AND version = $2`, k.Name, k.Version); err != nil {
			return st.translate("pause: slices", err)
		}
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := st.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+st.s+`.projections WHERE name = $1 AND version = $2)`, k.Name, k.Version).Scan(&exists); err != nil {
			return st.translate("pause", err)
		}
		if !exists {
			return fmt.Errorf("projection %s is unknown to schema %q: nothing to pause", k, st.cfg.Schema)
		}
	}
	return nil
}

// Resume implements projection.Pauser.
func (st *ProjectionStore) Resume(ctx context.Context, k projection.Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	var exists bool
	err := st.pool.QueryRow(ctx, `WITH r AS (UPDATE `+st.s+`.projections SET paused = false,
			state = `+stateAfterSQL(projection.OpResume, "state", "false")+`, updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND paused RETURNING 1)
		SELECT EXISTS (SELECT FROM r) OR EXISTS (SELECT FROM `+st.s+`.projections WHERE name = $1 AND version = $2)`, k.Name, k.Version).Scan(&exists)
	if err != nil {
		return st.translate("resume", err)
	}
	if !exists {
		return fmt.Errorf("projection %s is unknown to schema %q: nothing to resume", k, st.cfg.Schema)
	}
	return nil
}

// fenceErr explains why l may not act, given the row's current values.
func fenceErr(l projection.Lease, epoch int64, owner string, live bool, active int) error {
	switch {
	case active > l.Key.Version:
		return fmt.Errorf("%w: %s is active", projection.ErrSuperseded, projection.Key{Name: l.Key.Name, Version: active})
	case uint64(epoch) != l.Epoch || owner != l.Owner:
		return fmt.Errorf("%w: %s is at epoch %d (owner %q), the lease has epoch %d", projection.ErrFenced, l.Key, epoch, owner, l.Epoch)
	case !live:
		return fmt.Errorf("%w: the lease of %s expired", projection.ErrFenced, l.Key)
	}
	return nil
}

// Renew implements projection.Store.
func (st *ProjectionStore) Renew(ctx context.Context, l projection.Lease) error {
	var epoch int64
	var owner string
	var live bool
	var active int
	err := st.pool.QueryRow(ctx, `WITH r AS (
			UPDATE `+st.s+`.projections SET lease_until = clock_timestamp() + $5::interval
			WHERE name = $1 AND version = $2 AND epoch = $3 AND owner = $4 AND lease_until > clock_timestamp()
			RETURNING epoch)
		SELECT p.epoch, p.owner, EXISTS (SELECT FROM r), coalesce(a.version, 0)
		FROM `+st.s+`.projections p LEFT JOIN `+st.s+`.projection_active a ON a.name = p.name
		WHERE p.name = $1 AND p.version = $2`,
		l.Key.Name, l.Key.Version, int64(l.Epoch), l.Owner, interval(l.TTL)).Scan(&epoch, &owner, &live, &active)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s has no lease row (was the schema reset?)", projection.ErrFenced, l.Key)
	}
	if err != nil {
		return st.translate("renew", err)
	}
	// The CTE's update is not visible to the outer SELECT: epoch and owner are
	// as before it, which is what the check compares.
	return fenceErr(l, epoch, owner, live, active)
}

// Release implements projection.Store.
func (st *ProjectionStore) Release(ctx context.Context, l projection.Lease) error {
	_, err := st.pool.Exec(ctx, `UPDATE `+st.s+`.projections SET owner = '', lease_until = '-infinity',
			state = `+stateAfterSQL(projection.OpRelease, "state", "paused")+`, updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND epoch = $3 AND owner = $4`, l.Key.Name, l.Key.Version, int64(l.Epoch), l.Owner)
	if err != nil {
		return st.translate("release", err)
	}
	return nil
}

// Commit implements projection.Store: one transaction locks the row, checks
// the lease and the checkpoint, runs apply, moves the checkpoint and extends
// the lease.
func (st *ProjectionStore) Commit(ctx context.Context, l projection.Lease, from journal.Position, records []journal.Record, apply func(ctx context.Context, tx pgx.Tx) error) error {
	if len(records) == 0 {
		return fmt.Errorf("projection %s: Commit of no records", l.Key)
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return st.translate("commit: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit this is a no-op
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, strconv.FormatInt(max(l.TTL.Milliseconds(), 1), 10))
	b.Queue(`SELECT p.epoch, p.owner, p.lease_until > clock_timestamp(), p.commit_xid, p.seq, coalesce(a.version, 0)
		FROM `+st.s+`.projections p LEFT JOIN `+st.s+`.projection_active a ON a.name = p.name
		WHERE p.name = $1 AND p.version = $2 FOR UPDATE OF p`, l.Key.Name, l.Key.Version)
	br := tx.SendBatch(ctx, b)
	_, err = br.Exec()
	var epoch, commit, seq int64
	var owner string
	var live bool
	var active int
	if err == nil {
		err = br.QueryRow().Scan(&epoch, &owner, &live, &commit, &seq, &active)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s has no lease row (was the schema reset?)", projection.ErrFenced, l.Key)
	}
	if err != nil {
		return st.translate("commit: lock", err)
	}
	if err := fenceErr(l, epoch, owner, live, active); err != nil {
		return err
	}
	if got := (journal.Position{Commit: uint64(commit), Seq: uint64(seq)}); got != from {
		return fmt.Errorf("%w: the checkpoint of %s is %s, the runner expected %s", projection.ErrFenced, l.Key, got, from)
	}
	if err := st.applyBuffered(ctx, tx, l.Key, records, apply); err != nil {
		return err
	}
	last := records[len(records)-1].Position
	tag, err := tx.Exec(ctx, `UPDATE `+st.s+`.projections SET commit_xid = $4, seq = $5, events = events + $6,
			lease_until = clock_timestamp() + $7::interval, state = `+stateAfterSQL(projection.OpCommit, "state", "paused")+`, error = '', failed_xid = 0, failed_seq = 0,
			updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND epoch = $3`,
		l.Key.Name, l.Key.Version, int64(l.Epoch), int64(last.Commit), int64(last.Seq), len(records), interval(l.TTL))
	if err != nil {
		return st.translate("commit: checkpoint", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: the row of %s changed under its lock", projection.ErrFenced, l.Key)
	}
	if err := tx.Commit(ctx); err != nil {
		return st.translate("commit", err)
	}
	return nil
}

// Fail implements projection.Store.
func (st *ProjectionStore) Fail(ctx context.Context, l projection.Lease, pos journal.Position, msg string) error {
	tag, err := st.pool.Exec(ctx, `UPDATE `+st.s+`.projections SET state = `+stateAfterSQL(projection.OpFail, "state", "paused")+`, failed_xid = $4, failed_seq = $5, error = $6,
			updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND epoch = $3`,
		l.Key.Name, l.Key.Version, int64(l.Epoch), int64(pos.Commit), int64(pos.Seq), msg)
	if err != nil {
		return st.translate("fail", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: %s moved on to a newer epoch", projection.ErrFenced, l.Key)
	}
	return nil
}

// DeadLetter implements projection.Store: the letter commits with the batch.
func (st *ProjectionStore) DeadLetter(ctx context.Context, tx pgx.Tx, d projection.DeadLetter) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projection_dead_letters (name, version, event_id, commit_xid, seq, error, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		d.Key.Name, d.Key.Version, d.Record.ID, int64(d.Record.Position.Commit), int64(d.Record.Position.Seq), d.Error, d.Attempts)
	if err != nil {
		return st.translate("dead letter", err)
	}
	return nil
}

// DeadLetters implements projection.Store. The records are read back from
// the events table, or its archive (a dead letter refers to its event).
func (st *ProjectionStore) DeadLetters(ctx context.Context, k projection.Key) ([]projection.DeadLetter, error) {
	return st.queryDeadLetters(ctx, st.pool, "dead letters", k, "", 0, false)
}

// queryDeadLetters returns k's dead letters matching the SQL condition and
// (with lock) locks them, in position order, at most limit (0: all), with
// their records. db is the pool or a transaction.
func (st *ProjectionStore) queryDeadLetters(ctx context.Context, db querier, op string, k projection.Key, cond string, limit int, lock bool, args ...any) ([]projection.DeadLetter, error) {
	q := `SELECT event_id, commit_xid, seq, error, attempts, at, replay_requested_at FROM ` + st.s + `.projection_dead_letters
		WHERE name = $1 AND version = $2` + cond + ` ORDER BY commit_xid, seq`
	if limit > 0 {
		q += ` LIMIT ` + strconv.Itoa(limit)
	}
	if lock {
		q += ` FOR UPDATE`
	}
	rows, err := db.Query(ctx, q, append([]any{k.Name, k.Version}, args...)...)
	if err != nil {
		return nil, st.translate(op, err)
	}
	var out []projection.DeadLetter
	for rows.Next() {
		var d projection.DeadLetter
		var commit, seq int64
		var requested *time.Time
		if err := rows.Scan(&d.Record.ID, &commit, &seq, &d.Error, &d.Attempts, &d.At, &requested); err != nil {
			rows.Close()
			return nil, st.translate(op, err)
		}
		d.Key, d.Record.Position = k, journal.Position{Commit: uint64(commit), Seq: uint64(seq)}
		if requested != nil {
			d.ReplayRequestedAt = requested.UTC()
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, st.translate(op, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(out))
	for i := range out {
		ids[i] = out[i].Record.ID
	}
	recs, err := queryRecords(ctx, db, st.cfg.Schema, "projections: "+op, st.sql(`SELECT `+recordCols+` FROM __S__.events e WHERE e.id = ANY($1::uuid[])
		UNION ALL SELECT `+recordCols+` FROM __S__.events_archive e WHERE e.id = ANY($1::uuid[])`), ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]journal.Record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	for i := range out {
		if r, ok := byID[out[i].Record.ID]; ok {
			out[i].Record = r
		}
	}
	return out, nil
}

// ReplayDeadLetter implements projection.DeadLetterReplayer: one
// transaction locks the letter's row (FOR UPDATE), runs apply in a
// savepoint and deletes the row; when apply fails, the savepoint is rolled
// back (apply's writes are undone) and the row keeps the new error.
func (st *ProjectionStore) ReplayDeadLetter(ctx context.Context, k projection.Key, pos journal.Position, apply func(ctx context.Context, tx pgx.Tx, d projection.DeadLetter) error) error {
	if err := k.Validate(); err != nil {
		return err
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return st.translate("replay dead letter: begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit this is a no-op
	letters, err := st.queryDeadLetters(ctx, tx, "replay dead letter", k, ` AND commit_xid = $3 AND seq = $4`, 0, true, int64(pos.Commit), int64(pos.Seq))
	if err != nil {
		return err
	}
	if len(letters) == 0 {
		return fmt.Errorf("%w: %s at %s", projection.ErrNoDeadLetter, k, pos)
	}
	d := letters[0]
	var herr error
	if d.Record.Type == "" {
		// Nothing to replay: a failed replay (kept, request cleared), so
		// that a runner does not retry it at every interval.
		herr = fmt.Errorf("the event %s is in neither the events table nor its archive: nothing to replay", d.Record.ID)
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return st.translate("replay dead letter: savepoint", err)
	}
	if herr == nil {
		buf, done := st.buffering(sp)
		herr = apply(ctx, sp, d)
		done()
		if herr == nil {
			herr = st.flushRows(ctx, sp, buf)
		}
	}
	if herr == nil {
		if err := sp.Commit(ctx); err != nil {
			return st.translate("replay dead letter: release savepoint", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+st.s+`.projection_dead_letters WHERE name = $1 AND version = $2 AND commit_xid = $3 AND seq = $4`,
			k.Name, k.Version, int64(pos.Commit), int64(pos.Seq)); err != nil {
			return st.translate("replay dead letter: delete", err)
		}
	} else {
		if err := sp.Rollback(ctx); err != nil {
			return st.translate("replay dead letter: roll back the replay", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+st.s+`.projection_dead_letters SET error = $5, attempts = attempts + 1, replay_requested_at = NULL
			WHERE name = $1 AND version = $2 AND commit_xid = $3 AND seq = $4`,
			k.Name, k.Version, int64(pos.Commit), int64(pos.Seq), herr.Error()); err != nil {
			return st.translate("replay dead letter: keep", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return st.translate("replay dead letter: commit", err)
	}
	if herr != nil {
		return &projection.HandlerError{At: pos, Err: herr}
	}
	return nil
}

// RequestReplay implements projection.DeadLetterReplayer.
func (st *ProjectionStore) RequestReplay(ctx context.Context, k projection.Key) (int, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	tag, err := st.pool.Exec(ctx, `UPDATE `+st.s+`.projection_dead_letters SET replay_requested_at = clock_timestamp()
		WHERE name = $1 AND version = $2`, k.Name, k.Version)
	if err != nil {
		return 0, st.translate("request replay", err)
	}
	return int(tag.RowsAffected()), nil
}

// ReplayRequests implements projection.DeadLetterReplayer.
func (st *ProjectionStore) ReplayRequests(ctx context.Context, k projection.Key, limit int) ([]projection.DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	return st.queryDeadLetters(ctx, st.pool, "replay requests", k, ` AND replay_requested_at IS NOT NULL`, limit, false)
}

// Activate implements projection.Store.
func (st *ProjectionStore) Activate(ctx context.Context, k projection.Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	_, err := st.pool.Exec(ctx, `INSERT INTO `+st.s+`.projection_active AS a (name, version) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version, since = clock_timestamp() WHERE a.version < EXCLUDED.version`, k.Name, k.Version)
	if err != nil {
		return st.translate("activate", err)
	}
	return nil
}

const projectionStatusSQL = `SELECT p.name, p.version, p.state, p.commit_xid, p.seq, p.events, p.owner, p.epoch,
		CASE WHEN isfinite(p.lease_until) THEN p.lease_until END, p.lease_until > clock_timestamp(), coalesce(a.version, 0), p.failed_xid, p.failed_seq, p.error, p.updated_at, p.read_model,
		p.paused
	FROM __S__.projections p LEFT JOIN __S__.projection_active a ON a.name = p.name`

func scanStatus(row pgx.Row) (projection.Status, error) {
	var s projection.Status
	var state string
	var commit, seq, events, epoch, fcommit, fseq int64
	var live bool
	var active int
	var until *time.Time
	var readModel string
	if err := row.Scan(&s.Key.Name, &s.Key.Version, &state, &commit, &seq, &events, &s.Owner, &epoch, &until,
		&live, &active, &fcommit, &fseq, &s.Error, &s.UpdatedAt, &readModel, &s.Paused); err != nil {
		return s, err
	}
	s.ReadModel = projection.ReadModelKind(readModel)
	s.State = projection.State(state)
	s.Checkpoint = journal.Position{Commit: uint64(commit), Seq: uint64(seq)}
	s.FailedAt = journal.Position{Commit: uint64(fcommit), Seq: uint64(fseq)}
	s.Events, s.Epoch = uint64(events), uint64(epoch)
	s.Active = active == s.Key.Version
	switch {
	case s.State == projection.StateFailed:
	case active > s.Key.Version:
		s.State = projection.StateSuperseded
	case s.State == projection.StateRunning && !live:
		s.State = projection.StateStopped // no runner renewed the lease in time
	}
	if until != nil {
		s.LeaseUntil = until.UTC()
	}
	return s, nil
}

// Status implements projection.Store.
func (st *ProjectionStore) Status(ctx context.Context, k projection.Key) (projection.Status, error) {
	if err := k.Validate(); err != nil {
		return projection.Status{}, err
	}
	s, err := scanStatus(st.pool.QueryRow(ctx, st.sql(projectionStatusSQL)+` WHERE p.name = $1 AND p.version = $2`, k.Name, k.Version))
	if errors.Is(err, pgx.ErrNoRows) {
		var active int
		if err := st.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+st.s+`.projection_active WHERE name = $1`, k.Name).Scan(&active); err != nil {
			return projection.Status{}, st.translate("status", err)
		}
		return projection.Status{Key: k, State: projection.StateIdle, Active: active == k.Version}, nil
	}
	if err != nil {
		return projection.Status{}, st.translate("status", err)
	}
	one := []projection.Status{s}
	if err := st.withSlices(ctx, one, ` WHERE name = $1 AND version = $2`, k.Name, k.Version); err != nil {
		return projection.Status{}, err
	}
	return one[0], nil
}

// Statuses implements projection.Store.
func (st *ProjectionStore) Statuses(ctx context.Context) ([]projection.Status, error) {
	rows, err := st.pool.Query(ctx, st.sql(projectionStatusSQL)+` ORDER BY p.name, p.version`)
	if err != nil {
		return nil, st.translate("statuses", err)
	}
	defer rows.Close()
	var out []projection.Status
	for rows.Next() {
		s, err := scanStatus(rows)
		if err != nil {
			return nil, st.translate("statuses", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, st.translate("statuses", err)
	}
	if err := st.withSlices(ctx, out, ""); err != nil {
		return nil, err
	}
	return out, nil
}

func (st *ProjectionStore) sql(q string) string { return strings.ReplaceAll(q, "__S__.", st.s+".") }

// Reset implements projection.Store: in one transaction it locks the row
// (waiting for a batch in flight), runs clear, moves the checkpoint back to
// zero with a new epoch (the runner that held the lease is fenced), and
// deletes k's dead letters and rows; a sliced projection's slices move back
// to zero and their leases are fenced in the same transaction.
func (st *ProjectionStore) Reset(ctx context.Context, k projection.Key, clear func(ctx context.Context, tx pgx.Tx) error) error {
	if err := k.Validate(); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projections (name, version) VALUES ($1, $2)
			ON CONFLICT (name, version) DO UPDATE SET updated_at = clock_timestamp()`, k.Name, k.Version); err != nil {
			return st.translate("reset", err)
		}
		if clear != nil {
			if err := clear(ctx, tx); err != nil {
				return fmt.Errorf("projection %s: reset: clearing the read model failed, nothing was reset: %w", k, err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE `+st.s+`.projections SET commit_xid = 0, seq = 0, events = 0, owner = '',
				epoch = epoch + 1, lease_until = '-infinity', state = `+stateAfterSQL(projection.OpReset, "state", "paused")+`, error = '', failed_xid = 0, failed_seq = 0,
				updated_at = clock_timestamp()
			WHERE name = $1 AND version = $2`, k.Name, k.Version); err != nil {
			return st.translate("reset", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+st.s+`.projection_dead_letters WHERE name = $1 AND version = $2`, k.Name, k.Version); err != nil {
			return st.translate("reset", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+st.s+`.projection_slices SET commit_xid = 0, seq = 0, events = 0, owner = '',
				member = '', event_id = NULL, epoch = epoch + 1, lease_until = '-infinity', updated_at = clock_timestamp()
			WHERE name = $1 AND version = $2`, k.Name, k.Version); err != nil {
			return st.translate("reset: slices", err)
		}
		return st.deleteRows(ctx, tx, k)
	})
}
