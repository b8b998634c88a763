package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

// Roles names the three database roles of a Scribe schema, each with the
// least it needs (RolesSQL grants it): Owner owns the schemas and runs what
// rewrites or removes rows (migrations, archives, partition moves); Service
// appends and reads, holds leases, saves snapshots, runs projections and uses
// the key store, but never updates, deletes or truncates events; Reader only
// selects, never a data key. They are NOLOGIN groups: grant each to the login
// role a process connects as (GRANT "app_service" TO "billing_api").
type Roles struct {
	// Owner, Service and Reader are the three roles' names, plain
	// identifiers; empty takes DefaultRoles.
	Owner, Service, Reader string
	// KeyStoreSchema is the erasure key store's schema the roles also
	// cover. Default KeyStoreSchemaFor the journal schema.
	KeyStoreSchema string
}

// DefaultRoles returns the default role names for schema: schema+"_owner",
// schema+"_service", schema+"_reader", and its key store schema.
func DefaultRoles(schema string) Roles {
	if schema == "" {
		schema = defaultSchema
	}
	return Roles{Owner: schema + "_owner", Service: schema + "_service", Reader: schema + "_reader", KeyStoreSchema: KeyStoreSchemaFor(schema)}
}

// privileges is what the service role may do to a table beyond SELECT
// (which it has on every table of both schemas).
type privileges string

// serviceJournalWrites lists every table of the journal schema with what the
// service role may write to it. A table the migrations create that is
// missing here fails TestRolesCoverEveryTable: decide its grants first.
// Events, their tag rows and the archive take inserts only (appends); the
// owner alone rewrites or removes them (archive, retention, partition moves).
var serviceJournalWrites = map[string]privileges{
	"events":                  "INSERT",
	"event_tags":              "INSERT",
	"events_archive":          "",
	"event_tags_archive":      "",
	"streams":                 "INSERT, UPDATE, DELETE",
	"nodes":                   "INSERT, UPDATE",
	"snapshots":               "INSERT, UPDATE, DELETE",
	"projections":             "INSERT, UPDATE, DELETE",
	"projection_active":       "INSERT, UPDATE, DELETE",
	"projection_dead_letters": "INSERT, UPDATE, DELETE",
	"projection_rows":         "INSERT, UPDATE, DELETE",
	"projection_runners":      "INSERT, UPDATE, DELETE",
	"projection_slices":       "INSERT, UPDATE, DELETE",
	"event_schemas":           "INSERT, UPDATE",
	"event_type_builds":       "INSERT, UPDATE",
	"partition_fences":        "",
	"partition_moves":         "",
	"partition_move_history":  "",
	"schema_migrations":       "",
}

// serviceJournalSequences are the journal's sequences an append or a lease
// draws from (nextval needs USAGE).
var serviceJournalSequences = []string{"events_seq", "stream_epochs"}

// serviceKeyWrites is serviceJournalWrites for the key store schema. The
// erasure_head row is bumped by the subjects trigger, which runs as the
// service role when the service begins an erasure.
var serviceKeyWrites = map[string]privileges{
	"subjects":          "INSERT, UPDATE",
	"subject_streams":   "INSERT, DELETE",
	"erasure_head":      "UPDATE",
	"schema_migrations": "",
}

// keyColumn is the key store column the reader role must never read.
const keyColumn = "data_key"

