package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/scribe-es/scribe/postgres"
)

func migrateUpCommand() *command {
	var dryRun bool
	return &command{
		name:    "migrate up",
		summary: "create or upgrade the schema's tables to this scribe's version",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&dryRun, "dry-run", false, "print the SQL that would run (one transaction) and change nothing")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			pool, cfg, err := e.connect()
			if err != nil {
				return err
			}
			defer pool.Close()
			if dryRun {
				script, rep, err := postgres.MigrationScript(e.ctx, pool, cfg)
				if err != nil {
					return err
				}
				if rep.TooNew() {
					return tooNew(rep)
				}
				if len(rep.Pending) == 0 {
					fmt.Fprintf(e.stderr, "schema %s is up to date at version %d: nothing to run\n", cfg.Schema, rep.Current)
					return nil
				}
				fmt.Fprint(e.stdout, script)
				fmt.Fprintf(e.stderr, "dry run: %d migrations of schema %s printed, nothing applied\n", len(rep.Pending), cfg.Schema)
				return nil
			}
			before, err := postgres.MigrationStatus(e.ctx, pool, cfg)
			if err != nil {
				return err
			}
			if before.TooNew() {
				return tooNew(before)
			}
			if err := postgres.Migrate(e.ctx, pool, cfg); err != nil {
				return err
			}
			after, err := postgres.MigrationStatus(e.ctx, pool, cfg)
			if err != nil {
				return err
			}
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"schema": cfg.Schema, "from": before.Current, "to": after.Current, "applied": len(after.Applied) - len(before.Applied)})
			}
			if after.Current == before.Current {
				fmt.Fprintf(e.stdout, "schema %s is up to date at version %d\n", cfg.Schema, after.Current)
				return nil
			}
			fmt.Fprintf(e.stdout, "schema %s migrated from version %d to %d\n", cfg.Schema, before.Current, after.Current)
			return nil
		},
	}
}

func migrateStatusCommand() *command {
	return &command{
		name:    "migrate status",
		summary: "list applied and pending migrations",
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			pool, cfg, err := e.connect()
			if err != nil {
				return err
			}
			defer pool.Close()
			rep, err := postgres.MigrationStatus(e.ctx, pool, cfg)
			if err != nil {
				return err
			}
			if e.opts.json {
				for _, m := range rep.Applied {
					if err := emitJSON(e.stdout, map[string]any{"version": m.Version, "name": m.Name, "state": "applied", "appliedAt": jsonTime(m.AppliedAt), "compatibleFrom": m.CompatibleFrom}); err != nil {
						return err
					}
				}
				for _, m := range rep.Pending {
					if err := emitJSON(e.stdout, map[string]any{"version": m.Version, "name": m.Name, "state": "pending", "compatibleFrom": m.CompatibleFrom}); err != nil {
						return err
					}
				}
			} else {
				t := newTable(e.stdout, "VERSION", "NAME", "STATE", "APPLIED AT", "OLD CODE RUNS FROM")
				for _, m := range rep.Applied {
					t.row(m.Version, m.Name, "applied", fmtTime(m.AppliedAt), fmtFloor(m.CompatibleFrom))
				}
				for _, m := range rep.Pending {
					t.row(m.Version, m.Name, "pending", "-", fmtFloor(m.CompatibleFrom))
				}
				if err := t.flush(); err != nil {
					return err
				}
			}
			if rep.TooNew() {
				return tooNew(rep)
			}
			if !e.opts.json {
				switch {
				case rep.Current == 0:
					fmt.Fprintf(e.stdout, "\nschema %s has no Scribe tables; run `scribe migrate up`\n", cfg.Schema)
				case len(rep.Pending) > 0:
					fmt.Fprintf(e.stdout, "\nschema %s is at version %d; %d migration(s) pending: run `scribe migrate up`\n", cfg.Schema, rep.Current, len(rep.Pending))
				default:
					fmt.Fprintf(e.stdout, "\nschema %s is up to date at version %d\n", cfg.Schema, rep.Current)
				}
			}
			return nil
		},
	}
}

// fmtFloor shows a migration's compatibility floor: the oldest schema version
// whose processes may keep running once it is applied ("-" when not recorded).
func fmtFloor(v int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("v%d", v)
}

// migrateSQLCommand prints the SQL of a fresh schema, or writes it as one
// file per migration for a migration tool, with no database.
func migrateSQLCommand() *command {
	var dir string
	return &command{
		name:    "migrate sql",
		summary: "print the SQL that creates the schema at this scribe's version (no database needed), or -files DIR for goose/golang-migrate",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&dir, "files", "", "write one NNNN_description.up.sql file per migration into this directory instead (created if missing)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if dir == "" {
				sql, err := postgres.SchemaSQL(e.opts.schema)
				if err != nil {
					return err
				}
				fmt.Fprint(e.stdout, sql)
				fmt.Fprintf(e.stderr, "schema %s at version %d: apply it with psql -v ON_ERROR_STOP=1 -f FILE, or run `scribe migrate up`\n", e.opts.schema, postgres.LatestVersion())
				return nil
			}
			files, err := postgres.MigrationFiles(e.opts.schema)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating the directory for the migration files: %w", err)
			}
			names, err := fs.Glob(files, "*.sql")
			if err != nil {
				return err
			}
			for _, n := range names {
				b, err := fs.ReadFile(files, n)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
					return fmt.Errorf("writing migration file %s: %w", n, err)
				}
			}
			fmt.Fprintf(e.stdout, "wrote %d migration files of schema %s into %s; apply them in name order, one transaction each, instead of `scribe migrate up`\n", len(names), e.opts.schema, dir)
			return nil
		},
	}
}
