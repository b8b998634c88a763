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

// ProjectionStore is the Postgres projection.Store (and RowStore,
// DeadLetterReplayer, Pauser). The handler gets the pgx.Tx that also moves
// the checkpoints, so a read model in the same database is updated exactly
// once per event; Commit locks the slices' rows and checks each lease
// (database clock) before the handler runs.
type ProjectionStore struct {
	pool *pgxpool.Pool
	cfg  Config
	s    string
	// buffers holds the rows writes of each transaction a Commit or a
	// replay passes to its handler (pgx.Tx → *projection.RowWrites).
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

// stateAfterSQL is projection.State.Next as SQL: the state after op of the
// state column col, when the pause holds after op (paused, SQL) or not.
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

// Pause implements projection.Pauser: it fences every slice lease (a new
// epoch), records the pause and leaves checkpoints, rows and dead letters as
// they are.
func (st *ProjectionStore) Pause(ctx context.Context, k projection.Key) error {
	return st.pauseOrResume(ctx, k, "pause", `UPDATE `+st.s+`.projections SET paused = true,
			state = `+stateAfterSQL(projection.OpPause, "state", "true")+`, updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND NOT paused RETURNING 1),
	s AS (UPDATE `+st.s+`.projection_slices SET epoch = epoch + 1, owner = '', lease_until = '-infinity'
		WHERE name = $1 AND version = $2 AND EXISTS (SELECT FROM r))`)
}

// Resume implements projection.Pauser.
func (st *ProjectionStore) Resume(ctx context.Context, k projection.Key) error {
	return st.pauseOrResume(ctx, k, "resume", `UPDATE `+st.s+`.projections SET paused = false,
			state = `+stateAfterSQL(projection.OpResume, "state", "false")+`, updated_at = clock_timestamp()
		WHERE name = $1 AND version = $2 AND paused RETURNING 1)`)
}

// pauseOrResume runs the statement change (on k's row, as the CTE r) and
// fails when k is unknown.
func (st *ProjectionStore) pauseOrResume(ctx context.Context, k projection.Key, op, change string) error {
	if err := k.Validate(); err != nil {
		return err
	}
	var exists bool
	if err := st.pool.QueryRow(ctx, `WITH r AS (`+change+`
		SELECT EXISTS (SELECT FROM r) OR EXISTS (SELECT FROM `+st.s+`.projections WHERE name = $1 AND version = $2)`, k.Name, k.Version).Scan(&exists); err != nil {
		return st.translate(op, err)
	}
	if !exists {
		return fmt.Errorf("projection %s is unknown to schema %q: nothing to %s", k, st.cfg.Schema, op)
	}
	return nil
}

// DeadLetter implements projection.Store: the letter commits with the batch.
func (st *ProjectionStore) DeadLetter(ctx context.Context, tx pgx.Tx, d projection.DeadLetter) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+st.s+`.projection_dead_letters (name, version, event_id, commit_xid, seq, error, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		d.Key.Name, d.Key.Version, d.Record.ID, int64(d.Record.Position.Commit), int64(d.Record.Position.Seq), d.Error, d.Attempts)
	return st.translate("dead letter", err)
}

// DeadLetters implements projection.Store. The records are read back from
// the events table, or its archive (a dead letter refers to its event).
func (st *ProjectionStore) DeadLetters(ctx context.Context, k projection.Key) ([]projection.DeadLetter, error) {
	return st.queryDeadLetters(ctx, st.pool, "dead letters", k, "", 0, false)
}

// queryDeadLetters returns k's dead letters matching cond, in position
// order, at most limit (0: all), with their records, locked with lock.
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
	var d projection.DeadLetter
	var commit, seq int64
	var requested *time.Time
	if _, err := pgx.ForEachRow(rows, []any{&d.Record.ID, &commit, &seq, &d.Error, &d.Attempts, &d.At, &requested}, func() error {
		d.Key, d.Record.Position, d.ReplayRequestedAt = k, journal.Position{Commit: uint64(commit), Seq: uint64(seq)}, time.Time{}
		if requested != nil {
			d.ReplayRequestedAt = requested.UTC()
		}
		out = append(out, d)
		return nil
	}); err != nil {
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

// ReplayDeadLetter implements projection.DeadLetterReplayer: one transaction
// locks the letter's row, runs apply in a savepoint and deletes the row.
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
		herr = st.applyBuffered(ctx, sp, pos, func(ctx context.Context, tx pgx.Tx) error { return apply(ctx, tx, d) })
		if he := (*projection.HandlerError)(nil); errors.As(herr, &he) {
			herr = he.Err
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
	return st.translate("activate", err)
}

// Status implements projection.Store.
func (st *ProjectionStore) Status(ctx context.Context, k projection.Key) (projection.Status, error) {
	if err := k.Validate(); err != nil {
		return projection.Status{}, err
	}
	out, err := st.statuses(ctx, ` WHERE p.name = $1 AND p.version = $2`, k.Name, k.Version)
	if err != nil || len(out) == 1 {
		return append(out, projection.Status{})[0], err
	}
	var active int
	if err := st.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+st.s+`.projection_active WHERE name = $1`, k.Name).Scan(&active); err != nil {
		return projection.Status{}, st.translate("status", err)
	}
	return projection.Status{Key: k, State: projection.StateIdle, Active: active == k.Version}, nil
}

// Statuses implements projection.Store.
func (st *ProjectionStore) Statuses(ctx context.Context) ([]projection.Status, error) {
	return st.statuses(ctx, "")
}

// statuses returns the status of each projection whose row p where (with
// args) selects, by name and version (projection.SummarizeSlices).
func (st *ProjectionStore) statuses(ctx context.Context, where string, args ...any) ([]projection.Status, error) {
	rows, err := st.pool.Query(ctx, `SELECT p.name, p.version, p.state, coalesce(a.version, 0), p.failed_xid, p.failed_seq, p.error, p.updated_at, p.read_model, p.paused
		FROM `+st.s+`.projections p LEFT JOIN `+st.s+`.projection_active a ON a.name = p.name`+where+` ORDER BY p.name, p.version`, args...)
	if err != nil {
		return nil, st.translate("status", err)
	}
	var out []projection.Status
	var actives []int
	var s projection.Status
	var active int
	var fcommit, fseq int64
	if _, err := pgx.ForEachRow(rows, []any{&s.Key.Name, &s.Key.Version, &s.State, &active, &fcommit, &fseq, &s.Error, &s.UpdatedAt, &s.ReadModel, &s.Paused}, func() error {
		s.FailedAt = journal.Position{Commit: uint64(fcommit), Seq: uint64(fseq)}
		out, actives = append(out, s), append(actives, active)
		return nil
	}); err != nil {
		return nil, st.translate("status", err)
	}
	sets, err := st.querySlices(ctx, st.pool, strings.ReplaceAll(where, "p.", ""), args...)
	if err != nil {
		return nil, st.translate("status", err)
	}
	for i, s := range out {
		x := sets[s.Key]
		if x == nil {
			x = &sliceSet{} // never joined (or claimed by a build before the one-slice form: stopped)
		}
		out[i] = projection.SummarizeSlices(s, actives[i], x.layout, x.slices, x.live)
	}
	return out, nil
}

func (st *ProjectionStore) sql(q string) string { return strings.ReplaceAll(q, "__S__.", st.s+".") }

// Reset implements projection.Store: one transaction locks the row, runs
// clear, moves every slice's checkpoint back to zero with a new epoch (the
// lease holder is fenced) and deletes k's dead letters and rows.
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
		_, err := tx.Exec(ctx, `WITH p AS (UPDATE `+st.s+`.projections SET state = `+stateAfterSQL(projection.OpReset, "state", "paused")+`,
				error = '', failed_xid = 0, failed_seq = 0, updated_at = clock_timestamp() WHERE name = $1 AND version = $2),
			d AS (DELETE FROM `+st.s+`.projection_dead_letters WHERE name = $1 AND version = $2),
			r AS (DELETE FROM `+st.s+`.projection_rows WHERE name = $1 AND version = $2)
			UPDATE `+st.s+`.projection_slices SET commit_xid = 0, seq = 0, events = 0, owner = '', member = '', event_id = NULL,
				epoch = epoch + 1, lease_until = '-infinity', updated_at = clock_timestamp()
			WHERE name = $1 AND version = $2`, k.Name, k.Version)
		return st.translate("reset", err)
	})
}
