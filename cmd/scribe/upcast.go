package main

import (
	"flag"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
)

// upcastCheckCommand is `scribe upcast check`. The scribe command holds no
// service's event types or upcasters, so it cannot decode events: it checks
// each stored type version against the versions a recorded build said it
// reads when it started (Runtime.Start). Decoding every event with a build's
// code is the service's own subcommand (scribe.UpcastCheck, e.g. `bank
// upcast check`).
func upcastCheckCommand() *command {
	var build string
	return &command{
		name:    "upcast check",
		summary: "check that a recorded build reads every stored event type version (exit 1 naming type, version and first event otherwise); to decode every event, run your service's own upcast check (scribe.UpcastCheck)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&build, "build", "", "the build to check, as scribe types lists it (default: the one recorded last)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			reg, err := s.journal.RecordedTypes(e.ctx)
			if err != nil {
				return err
			}
			var chosen *journal.BuildTypes
			for i, b := range reg.Builds {
				if (build == "" && (chosen == nil || b.LastRecordedAt.After(chosen.LastRecordedAt))) || b.Build == build {
					chosen = &reg.Builds[i]
				}
			}
			if chosen == nil {
				if build != "" {
					return fmt.Errorf("no build %q is recorded; list the builds with `scribe types`", build)
				}
				return fmt.Errorf("no build is recorded in schema %q; start a service build (Runtime.Start records it), or run the service's own upcast check", s.cfg.Schema)
			}
			counts, err := s.journal.CountStoredVersions(e.ctx)
			if err != nil {
				return err
			}
			t := newTable(e.stdout, "TYPE", "VERSION", "EVENTS", "READ", "FIRST EVENT")
			failed := 0
			for _, c := range counts {
				if len(c.Type) > 7 && c.Type[:7] == "scribe." {
					continue
				}
				read := slices.Contains(chosen.Reads, c.TypeVersion)
				first := ""
				if !read {
					failed++
					if first, err = firstEventOf(e, s, c.TypeVersion); err != nil {
						return err
					}
				}
				if e.opts.json {
					if err := emitJSON(e.stdout, map[string]any{"type": c.Type, "version": c.Version, "events": c.Count, "read": read, "firstEvent": first}); err != nil {
						return err
					}
					continue
				}
				t.row(c.Type, c.Version, c.Count, map[bool]string{true: "yes", false: "NO"}[read], first)
			}
			if !e.opts.json {
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "\nbuild %s (node %s, recorded %s)", chosen.Build, chosen.Node, fmtTime(chosen.LastRecordedAt))
			}
			if failed > 0 {
				if !e.opts.json {
					fmt.Fprintf(e.stdout, " cannot read %d stored type versions; register them or upcasters from them\n", failed)
				}
				return errFailed
			}
			if !e.opts.json {
				fmt.Fprintf(e.stdout, " reads every stored type version; decode them all with the service's own upcast check\n")
			}
			return nil
		},
	}
}

// firstEventOf returns the ID of the first stored event of a type version.
func firstEventOf(e *env, s *store, tv journal.TypeVersion) (string, error) {
	var id string
	err := s.pool.QueryRow(e.ctx, `SELECT id::text FROM `+pgx.Identifier{s.cfg.Schema, "events"}.Sanitize()+
		` WHERE type = $1 AND schema_version = $2 ORDER BY commit_xid, seq LIMIT 1`, tv.Type, tv.Version).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("reading the first event of %s: %w", tv, err)
	}
	return id, nil
}
