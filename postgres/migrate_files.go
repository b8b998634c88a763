package postgres

import (
	"fmt"
	"io/fs"
	"strings"
	"testing/fstest"
)

// SchemaSQL returns the SQL that creates schema ("": "scribe") from nothing
// at this build's version, as one script without a database, for a DBA or a
// migration tool; applied, it leaves the schema as Migrate would.
func SchemaSQL(schema string) (string, error) {
	cfg, err := Config{Schema: schema}.withDefaults()
	if err != nil {
		return "", err
	}
	ms, err := migrations()
	if err != nil {
		return "", err
	}
	return migrationScript(cfg.Schema, cfg.quotedSchema(), 0, LatestVersion(), false, ms), nil
}

// MigrationFiles returns this build's migrations for schema as files a
// migration tool applies in name order, one transaction each
// ("NNNN_description.up.sql"); each records itself in schema_migrations as
// Migrate does. Use them instead of Migrate, not beside it; they are
// forward-only.
func MigrationFiles(schema string) (fs.FS, error) {
	cfg, err := Config{Schema: schema}.withDefaults()
	if err != nil {
		return nil, err
	}
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	s := cfg.quotedSchema()
	files := fstest.MapFS{}
	for i, m := range ms {
		var b strings.Builder
		fmt.Fprintf(&b, "-- scribe: schema %s, version %d\n", cfg.Schema, m.version)
		if i == 0 {
			fmt.Fprintf(&b, "%s;\n%s;\n%s;\n", createSchemaSQL(s), createMigrationsTableSQL(s), addCompatibleFromSQL(s))
		}
		b.WriteString(migrationStep(s, m))
		name := strings.TrimSuffix(m.name, ".sql") + ".up.sql"
		files[name] = &fstest.MapFile{Data: []byte(b.String()), Mode: 0o444}
	}
	return files, nil
}
