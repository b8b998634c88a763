package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrationScript returns, as one script, the SQL Migrate would run on
// cfg.Schema now, without running it (empty when up to date).
func MigrationScript(ctx context.Context, pool *pgxpool.Pool, cfg Config) (string, MigrationReport, error) {
	rep, err := MigrationStatus(ctx, pool, cfg)
	if err != nil {
		return "", rep, err
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		return "", rep, err
	}
	ms, err := migrations()
	if err != nil {
		return "", rep, err
	}
	s := cfg.quotedSchema()
	hasFloor, err := hasCompatibleFrom(ctx, pool, s)
	if err != nil {
		return "", rep, fmt.Errorf("postgres: migration script of schema %s: %w", cfg.Schema, err)
	}
	return migrationScript(cfg.Schema, s, rep.Current, max(rep.Current, rep.Latest), hasFloor, ms), rep, nil
}

// migrationScript is the script that brings schema (s quoted) from version
// current to latest: one transaction under the schema's advisory lock,
// creating the schema and its migrations table if needed, each migration
// recorded as Migrate records it.
func migrationScript(schema, s string, current, latest int, hasFloor bool, ms []migration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- scribe: migrate schema %s from version %d to %d\nBEGIN;\nSELECT pg_advisory_xact_lock(%d);\n%s;\n%s;\n",
		schema, current, latest, migrateLockKey(schema), createSchemaSQL(s), createMigrationsTableSQL(s))
	if !hasFloor {
		fmt.Fprintf(&b, "%s;\n", addCompatibleFromSQL(s))
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		b.WriteString(migrationStep(s, m))
	}
	b.WriteString("COMMIT;\n")
	return b.String()
}

// migrationStep is one migration's SQL for schema s and the statement
// recording it.
func migrationStep(s string, m migration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n-- %s (old code runs from version %d)\n%s\n", m.name, m.compatibleFrom, strings.TrimSpace(m.sqlFor(s)))
	if !strings.HasSuffix(strings.TrimSpace(m.sql), ";") {
		b.WriteString(";\n")
	}
	insert := strings.NewReplacer("$1", fmt.Sprint(m.version), "$2", "'"+strings.ReplaceAll(m.name, "'", "''")+"'", "$3", fmt.Sprint(m.compatibleFrom)).Replace(recordMigrationSQL(s))
	fmt.Fprintf(&b, "%s;\n", insert)
	return b.String()
}
