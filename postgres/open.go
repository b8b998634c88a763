package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgtrace"
)

// DefaultMaxConns is the pool size Open uses when neither Config.MaxConns
// nor the URL's pool_max_conns sets one.
const DefaultMaxConns = 16

// Store is everything a service needs from one Postgres schema, opened by
// Open: the pool, the journal (with its sessions), the snapshot store and the
// projection store, all on the same schema and pool. Its fields are safe for
// concurrent use; Close releases them all.
type Store struct {
	// Pool is the traced pool every store below uses; Close closes it.
	Pool *pgxpool.Pool
	// Journal is the journal and its sessions: runtime.Config.Journal.
	Journal *Journal
	// Snapshots is the snapshot store: runtime.Config.Snapshots.
	Snapshots *SnapshotStore
	// Projections is the projection store for projection.NewRunner.
	Projections *ProjectionStore
	// Keys is the erasure key store (runtime.Config.KeyStore) when Open's
	// Config had KeyStore or KeyStoreURL, else nil; Close closes its own
	// pool (KeyStoreURL).
	Keys *KeyStore
	// KeysAddress names the key store's database like Address.
	KeysAddress string
	// Config is what every store was built with, defaults applied.
	Config Config
	// Address names the database Open reached, without credentials.
	Address string
	// keysPool is the key store's own pool (Config.KeyStoreURL), else nil.
	keysPool *pgxpool.Pool
}

// Close closes the journal (its batch workers and LISTEN connection; calls
// in flight fail with journal.ErrStoreNotOpen), then the pool, which the
// snapshot and projection stores share. Shut down every runtime and runner
// using the Store first. Idempotent.
func (s *Store) Close() {
	_ = s.Journal.Close()
	s.Pool.Close()
	if s.keysPool != nil {
		s.keysPool.Close()
	}
}

// KeyStoreSchemaFor is the key store schema beside the journal schema
// schema: "<schema>_keys". Open, the bank example and the scribe CLI (-keys)
// default to it, so they find the same keys.
func KeyStoreSchemaFor(schema string) string {
	if schema == "" {
		schema = "scribe"
	}
	return schema + "_keys"
}

// Open connects to the database at url, migrates cfg.Schema (or only
// verifies it: cfg.VerifyOnly) and returns the stores on it, every statement
// traced; Close releases them:
//
//	store, err := postgres.Open(ctx, url, postgres.Config{Schema: "shop"})
//	if err != nil { return err } // says what to fix
//	defer store.Close()
//
// At start, a database that cannot be reached, refused credentials, an
// unknown database or a schema not migrated (VerifyOnly) or migrated by a
// newer incompatible build are errors matching journal.ErrConfiguration
// that name the database (never the password) and what to check; once Open
// returned, the same failure is an outage (journal.ErrUnavailable). The key
// store (Config.KeyStore, KeyStoreURL) fails the same way.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", journal.ErrConfiguration, err)
	}
	pool, err := connect(ctx, url, cfg)
	if err != nil {
		return nil, err
	}
	where := Address(pool.Config().ConnConfig)
	if cfg.VerifyOnly {
		err = VerifySchema(ctx, pool, cfg)
	} else {
		err = Migrate(ctx, pool, cfg)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	// The constructors below validate cfg, already validated above, and do
	// no I/O: they cannot fail here, but their errors are still checked.
	j, err := NewJournal(pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	snaps, err := NewSnapshotStore(pool, cfg)
	if err == nil {
		var projs *ProjectionStore
		if projs, err = NewProjectionStore(pool, cfg); err == nil {
			st := &Store{Pool: pool, Journal: j, Snapshots: snaps, Projections: projs, Config: cfg, Address: where}
			if cfg.KeyStore == nil && cfg.KeyStoreURL == "" {
				return st, nil
			}
			if err = st.openKeys(ctx); err == nil {
				return st, nil
			}
		}
	}
	_ = j.Close()
	pool.Close()
	return nil, err
}

// openKeys sets up s.Keys as s.Config says (KeyStore, KeyStoreURL).
func (s *Store) openKeys(ctx context.Context) (err error) {
	defer func() {
		if err != nil && s.keysPool != nil {
			s.keysPool.Close()
			s.keysPool = nil
		}
	}()
	var kcfg KeyStoreConfig
	if s.Config.KeyStore != nil {
		kcfg = *s.Config.KeyStore
	}
	if kcfg.Schema == "" {
		kcfg.Schema = KeyStoreSchemaFor(s.Config.Schema)
	}
	pool, where := s.Pool, s.Address
	if s.Config.KeyStoreURL != "" {
		kp, err := connect(ctx, s.Config.KeyStoreURL, s.Config)
		if err != nil {
			return fmt.Errorf("postgres: the key store's database (Config.KeyStoreURL): %w", err)
		}
		s.keysPool, pool, where = kp, kp, Address(kp.Config().ConnConfig)
	} else if kcfg.Schema == s.Config.Schema {
		return fmt.Errorf("%w: postgres: the key store schema %q is the journal's schema; keep keys in a schema of their own (a dump of the journal must hold no key), such as %q", journal.ErrConfiguration, kcfg.Schema, KeyStoreSchemaFor(s.Config.Schema))
	}
	if s.Config.VerifyOnly {
		var exists bool
		err = pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{kcfg.Schema, "subjects"}.Sanitize()).Scan(&exists)
		if err == nil && !exists {
			err = fmt.Errorf("%w: %w: postgres: the key store is missing: schema %q at %s has none: restore it from its backup, check its database URL and schema, or create one (postgres.MigrateKeyStore, scribe migrate keys)", journal.ErrConfiguration, erasure.ErrKeyStoreUnavailable, kcfg.Schema, where)
		}
	} else {
		err = MigrateKeyStore(ctx, pool, kcfg)
	}
	if err != nil {
		return fmt.Errorf("postgres: key store schema %q at %s: %w", kcfg.Schema, where, err)
	}
	if s.Keys, err = NewKeyStore(pool, kcfg); err != nil {
		return err
	}
	s.KeysAddress = where
	return nil
}