// RolesSQL returns the SQL a database administrator runs, as a superuser,
// to set up the roles r for the journal schema schema and its key store:
// it creates the three roles (NOLOGIN, if missing), creates both schemas
// owned by r.Owner (or hands existing ones and everything in them to
// r.Owner), and grants r.Service and r.Reader exactly what Roles says,
// revoking anything else they had. Every statement is idempotent: run it
// before the first migration and again after each `scribe migrate up`, which
// may add tables. Run one copy at a time: two runs at once can collide
// creating a role (SQLSTATE 23505); a failed run is simply run again.
// Empty fields of r take DefaultRoles(schema).
func RolesSQL(schema string, r Roles) (string, error) {
	cfg, err := (Config{Schema: schema}).withDefaults()
	if err != nil {
		return "", err
	}
	def := DefaultRoles(cfg.Schema)
	if r.Owner == "" {
		r.Owner = def.Owner
	}
	if r.Service == "" {
		r.Service = def.Service
	}
	if r.Reader == "" {
		r.Reader = def.Reader
	}
	if r.KeyStoreSchema == "" {
		r.KeyStoreSchema = def.KeyStoreSchema
	}
	for _, n := range []string{cfg.Schema, r.KeyStoreSchema, r.Owner, r.Service, r.Reader} {
		if !plainIdentifier(n) {
			return "", fmt.Errorf("postgres: roles: %q is not a plain identifier of at most 63 bytes (letters, digits, _; not starting with a digit); pass another name", n)
		}
	}
	if r.Owner == r.Service || r.Owner == r.Reader || r.Service == r.Reader {
		return "", fmt.Errorf("postgres: the owner, service and reader roles must be three different roles (got %q, %q, %q); name each once", r.Owner, r.Service, r.Reader)
	}
	if r.KeyStoreSchema == cfg.Schema {
		return "", fmt.Errorf("postgres: the key store schema must differ from the journal schema %q; pass another key store schema", cfg.Schema)
	}
	id := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	owner, service, reader := id(r.Owner), id(r.Service), id(r.Reader)

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("-- Scribe roles for journal schema %s and key store schema %s.\n", cfg.Schema, r.KeyStoreSchema)
	w("-- Run as a superuser before the first `scribe migrate up` and again after each one (idempotent).\n")
	w("-- Then GRANT each role to the login roles that need it, e.g. GRANT %s TO my_service_login;\n", service)
	w("BEGIN;\n")
	w("DO $$ BEGIN\n")
	for _, n := range []string{r.Owner, r.Service, r.Reader} {
		w("  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = %s) THEN CREATE ROLE %s NOLOGIN; END IF;\n", lit(n), id(n))
	}
	w("END $$;\n")
	for _, sch := range []string{cfg.Schema, r.KeyStoreSchema} {
		s := id(sch)
		w("\n-- Schema %s: owned by %s, with everything in it.\n", sch, r.Owner)
		w("CREATE SCHEMA IF NOT EXISTS %s AUTHORIZATION %s;\n", s, owner)
		w("ALTER SCHEMA %s OWNER TO %s;\n", s, owner)
		// Tables first: altering a table's owner moves its linked
		// sequences too; the loop over sequences then finds only free ones.
		w(`DO $$ DECLARE o record; BEGIN
  FOR o IN SELECT c.oid::regclass AS name FROM pg_class c WHERE c.relnamespace = %[1]s::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm') AND c.relowner <> %[2]s::regrole LOOP
    EXECUTE format('ALTER TABLE %%s OWNER TO %%I', o.name, %[2]s);
  END LOOP;
  FOR o IN SELECT c.oid::regclass AS name FROM pg_class c WHERE c.relnamespace = %[1]s::regnamespace AND c.relkind = 'S' AND c.relowner <> %[2]s::regrole LOOP
    EXECUTE format('ALTER SEQUENCE %%s OWNER TO %%I', o.name, %[2]s);
  END LOOP;
  FOR o IN SELECT p.oid::regprocedure AS name FROM pg_proc p WHERE p.pronamespace = %[1]s::regnamespace AND p.proowner <> %[2]s::regrole LOOP
    EXECUTE format('ALTER ROUTINE %%s OWNER TO %%I', o.name, %[2]s);
  END LOOP;
END $$;
`, lit(s), lit(r.Owner))
		w("REVOKE ALL ON SCHEMA %s FROM PUBLIC, %s, %s;\n", s, service, reader)
		w("GRANT USAGE ON SCHEMA %s TO %s, %s;\n", s, service, reader)
		w("REVOKE ALL ON ALL TABLES IN SCHEMA %s FROM PUBLIC, %s, %s;\n", s, service, reader)
		w("REVOKE ALL ON ALL SEQUENCES IN SCHEMA %s FROM PUBLIC, %s, %s;\n", s, service, reader)
		w("GRANT SELECT ON ALL TABLES IN SCHEMA %s TO %s;\n", s, service)
		w("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s GRANT SELECT ON TABLES TO %s;\n", owner, s, service)
	}

	s := id(cfg.Schema)
	w("\n-- Journal: the reader reads everything; the service reads everything and writes only what it must.\n")
	w("GRANT SELECT ON ALL TABLES IN SCHEMA %s TO %s;\n", s, reader)
	w("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s GRANT SELECT ON TABLES TO %s;\n", owner, s, reader)
	w("DO $$ BEGIN\n")
	for _, t := range sortedKeys(serviceJournalWrites) {
		if p := serviceJournalWrites[t]; p != "" {
			w("  IF to_regclass(%s) IS NOT NULL THEN GRANT %s ON %s.%s TO %s; END IF;\n", lit(s+"."+id(t)), p, s, id(t), service)
		}
	}
	for _, q := range serviceJournalSequences {
		w("  IF to_regclass(%s) IS NOT NULL THEN GRANT USAGE, SELECT ON SEQUENCE %s.%s TO %s; END IF;\n", lit(s+"."+id(q)), s, id(q), service)
	}
	w("END $$;\n")

	k := id(r.KeyStoreSchema)
	w("\n-- Key store: the service uses the keys; the reader sees who was erased and when, never a key.\n")
	w("DO $$ DECLARE cols text; BEGIN\n")
	for _, t := range sortedKeys(serviceKeyWrites) {
		if p := serviceKeyWrites[t]; p != "" {
			w("  IF to_regclass(%s) IS NOT NULL THEN GRANT %s ON %s.%s TO %s; END IF;\n", lit(k+"."+id(t)), p, k, id(t), service)
		}
		if t != "subjects" {
			w("  IF to_regclass(%s) IS NOT NULL THEN GRANT SELECT ON %s.%s TO %s; END IF;\n", lit(k+"."+id(t)), k, id(t), reader)
		}
	}
	w(`  SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols FROM pg_attribute
    WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped AND attname <> %s;
  IF cols IS NOT NULL THEN
    EXECUTE format('REVOKE SELECT (%%s) ON %s.subjects FROM %s', %s);
    EXECUTE format('GRANT SELECT (%%s) ON %s.subjects TO %s', cols);
  END IF;
END $$;
COMMIT;
`, lit(k+".subjects"), lit(keyColumn), k, reader, lit(id(keyColumn)), k, reader)
	return b.String(), nil
}

// sortedKeys returns m's keys in order, so RolesSQL prints the same script
// every time.
func sortedKeys(m map[string]privileges) []string { return slices.Sorted(maps.Keys(m)) }

// plainIdentifier reports whether s is a name RolesSQL can put in its SQL
// both as an identifier and inside the dynamic statements of its DO blocks.
func plainIdentifier(s string) bool {
	if s == "" || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// privilegeError turns an insufficient_privilege (42501) failure of op on
// schema into a configuration error naming the role connected and the role
// op needs; any other error is returned as it is.
func privilegeError(ctx context.Context, pool *pgxpool.Pool, schema, op, needs string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		return err
	}
	user := "?"
	_ = pool.QueryRow(ctx, "SELECT current_user").Scan(&user)
	return fmt.Errorf("%w: postgres: %s %s as role %q: %s; use the %s role (`scribe roles sql`)", journal.ErrConfiguration, op, schema, user, pgErr.Message, needs)
}
