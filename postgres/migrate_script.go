package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrationScript returns the SQL that Migrate would run on cfg.Schema now, as
// one script (one transaction, under the schema's advisory lock), without
// running it: empty of migrations when the schema is up to date. It reads the
// schema's migration status and changes nothing. A schema migrated past this
// build is reported as Migrate reports it (MigrationReport.TooNew).
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
	var b strings.Builder
	fmt.Fprintf(&b, "-- scribe: migrate schema %s from version %d to %d\nBEGIN;\nSELECT pg_advisory_xact_lock(%d);\n%s;\n%s;\n",
		cfg.Schema, rep.Current, max(rep.Current, rep.Latest), migrateLockKey(cfg.Schema), createSchemaSQL(s), createMigrationsTableSQL(s))
	if !hasFloor {
		fmt.Fprintf(&b, "%s;\n", addCompatibleFromSQL(s))
	}
	for _, m := range ms {
		if m.version <= rep.Current {
			continue
		}
		fmt.Fprintf(&b, "\n-- %s (old code runs from version %d)\n%s\n", m.name, m.compatibleFrom, strings.TrimSpace(m.sqlFor(s)))
		if !strings.HasSuffix(strings.TrimSpace(m.sql), ";") {
			b.WriteString(";\n")
		}
		insert := strings.NewReplacer("$1", fmt.Sprint(m.version), "$2", "'"+strings.ReplaceAll(m.name, "'", "''")+"'", "$3", fmt.Sprint(m.compatibleFrom)).Replace(recordMigrationSQL(s))
		fmt.Fprintf(&b, "%s;\n", insert)
	}
	b.WriteString("COMMIT;\n")
	return b.String(), rep, nil
}
