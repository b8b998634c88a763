package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
)

// DefaultKeyStoreSchema is KeyStoreConfig.Schema's default:
// KeyStoreSchemaFor("scribe").
const DefaultKeyStoreSchema = "scribe_keys"

// KeyStoreConfig configures a KeyStore.
type KeyStoreConfig struct {
	// Schema is the Postgres schema holding the data keys. It must not be
	// the journal's schema: a dump of the journal schema must hold no key,
	// and the keys' backups need a policy of their own (see KeyStore).
	// Default DefaultKeyStoreSchema ("scribe_keys").
	Schema string
}

func (c KeyStoreConfig) withDefaults() (KeyStoreConfig, error) {
	if c.Schema == "" {
		c.Schema = DefaultKeyStoreSchema
	}
	if _, err := (Config{Schema: c.Schema}).withDefaults(); err != nil {
		return c, fmt.Errorf("postgres: KeyStoreConfig.Schema: %w", err)
	}
	return c, nil
}

// KeyStore is the Postgres erasure.KeyStore: one row per data subject in its
// own schema, holding the subject's 32-byte data key until the erasure. Call
// MigrateKeyStore before use; safe for concurrent use, also across processes.
//
// DestroyKey sets the key to NULL, but the old row version stays in the data
// files until vacuum, and in WAL and base backups taken before: keep the key
// store's backups shorter-lived than the erasure you promise, or keep its keys
// wrapped by a KMS. The journal's own backups hold ciphertext only.
type KeyStore struct {
	pool *pgxpool.Pool
	cfg  KeyStoreConfig
	t    keyStoreTables
}

type keyStoreTables struct {
	subjects, streams, head string
}

var _ erasure.KeyStore = (*KeyStore)(nil)

