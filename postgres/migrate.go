package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed keystore_migrations/*.sql
var keyStoreMigrationFiles embed.FS

// migration is one embedded, versioned SQL file.
type migration struct {
	version int
	name    string
	sql     string
	// compatibleFrom is the oldest schema version whose code still runs
	// correctly with this migration applied: its header line
	// "-- scribe:compatible-from N" (an additive migration: new tables,
	// nullable or defaulted columns, new indexes) or, without one, the
	// migration's own version (no older build may run against it).
	compatibleFrom int
}

// compatibleFromMarker starts a migration file's header line that declares
// the oldest schema version whose code may keep running once the migration is
// applied (the rolling-upgrade policy: README "Upgrading").
const compatibleFromMarker = "-- scribe:compatible-from "

// migrations returns the journal's embedded migrations in ascending version
// order. A file is named NNNN_description.sql; NNNN is its version.
func migrations() ([]migration, error) { return loadMigrations(migrationFiles, "migrations") }

// loadMigrations returns the migrations in dir of fsys in ascending version
// order.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration file %q is not named NNNN_description.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		m := migration{version: v, name: e.Name(), sql: string(b), compatibleFrom: v}
		for _, line := range strings.Split(m.sql, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), compatibleFromMarker)
			if !ok {
				continue
			}
			from, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || from <= 0 || from > v {
				return nil, fmt.Errorf("postgres: migration file %q: %q must name a schema version from 1 to %d", e.Name(), strings.TrimSpace(line), v)
			}
			m.compatibleFrom = from
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("postgres: migrations %q and %q share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// LatestVersion is the schema version Migrate brings a schema to.
func LatestVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate creates cfg.Schema if needed and applies every embedded migration
// newer than its recorded version, in one transaction under an advisory lock
// keyed by the schema: idempotent, and safe from several processes at once.
// A schema migrated past this build is accepted when every newer migration
// declared itself compatible with this build, refused otherwise (README
// "Upgrading"). Constructors never migrate.
func Migrate(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	if pool == nil {
		return errors.New("postgres: Migrate: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	ms, err := migrations()
	if err != nil {
		return err
	}
	err = applyMigrations(ctx, pool, cfg.Schema, ms)
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return fmt.Errorf("postgres: migrate schema %s: %w", cfg.Schema, startupError(ctx, Address(pool.Config().ConnConfig), err))
	}
	return err
}

// applyMigrations brings schema to the newest of ms (see Migrate): one
// transaction, serialized by an advisory lock keyed by the schema name,
// versions recorded in the schema's schema_migrations.
func applyMigrations(ctx context.Context, pool *pgxpool.Pool, schema string, ms []migration) error {
	cfg := Config{Schema: schema}
	s := cfg.quotedSchema()
	lockKey := migrateLockKey(cfg.Schema)

	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
			return fmt.Errorf("postgres: migrate schema %s: lock: %w", cfg.Schema, err)
		}
		// CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when
		// the schema exists: the owner role (RolesSQL) has it only on its
		// schema.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", cfg.Schema).Scan(&exists); err != nil {
			return fmt.Errorf("postgres: migrate: look up schema %s: %w", cfg.Schema, err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, createSchemaSQL(s)); err != nil {
				return fmt.Errorf("postgres: migrate: create schema %s: %w", cfg.Schema, err)
			}
		}
		// Each DDL statement runs only when needed, so migrating a schema
		// that is up to date needs no more than the service role's SELECT.
		var hasTable bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", s+".schema_migrations").Scan(&hasTable); err != nil {
			return fmt.Errorf("postgres: migrate schema %s: %w", cfg.Schema, err)
		}
		if !hasTable {
			if _, err := tx.Exec(ctx, createMigrationsTableSQL(s)); err != nil {
				return fmt.Errorf("postgres: migrate schema %s: %w", cfg.Schema, err)
			}
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+s+".schema_migrations").Scan(&current); err != nil {
			return fmt.Errorf("postgres: migrate schema %s: read version: %w", cfg.Schema, err)
		}
		// The column that records each applied migration's compatibility
		// floor was added after version 5 without a migration of its own, so
		// builds from before it (which only insert version and name) can
		// still run against a schema that has it.
		hasFloor, err := hasCompatibleFrom(ctx, tx, s)
		if err != nil {
			return fmt.Errorf("postgres: migrate schema %s: %w", cfg.Schema, err)
		}
		if !hasFloor {
			if _, err := tx.Exec(ctx, addCompatibleFromSQL(s)); err != nil {
				return fmt.Errorf("postgres: migrate schema %s: %w", cfg.Schema, err)
			}
		}
		if len(ms) > 0 && current > ms[len(ms)-1].version {
			return checkNewerSchema(ctx, tx, cfg.Schema, current, ms[len(ms)-1].version)
		}
		for _, m := range ms {
			if m.version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.sqlFor(s)); err != nil {
				return fmt.Errorf("postgres: migrate schema %s: apply %s: %w", cfg.Schema, m.name, err)
			}
			if _, err := tx.Exec(ctx, recordMigrationSQL(s), m.version, m.name, m.compatibleFrom); err != nil {
				return fmt.Errorf("postgres: migrate schema %s: record %s: %w", cfg.Schema, m.name, err)
			}
		}
		return nil
	})
	return privilegeError(ctx, pool, schema, "migrate", "owner", err)
}

// The statements of a migration run, for the quoted schema s; Migrate
// executes them and MigrationScript prints them.
func createSchemaSQL(s string) string { return "CREATE SCHEMA IF NOT EXISTS " + s }

func createMigrationsTableSQL(s string) string {
	return "CREATE TABLE IF NOT EXISTS " + s + `.schema_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now())`
}

func addCompatibleFromSQL(s string) string {
	return "ALTER TABLE " + s + ".schema_migrations ADD COLUMN compatible_from integer"
}

func recordMigrationSQL(s string) string {
	return "INSERT INTO " + s + ".schema_migrations (version, name, compatible_from) VALUES ($1, $2, $3)"
}

// sqlFor is the migration's SQL for the quoted schema s.
func (m migration) sqlFor(s string) string { return strings.ReplaceAll(m.sql, "__SCHEMA__", s) }

// migrateLockKey is the advisory lock that serializes the migrations of one
// schema.
func migrateLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("scribe-migrate\x00" + schema))
	return int64(h.Sum64())
}

// hasCompatibleFrom reports whether the schema_migrations table of the
// quoted schema s has the compatible_from column (absent from schemas no
// build with the compatibility floor has migrated yet).
func hasCompatibleFrom(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, s string) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = 'compatible_from' AND NOT attisdropped)`,
		s+".schema_migrations").Scan(&ok)
	return ok, err
}

// checkNewerSchema decides whether a build whose newest migration is latest
// may run against a schema already migrated to current > latest (a rolling
// upgrade: the new release migrated first, this process is of the release
// before). It may when every migration above latest declared itself
// compatible with code of version latest; otherwise it fails naming the first
// migration that is not, and what to do.
func checkNewerSchema(ctx context.Context, tx pgx.Tx, schema string, current, latest int) error {
	s := Config{Schema: schema}.quotedSchema()
	rows, err := tx.Query(ctx, "SELECT version, name, compatible_from FROM "+s+".schema_migrations WHERE version > $1 ORDER BY version", latest)
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: read newer migrations: %w", schema, err)
	}
	type applied struct {
		version int
		name    string
		from    *int
	}
	newer, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (applied, error) {
		var a applied
		return a, r.Scan(&a.version, &a.name, &a.from)
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate schema %s: read newer migrations: %w", schema, err)
	}
	for _, a := range newer {
		switch {
		case a.from == nil:
			return fmt.Errorf("%w: postgres: schema %s is at version %d, newer than this build's %d, and migration %s was applied by a build that did not record which older builds may run against it; upgrade the program", journal.ErrConfiguration, schema, current, latest, a.name)
		case *a.from > latest:
			return fmt.Errorf("%w: postgres: schema %s is at version %d, newer than this build's %d, and migration %s needs code of schema version %d or later (it is not backward compatible); upgrade the program", journal.ErrConfiguration, schema, current, latest, a.name, *a.from)
		}
	}
	return nil
}

// SchemaVersion returns the migration version recorded in cfg.Schema, 0 when
// the schema was never migrated.
func SchemaVersion(ctx context.Context, pool *pgxpool.Pool, cfg Config) (int, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return 0, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", cfg.quotedSchema()+".schema_migrations").Scan(&exists); err != nil {
		return 0, fmt.Errorf("postgres: read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+cfg.quotedSchema()+".schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("postgres: read schema version: %w", err)
	}
	return v, nil
}
