package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrationInfo is one embedded migration and, when applied, when.
type MigrationInfo struct {
	Version int
	Name    string
	// AppliedAt is when Migrate applied it; zero while pending.
	AppliedAt time.Time
	// CompatibleFrom is the oldest schema version whose code keeps running
	// once the migration is applied (README "Upgrading"); 0 when unknown.
	CompatibleFrom int
}

// MigrationReport is the migration state of a schema.
type MigrationReport struct {
	Schema string
	// Current is the highest version recorded in the schema (0: never migrated).
	Current int
	// Latest is the highest version this build embeds (LatestVersion).
	Latest int
	// Applied are the versions recorded in the schema, ascending; a version
	// this build does not embed is listed with the name the schema recorded.
	Applied []MigrationInfo
	// Pending are the embedded versions above Current, ascending: what
	// Migrate would apply.
	Pending []MigrationInfo
}

// TooNew reports whether the schema was migrated by a newer build than this
// one (Current > Latest): Migrate refuses it, and this build may misread it.
func (r MigrationReport) TooNew() bool { return r.Current > r.Latest }

// MigrationStatus reports which migrations cfg.Schema has applied and which
// this build would apply. It only reads: a schema that does not exist or was
// never migrated reports Current 0 and every migration pending.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool, cfg Config) (MigrationReport, error) {
	if pool == nil {
		return MigrationReport{}, errors.New("postgres: MigrationStatus: the pool is nil; pass a *pgxpool.Pool from pgxpool.New")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return MigrationReport{}, err
	}
	ms, err := migrations()
	if err != nil {
		return MigrationReport{}, err
	}
	rep := MigrationReport{Schema: cfg.Schema}
	if len(ms) > 0 {
		rep.Latest = ms[len(ms)-1].version
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", cfg.quotedSchema()+".schema_migrations").Scan(&exists); err != nil {
		return MigrationReport{}, fmt.Errorf("postgres: migration status of schema %s: %w", cfg.Schema, err)
	}
	if exists {
		// compatible_from is absent from schemas no build with the floor has
		// migrated yet: read it only when it is there.
		floor := "NULL::integer"
		hasFloor, err := hasCompatibleFrom(ctx, pool, cfg.quotedSchema())
		if err != nil {
			return MigrationReport{}, fmt.Errorf("postgres: migration status of schema %s: %w", cfg.Schema, err)
		}
		if hasFloor {
			floor = "compatible_from"
		}
		rows, err := pool.Query(ctx, "SELECT version, name, applied_at, coalesce("+floor+", 0) FROM "+cfg.quotedSchema()+".schema_migrations ORDER BY version")
		if err != nil {
			return MigrationReport{}, fmt.Errorf("postgres: migration status of schema %s: %w", cfg.Schema, err)
		}
		for rows.Next() {
			var m MigrationInfo
			if err := rows.Scan(&m.Version, &m.Name, &m.AppliedAt, &m.CompatibleFrom); err != nil {
				rows.Close()
				return MigrationReport{}, fmt.Errorf("postgres: migration status of schema %s: %w", cfg.Schema, err)
			}
			m.AppliedAt = m.AppliedAt.UTC()
			rep.Applied = append(rep.Applied, m)
			rep.Current = max(rep.Current, m.Version)
		}
		if err := rows.Err(); err != nil {
			return MigrationReport{}, fmt.Errorf("postgres: migration status of schema %s: %w", cfg.Schema, err)
		}
	}
	for _, m := range ms {
		if m.version > rep.Current {
			rep.Pending = append(rep.Pending, MigrationInfo{Version: m.version, Name: m.name, CompatibleFrom: m.compatibleFrom})
		}
	}
	return rep, nil
}