// NewKeyStore returns a key store on pool. It does no I/O; run
// MigrateKeyStore (or `scribe migrate up -keys`) first.
func NewKeyStore(pool *pgxpool.Pool, cfg KeyStoreConfig) (*KeyStore, error) {
	if pool == nil {
		return nil, errors.New("postgres: NewKeyStore: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := pgx.Identifier{cfg.Schema}.Sanitize()
	return &KeyStore{pool: pool, cfg: cfg, t: keyStoreTables{subjects: s + ".subjects", streams: s + ".subject_streams", head: s + ".erasure_head"}}, nil
}

// MigrateKeyStore creates cfg.Schema if needed and applies the key store's
// embedded migrations, exactly as Migrate does for a journal schema
// (idempotent, safe from several processes at once).
func MigrateKeyStore(ctx context.Context, pool *pgxpool.Pool, cfg KeyStoreConfig) error {
	if pool == nil {
		return errors.New("postgres: MigrateKeyStore: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	ms, err := loadMigrations(keyStoreMigrationFiles, "keystore_migrations")
	if err != nil {
		return err
	}
	return applyMigrations(ctx, pool, cfg.Schema, ms)
}

func ksErr(op, subject string, err error) error {
	return keyStoreErr(fmt.Sprintf("%s of subject %q", op, subject), err)
}

// keyStoreErr translates a driver error of the key store like the
// journal's, and marks the key store's absence: a missing schema or table
// (undefined_table, invalid_schema_name) or a database that cannot be
// reached matches erasure.ErrKeyStoreUnavailable (a missing schema also
// journal.ErrStoreNotOpen, an unreachable database journal.ErrUnavailable:
// retry later), so that callers tell it from an erased subject.
func keyStoreErr(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		return fmt.Errorf("%w: %w: postgres: key store: %s: the key store is missing (%s): restore it from its backup (sealed data is unreadable until then), point the service at it, or create one (MigrateKeyStore)", erasure.ErrKeyStoreUnavailable, journal.ErrStoreNotOpen, op, pgErr.Message)
	}
	out := translateErr("", "key store: "+op, err)
	if errors.Is(out, journal.ErrUnavailable) {
		return fmt.Errorf("%w: %w", erasure.ErrKeyStoreUnavailable, out)
	}
	return out
}

// erasureColumns are the columns an erasureRow scans.
const erasureColumns = `erased_at, erased_by, erasure_seq, keyless, completed_at IS NOT NULL`

// erasureRow is the erasure columns of a subjects row; at is nil for a
// subject whose erasure was not begun.
type erasureRow struct {
	at                 *time.Time
	by                 *string
	seq                *int64
	keyless, completed bool
}

func (r *erasureRow) dest() []any { return []any{&r.at, &r.by, &r.seq, &r.keyless, &r.completed} }

func (r *erasureRow) state() erasure.ErasureState {
	switch {
	case r.at == nil:
		return erasure.NotErased
	case r.completed:
		return erasure.ErasureComplete
	case r.keyless:
		return erasure.ErasureKeyDestroyed
	}
	return erasure.ErasurePending
}

func (r *erasureRow) erasure(subject string) erasure.Erasure {
	e := erasure.Erasure{Subject: subject, By: deref(r.by), State: r.state()}
	if r.at != nil {
		e.At = r.at.UTC()
	}
	if r.seq != nil {
		e.Sequence = uint64(*r.seq)
	}
	return e
}

// DataKey implements erasure.KeyStore.
func (k *KeyStore) DataKey(ctx context.Context, subject string) (erasure.DataKey, error) {
	if err := erasure.ValidateSubject(subject); err != nil {
		return erasure.DataKey{}, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		var key []byte
		var e erasureRow
		err := k.pool.QueryRow(ctx, `SELECT data_key, `+erasureColumns+` FROM `+k.t.subjects+` WHERE subject = $1`, subject).Scan(append([]any{&key}, e.dest()...)...)
		switch {
		case err == nil && e.at != nil:
			return erasure.DataKey{}, &erasure.SubjectErasedError{Erasure: e.erasure(subject)}
		case err == nil:
			return erasure.DataKeyFromBytes(key)
		case !errors.Is(err, pgx.ErrNoRows):
			return erasure.DataKey{}, ksErr("reading the key", subject, err)
		}
		fresh, err := erasure.NewDataKey()
		if err != nil {
			return erasure.DataKey{}, err
		}
		tag, err := k.pool.Exec(ctx, `INSERT INTO `+k.t.subjects+` (subject, data_key) VALUES ($1, $2) ON CONFLICT (subject) DO NOTHING`, subject, fresh.Bytes())
		if err != nil {
			return erasure.DataKey{}, ksErr("creating the key", subject, err)
		}
		if tag.RowsAffected() == 1 {
			return fresh, nil
		}
		// Another caller created (or erased) it first: read theirs.
	}
	return erasure.DataKey{}, ksErr("creating the key", subject, errors.New("the row kept changing; retry"))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Lookup implements erasure.KeyStore.
func (k *KeyStore) Lookup(ctx context.Context, subjects []string) (erasure.Lookup, error) {
	out := erasure.Lookup{Keys: map[string]erasure.DataKey{}, Erased: map[string]erasure.Erasure{}}
	if len(subjects) == 0 {
		return out, nil
	}
	rows, err := k.pool.Query(ctx, `SELECT subject, data_key, `+erasureColumns+` FROM `+k.t.subjects+` WHERE subject = ANY($1)`, subjects)
	if err != nil {
		return erasure.Lookup{}, keyStoreErr(fmt.Sprintf("looking up %d subjects", len(subjects)), err)
	}
	defer rows.Close()
	for rows.Next() {
		var subject string
		var key []byte
		var e erasureRow
		if err := rows.Scan(append([]any{&subject, &key}, e.dest()...)...); err != nil {
			return erasure.Lookup{}, keyStoreErr("looking up subjects", err)
		}
		if e.at != nil {
			out.Erased[subject] = e.erasure(subject)
			continue
		}
		dk, err := erasure.DataKeyFromBytes(key)
		if err != nil {
			return erasure.Lookup{}, ksErr("reading the key", subject, err)
		}
		out.Keys[subject] = dk
	}
	if err := rows.Err(); err != nil {
		return erasure.Lookup{}, keyStoreErr("looking up subjects", err)
	}
	return out, nil
}

// BeginErasure implements erasure.KeyStore: one statement records the
// erasure and keeps the key (or finds the erasure begun before). A trigger
// gives the erasure its sequence number under the lock of the one-row
// erasure_head table, so sequence numbers commit in their order.
func (k *KeyStore) BeginErasure(ctx context.Context, subject, by string) (erasure.Erasure, error) {
	if err := erasure.ValidateSubject(subject); err != nil {
		return erasure.Erasure{}, err
	}
	if err := erasure.ValidateBy(by); err != nil {
		return erasure.Erasure{}, err
	}
	var e erasureRow
	err := k.pool.QueryRow(ctx, `INSERT INTO `+k.t.subjects+` AS s (subject, data_key, erased_at, erased_by) VALUES ($1, NULL, now(), $2)
		ON CONFLICT (subject) DO UPDATE SET erased_at = now(), erased_by = EXCLUDED.erased_by WHERE s.erased_at IS NULL
		RETURNING `+erasureColumns, subject, by).Scan(e.dest()...)
	if err == nil {
		return e.erasure(subject), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return erasure.Erasure{}, ksErr("beginning the erasure", subject, err)
	}
	// Already begun: report the original erasure.
	if err := k.pool.QueryRow(ctx, `SELECT `+erasureColumns+` FROM `+k.t.subjects+` WHERE subject = $1`, subject).Scan(e.dest()...); err != nil {
		return erasure.Erasure{}, ksErr("reading the erasure", subject, err)
	}
	out := e.erasure(subject)
	out.Repeat = true
	return out, nil
}

// DestroyKey implements erasure.KeyStore: one UPDATE sets the key column to
// NULL (see KeyStore for what Postgres keeps of the old row version).
func (k *KeyStore) DestroyKey(ctx context.Context, subject string) (erasure.Erasure, error) {
	return k.advance(ctx, "destroying the key", subject, `data_key = NULL`)
}

// CompleteErasure implements erasure.KeyStore.
func (k *KeyStore) CompleteErasure(ctx context.Context, subject string) (erasure.Erasure, error) {
	return k.advance(ctx, "completing the erasure", subject, `data_key = NULL, completed_at = coalesce(completed_at, now())`)
}

// advance applies set to subject's row if its erasure was begun.
func (k *KeyStore) advance(ctx context.Context, op, subject, set string) (erasure.Erasure, error) {
	if err := erasure.ValidateSubject(subject); err != nil {
		return erasure.Erasure{}, err
	}
	var e erasureRow
	err := k.pool.QueryRow(ctx, `UPDATE `+k.t.subjects+` SET `+set+` WHERE subject = $1 AND erased_at IS NOT NULL RETURNING `+erasureColumns, subject).Scan(e.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return erasure.Erasure{}, fmt.Errorf("%w: subject %q; erase it first", erasure.ErrNotErasing, subject)
	}
	if err != nil {
		return erasure.Erasure{}, ksErr(op, subject, err)
	}
	return e.erasure(subject), nil
}

// ErasureHead implements erasure.KeyStore: the one-row erasure_head's
// committed value (an erasure still in flight holds a greater one).
func (k *KeyStore) ErasureHead(ctx context.Context) (uint64, error) {
	var seq int64
	if err := k.pool.QueryRow(ctx, `SELECT seq FROM `+k.t.head).Scan(&seq); err != nil {
		return 0, keyStoreErr("reading the erasure head", err)
	}
	return uint64(seq), nil
}

// Erasures implements erasure.KeyStore.
func (k *KeyStore) Erasures(ctx context.Context, q erasure.ErasureQuery) ([]erasure.Erasure, error) {
	var lim *int
	if q.Limit > 0 {
		lim = &q.Limit
	}
	pending := ""
	if q.PendingOnly {
		pending = ` AND completed_at IS NULL`
	}
	if q.After > math.MaxInt64 {
		return nil, nil
	}
	rows, err := k.pool.Query(ctx, `SELECT subject, `+erasureColumns+` FROM `+k.t.subjects+` WHERE erasure_seq > $1`+pending+` ORDER BY erasure_seq LIMIT $2`, int64(q.After), lim)
	if err != nil {
		return nil, keyStoreErr("listing erasures", err)
	}
	defer rows.Close()
	var out []erasure.Erasure
	for rows.Next() {
		var subject string
		var e erasureRow
		if err := rows.Scan(append([]any{&subject}, e.dest()...)...); err != nil {
			return nil, keyStoreErr("listing erasures", err)
		}
		out = append(out, e.erasure(subject))
	}
	if err := rows.Err(); err != nil {
		return nil, keyStoreErr("listing erasures", err)
	}
	return out, nil
}

// Subjects implements erasure.KeyStore.
func (k *KeyStore) Subjects(ctx context.Context, after string, limit int) ([]erasure.Subject, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := k.pool.Query(ctx, `SELECT subject, created_at, `+erasureColumns+` FROM `+k.t.subjects+` WHERE subject COLLATE "C" > $1 ORDER BY subject COLLATE "C" LIMIT $2`, after, lim)
	if err != nil {
		return nil, keyStoreErr("listing subjects", err)
	}
	defer rows.Close()
	var out []erasure.Subject
	for rows.Next() {
		var s erasure.Subject
		var e erasureRow
		if err := rows.Scan(append([]any{&s.ID, &s.CreatedAt}, e.dest()...)...); err != nil {
			return nil, keyStoreErr("listing subjects", err)
		}
		s.CreatedAt = s.CreatedAt.UTC()
		if er := e.erasure(s.ID); er.State.Begun() {
			s.Erasure, s.ErasedAt, s.ErasedBy, s.Erased = er.State, er.At, er.By, true
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, keyStoreErr("listing subjects", err)
	}
	return out, nil
}

// BindStream implements erasure.KeyStore.
func (k *KeyStore) BindStream(ctx context.Context, subject string, stream journal.StreamID) error {
	if err := erasure.ValidateSubject(subject); err != nil {
		return err
	}
	stream = stream.Normalize()
	if _, err := k.pool.Exec(ctx, `INSERT INTO `+k.t.streams+` (subject, partition, tag) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, subject, stream.Partition, string(stream.Tag)); err != nil {
		return ksErr("binding stream "+stream.String(), subject, err)
	}
	return nil
}

// StreamSubjects implements erasure.KeyStore.
func (k *KeyStore) StreamSubjects(ctx context.Context, stream journal.StreamID) ([]string, error) {
	stream = stream.Normalize()
	rows, err := k.pool.Query(ctx, `SELECT subject FROM `+k.t.streams+` WHERE partition = $1 AND tag = $2`, stream.Partition, string(stream.Tag))
	if err != nil {
		return nil, keyStoreErr("listing the subjects of stream "+stream.String(), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, keyStoreErr("listing the subjects of stream "+stream.String(), err)
	}
	return out, nil
}

// Streams implements erasure.KeyStore.
func (k *KeyStore) Streams(ctx context.Context, subject string) ([]journal.StreamID, error) {
	rows, err := k.pool.Query(ctx, `SELECT partition, tag FROM `+k.t.streams+` WHERE subject = $1`, subject)
	if err != nil {
		return nil, ksErr("listing the streams", subject, err)
	}
	defer rows.Close()
	var out []journal.StreamID
	for rows.Next() {
		var s journal.StreamID
		var tag string
		if err := rows.Scan(&s.Partition, &tag); err != nil {
			return nil, ksErr("listing the streams", subject, err)
		}
		s.Tag = journal.Tag(tag)
		out = append(out, s)
	}
	return out, rows.Err()
}
