package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// SnapshotStore is the Postgres snapshots.Store: one row per stream and
// version in the snapshots table of Config.Schema. Safe for concurrent use.
type SnapshotStore struct {
	pool *pgxpool.Pool
	cfg  Config
	s    string
}

var (
	_ snapshots.Store  = (*SnapshotStore)(nil)
	_ snapshots.Lister = (*SnapshotStore)(nil)
)

// NewSnapshotStore returns a SnapshotStore on pool and cfg.Schema. It validates
// cfg and does no I/O: run Migrate first, or calls fail with a
// journal.ErrStoreNotOpen error saying so.
func NewSnapshotStore(pool *pgxpool.Pool, cfg Config) (*SnapshotStore, error) {
	if pool == nil {
		return nil, errors.New("postgres: NewSnapshotStore: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &SnapshotStore{pool: pool, cfg: cfg, s: cfg.quotedSchema()}, nil
}

func (st *SnapshotStore) translate(op string, err error) error {
	return translateErr(st.cfg.Schema, "snapshots: "+op, err)
}

// Save stores s, replacing a snapshot of the same stream and version.
// CreatedAt is kept to the microsecond (rounded); zero means now.
func (st *SnapshotStore) Save(ctx context.Context, s snapshots.Snapshot) error {
	if err := s.Validate(); err != nil {
		return err
	}
	s.Stream = s.Stream.Normalize()
	if s.CreatedAt.IsZero() {
		s.CreatedAt = st.cfg.Clock()
	}
	created := s.CreatedAt.Round(time.Microsecond).UTC()
	state := s.State
	if state == nil {
		state = []byte{}
	}
	_, err := st.pool.Exec(ctx, `INSERT INTO `+st.s+`.snapshots (partition, tag, version, schema_version, state, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (partition, tag, version) DO UPDATE SET schema_version = excluded.schema_version,
			state = excluded.state, created_at = excluded.created_at`,
		s.Stream.Partition, string(s.Stream.Tag), i64(s.Version), int32(s.SchemaVersion), state, created)
	if err != nil {
		return st.translate("save", err)
	}
	return nil
}

// Load returns the newest snapshot of stream with Version ≤ atOrBelow, or an
// error wrapping snapshots.ErrNotFound.
func (st *SnapshotStore) Load(ctx context.Context, stream journal.StreamID, atOrBelow uint64) (snapshots.Snapshot, error) {
	if err := snapshots.ValidateStream(stream); err != nil {
		return snapshots.Snapshot{}, err
	}
	stream = stream.Normalize()
	out := snapshots.Snapshot{Stream: stream}
	var v int64
	var sv int32
	err := st.pool.QueryRow(ctx, `SELECT version, schema_version, state, created_at FROM `+st.s+`.snapshots
		WHERE partition = $1 AND tag = $2 AND version <= $3 ORDER BY version DESC LIMIT 1`,
		stream.Partition, string(stream.Tag), i64(atOrBelow)).Scan(&v, &sv, &out.State, &out.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return snapshots.Snapshot{}, fmt.Errorf("%w: no snapshot of stream %s at or below version %d", snapshots.ErrNotFound, stream, atOrBelow)
	}
	if err != nil {
		return snapshots.Snapshot{}, st.translate("load", err)
	}
	out.Version, out.SchemaVersion, out.CreatedAt = uint64(v), int(sv), out.CreatedAt.UTC()
	return out, nil
}

// List returns the stream's snapshots without state, oldest version first.
func (st *SnapshotStore) List(ctx context.Context, stream journal.StreamID) ([]snapshots.Info, error) {
	if err := snapshots.ValidateStream(stream); err != nil {
		return nil, err
	}
	stream = stream.Normalize()
	rows, err := st.pool.Query(ctx, `SELECT version, schema_version, octet_length(state), created_at FROM `+st.s+`.snapshots
		WHERE partition = $1 AND tag = $2 ORDER BY version`, stream.Partition, string(stream.Tag))
	if err != nil {
		return nil, st.translate("list", err)
	}
	defer rows.Close()
	var out []snapshots.Info
	for rows.Next() {
		var v int64
		var sv, size int32
		var at time.Time
		if err := rows.Scan(&v, &sv, &size, &at); err != nil {
			return nil, st.translate("list", err)
		}
		out = append(out, snapshots.Info{Version: uint64(v), SchemaVersion: int(sv), Size: int(size), CreatedAt: at.UTC()})
	}
	if err := rows.Err(); err != nil {
		return nil, st.translate("list", err)
	}
	return out, nil
}

// Prune deletes all but the newest keep snapshots of stream and returns how
// many it deleted.
func (st *SnapshotStore) Prune(ctx context.Context, stream journal.StreamID, keep int) (int, error) {
	if err := snapshots.ValidatePrune(stream, keep); err != nil {
		return 0, err
	}
	stream = stream.Normalize()
	ct, err := st.pool.Exec(ctx, `DELETE FROM `+st.s+`.snapshots WHERE partition = $1 AND tag = $2 AND version < coalesce((
		SELECT version FROM `+st.s+`.snapshots WHERE partition = $1 AND tag = $2 ORDER BY version DESC OFFSET $3 LIMIT 1), -1) + 1
		AND $3 >= 0`, stream.Partition, string(stream.Tag), int64(keep))
	if err != nil {
		return 0, st.translate("prune", err)
	}
	return int(ct.RowsAffected()), nil
}

// Streams implements snapshots.Lister: it summarizes every stream of
// partition ("" for every partition) that has snapshots, ordered by
// partition, then tag, in one pass over the snapshots table's primary key.
func (st *SnapshotStore) Streams(ctx context.Context, partition string) ([]snapshots.StreamSummary, error) {
	rows, err := st.pool.Query(ctx, `SELECT partition, tag, count(*), min(version), max(version),
		(array_agg(created_at ORDER BY version DESC))[1], sum(octet_length(state))
		FROM `+st.s+`.snapshots WHERE $1 = '' OR partition = $1
		GROUP BY partition, tag ORDER BY partition, tag`, partition)
	if err != nil {
		return nil, st.translate("streams", err)
	}
	defer rows.Close()
	var out []snapshots.StreamSummary
	for rows.Next() {
		var (
			s                 snapshots.StreamSummary
			tag               string
			n, oldest, newest int64
			size              int64
		)
		if err := rows.Scan(&s.Stream.Partition, &tag, &n, &oldest, &newest, &s.NewestAt, &size); err != nil {
			return nil, st.translate("streams", err)
		}
		s.Stream.Tag, s.Count, s.Oldest, s.Newest, s.Size = journal.Tag(tag), int(n), uint64(oldest), uint64(newest), size
		s.NewestAt = s.NewestAt.UTC()
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, st.translate("streams", err)
	}
	return out, nil
}
