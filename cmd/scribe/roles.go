package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scribe-es/scribe/postgres"
)

// The database roles of postgres.Roles, by what they may do.
const (
	roleReader  = "reader (read-only)"
	roleService = "service"
	roleOwner   = "owner"
)

// verbRoles is the least role each command that reaches the database
// needs; README "Security" lists the same. A command missing here needs
// the owner role.
var verbRoles = map[string]string{
	"migrate up":                      roleOwner,
	"migrate keys":                    roleOwner,
	"archive":                         roleOwner,
	"partition move":                  roleOwner,
	"retire-stream":                   roleOwner,
	"snapshots prune":                 roleService,
	"projections rebuild":             roleService,
	"projections pause":               roleService,
	"projections resume":              roleService,
	"projections dead-letters replay": roleService,
	"erase":                           roleService,
	"migrate status":                  roleReader,
	"streams list":                    roleReader,
	"stream show":                     roleReader,
	"tail":                            roleReader,
	"events":                          roleReader,
	"event":                           roleReader,
	"correlation":                     roleReader,
	"types":                           roleReader,
	"verify":                          roleReader,
	"checkpoint":                      roleReader,
	"proof":                           roleReader,
	"verify-proof":                    roleReader,
	"leases":                          roleReader,
	"snapshots list":                  roleReader,
	"tags":                            roleReader,
	"projections status":              roleReader,
	"projections dead-letters list":   roleReader,
	"subjects":                        roleReader,
	"console":                         roleReader + "; with -allow-actions the service",
}

// neededRole is the role command name needs (verbRoles), owner by default.
func neededRole(name string) string {
	if r, ok := verbRoles[name]; ok {
		return r
	}
	return roleOwner
}

// privilegeHint adds to err, when the database refused a privilege
// (SQLSTATE 42501), which role command name needs; other errors are
// returned as they are.
func privilegeHint(name string, err error) error {
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		return err
	}
	return fmt.Errorf("%w; `scribe %s` needs the %s role: connect as a login granted it (`scribe roles sql` prints the roles)", err, name, neededRole(name))
}

func rolesSQLCommand() *command {
	var r postgres.Roles
	return &command{
		name: "roles sql",
		summary: "print the SQL a database administrator runs (as a superuser) to create the owner, service and read-only roles of -schema " +
			"and grant each the least it needs; run it before the first `scribe migrate up` and again after each (it is idempotent). Needs no database",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&r.Owner, "owner", "", "the owner role: migrations, archive, retention, partition moves (default SCHEMA_owner)")
			fs.StringVar(&r.Service, "service", "", "the service role: appends and reads, sessions, snapshots, projections, the key store; never rewrites events (default SCHEMA_service)")
			fs.StringVar(&r.Reader, "reader", "", "the read-only role: the read verbs and the console (default SCHEMA_reader)")
			fs.StringVar(&r.KeyStoreSchema, "keys-schema", "", "the erasure key store's schema (default SCHEMA_keys)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			sql, err := postgres.RolesSQL(e.opts.schema, r)
			if err != nil {
				return usagef("%s", strings.TrimPrefix(err.Error(), "postgres: "))
			}
			_, err = fmt.Fprint(e.stdout, sql)
			return err
		},
	}
}