// Connect opens a pool on url with cfg.MaxConns and cfg.TracerProvider and
// checks that it reaches the database, failing fast like Open. The caller
// closes the pool.
func Connect(ctx context.Context, url string, cfg Config) (*pgxpool.Pool, error) {
	return connect(ctx, url, cfg)
}

func connect(ctx context.Context, url string, cfg Config) (*pgxpool.Pool, error) {
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn's parse errors redact the password.
		return nil, fmt.Errorf("%w: postgres: the database URL is not valid (%v); give a URL such as postgres://user@localhost:5432/db?sslmode=disable", journal.ErrConfiguration, err)
	}
	switch {
	case cfg.MaxConns > 0:
		poolCfg.MaxConns = cfg.MaxConns
	case cfg.MaxConns < 0:
		return nil, fmt.Errorf("%w: postgres: Config.MaxConns is %d; give a positive pool size, or 0 for the default", journal.ErrConfiguration, cfg.MaxConns)
	case !strings.Contains(url, "pool_max_conns"):
		poolCfg.MaxConns = DefaultMaxConns
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	poolCfg.ConnConfig.Tracer = pgtrace.New(tp)
	where := Address(poolCfg.ConnConfig)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, startupError(ctx, where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, startupError(ctx, where, err)
	}
	return pool, nil
}

// VerifySchema checks, changing nothing, that cfg.Schema is migrated to
// this build's version (or past it compatibly); otherwise it returns an error
// matching journal.ErrConfiguration that says what to run.
func VerifySchema(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	rep, err := MigrationStatus(ctx, pool, cfg)
	if err != nil {
		if unavailable(err) {
			return startupError(ctx, Address(pool.Config().ConnConfig), err)
		}
		return err
	}
	switch {
	case rep.Current == 0:
		return fmt.Errorf("%w: %w: postgres: schema %q has no Scribe tables; run postgres.Migrate (or `scribe migrate up`), or open without Config.VerifyOnly to migrate at start", journal.ErrConfiguration, journal.ErrStoreNotOpen, rep.Schema)
	case len(rep.Pending) > 0:
		return fmt.Errorf("%w: %w: postgres: schema %q is at version %d and this build needs version %d (%d migrations pending, first %s); run postgres.Migrate (or `scribe migrate up`) before starting this build", journal.ErrConfiguration, journal.ErrStoreNotOpen, rep.Schema, rep.Current, rep.Latest, len(rep.Pending), rep.Pending[0].Name)
	case rep.TooNew():
		return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			return checkNewerSchema(ctx, tx, rep.Schema, rep.Current, rep.Latest)
		})
	}
	return nil
}

// Address renders the database a connection configuration names, without
// its password: "user@host:port/database", with every host of a multi-host
// URL ("user@h1:p1,h2:p2/database").
func Address(c *pgx.ConnConfig) string {
	hosts := []string{net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))}
	for _, f := range c.Fallbacks {
		h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port)))
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return c.User + "@" + strings.Join(hosts, ",") + "/" + c.Database
}

// startupError reports a failure to connect at start (Open, Migrate,
// VerifySchema) as a configuration error (journal.ErrConfiguration) naming
// where (the database's address without password, from Address) and what
// to check: the credentials refused, the database unknown, or the server
// not reached. The driver's error is kept as text only, so the result does
// not also match the retryable journal.ErrUnavailable. A context that ended
// first is reported wrapping the context's error instead. Errors of a live
// server about anything else are returned wrapped as they are.
func startupError(ctx context.Context, where string, err error) error {
	if where != "" {
		where = " at " + where
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("postgres: no connection to the database%s before the context ended (%v); check the host and port of the database URL and that the server runs there: %w", where, err, ctxErr)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return fmt.Errorf("%w: postgres: the database server%s refused the credentials (%s); check the user and password of the database URL and the server's pg_hba.conf", journal.ErrConfiguration, where, pgErr.Message)
		case "3D000": // invalid_catalog_name
			return fmt.Errorf("%w: postgres: the database server%s has no such database (%s); check the database name in the URL, or create it (createdb)", journal.ErrConfiguration, where, pgErr.Message)
		}
	}
	if unavailable(err) {
		return fmt.Errorf("%w: postgres: cannot reach the database%s (%v); at start this is a configuration error, not an outage: check the URL's host and port and that the server runs and accepts connections", journal.ErrConfiguration, where, err)
	}
	return fmt.Errorf("postgres: connecting to the database%s: %w", where, err)
}
