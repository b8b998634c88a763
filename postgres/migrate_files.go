package postgres

import (
	"fmt"
	"io/fs"
	"strings"
	"testing/fstest"
)

// SchemaSQL returns the SQL that creates schema from nothing at this
// build's version, as one script (one transaction, under the schema's
// advisory lock), without a database: for a DBA to review and run with
// psql, or for a migration tool. Applying it leaves the schema as Migrate
// would, every migration recorded in its schema_migrations table, so Open
// finds it up to date. An empty schema means the default ("scribe").
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
// migration tool applies in name order, one transaction each (goose,
// golang-migrate, Atlas): "NNNN_description.up.sql", NNNN the schema
// version. Each records itself in the schema's schema_migrations table, as
// Migrate does, so that Open and `scribe migrate status` see the version;
// the first also creates the schema and that table. Apply them instead of
// Migrate, not beside it: Migrate would find them recorded and do nothing,
// but a tool's own bookkeeping does not know about Migrate's runs. Files
// hold no down migrations: Scribe's migrations are forward-only (README
// "Upgrading").
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
