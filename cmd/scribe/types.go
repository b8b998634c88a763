package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/scribe-es/scribe/journal"
)

// typeVersionInfo is one stored or recorded event type version as `scribe
// types` shows it.
type typeVersionInfo struct {
	journal.TypeVersion
	events uint64
	schema json.RawMessage // nil: not recorded
	readBy []string        // the recorded builds reading it
}

// typeVersions joins the stored versions' counts, the recorded schemas and
// the recorded builds' reads. recorded is false when the schema has no type
// registry yet (not migrated to it).
func typeVersions(e *env, s *store) (infos []typeVersionInfo, reg journal.RecordedTypes, recorded bool, err error) {
	counts, err := s.journal.CountStoredVersions(e.ctx)
	if err != nil {
		return nil, reg, false, err
	}
	reg, err = s.journal.RecordedTypes(e.ctx)
	switch {
	case errors.Is(err, journal.ErrStoreNotOpen):
		fmt.Fprintf(e.stderr, "scribe: warning: schema %q has no type registry; run `scribe migrate up`, then start a service build to record its types\n", s.cfg.Schema)
	case err != nil:
		return nil, reg, false, err
	default:
		recorded = true
	}
	byTV := map[journal.TypeVersion]*typeVersionInfo{}
	at := func(tv journal.TypeVersion) *typeVersionInfo {
		if byTV[tv] == nil {
			byTV[tv] = &typeVersionInfo{TypeVersion: tv}
		}
		return byTV[tv]
	}
	for _, c := range counts {
		at(c.TypeVersion).events = c.Count
	}
	for _, sc := range reg.Schemas {
		at(sc.TypeVersion).schema = sc.Schema
	}
	for _, b := range reg.Builds {
		for _, tv := range b.Reads {
			if in := byTV[tv]; in != nil {
				in.readBy = append(in.readBy, b.Build)
			}
		}
	}
	for _, in := range byTV {
		infos = append(infos, *in)
	}
	slices.SortFunc(infos, func(a, b typeVersionInfo) int { return journal.CompareTypeVersions(a.TypeVersion, b.TypeVersion) })
	return infos, reg, recorded, nil
}

// schemaDigest is a short digest naming a schema in a table.
func schemaDigest(doc json.RawMessage) string {
	if doc == nil {
		return "-"
	}
	var v any
	_ = json.Unmarshal(doc, &v)
	canon, _ := json.Marshal(v)
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:4])
}

func typesCommand() *command {
	var only string
	return &command{
		name:    "types",
		summary: "list the event types with their counts and positions, each stored or recorded version with its schema and the builds that read it",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&only, "type", "", "show this type's versions with their schemas in full")
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
			sums, err := s.journal.TypeSummaries(e.ctx)
			if err != nil {
				return err
			}
			infos, reg, recorded, err := typeVersions(e, s)
			if err != nil {
				return err
			}
			if only != "" {
				return printTypeSchemas(e, only, infos, len(reg.Builds))
			}
			if e.opts.json {
				return typesJSON(e, sums, infos, reg)
			}
			t := newTable(e.stdout, "TYPE", "EVENTS", "FIRST WRITE", "LAST WRITE", "FIRST POSITION", "LAST POSITION")
			var total uint64
			for _, s := range sums {
				total += s.Count
				t.row(s.Type, s.Count, fmtTime(s.FirstRecordedAt), fmtTime(s.LastRecordedAt), s.FirstPosition, s.LastPosition)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d event types, %d events (archived events not counted); read one type with `scribe events -type NAME`\n\n", len(sums), total)
			t = newTable(e.stdout, "TYPE", "VERSION", "EVENTS", "SCHEMA", "READ BY")
			for _, in := range infos {
				t.row(in.Type, in.Version, in.events, schemaDigest(in.schema), readBy(len(in.readBy), len(reg.Builds)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			if !recorded {
				return nil
			}
			fmt.Fprintln(e.stdout)
			t = newTable(e.stdout, "BUILD", "NODE", "FIRST RECORDED", "LAST RECORDED", "WRITES", "READS")
			for _, b := range reg.Builds {
				t.row(b.Build, b.Node, fmtTime(b.FirstRecordedAt), fmtTime(b.LastRecordedAt), len(b.Writes), len(b.Reads))
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d recorded builds; show a type's schemas with `scribe types -type NAME`\n", len(reg.Builds))
			return nil
		},
	}
}

func readBy(n, builds int) string {
	if builds == 0 {
		return "no build recorded"
	}
	return fmt.Sprintf("%d of %d builds", n, builds)
}

// typesJSON writes one object per type, its versions nested.
func typesJSON(e *env, sums []journal.TypeSummary, infos []typeVersionInfo, reg journal.RecordedTypes) error {
	versions := map[string][]map[string]any{}
	var types []string
	for _, in := range infos {
		if versions[in.Type] == nil {
			types = append(types, in.Type)
		}
		v := map[string]any{"version": in.Version, "events": in.events, "readBy": append([]string{}, in.readBy...)}
		if in.schema != nil {
			v["schema"] = in.schema
		}
		versions[in.Type] = append(versions[in.Type], v)
	}
	for _, t := range sums {
		if err := emitJSON(e.stdout, map[string]any{
			"type": t.Type, "count": t.Count, "firstPosition": t.FirstPosition, "lastPosition": t.LastPosition,
			"firstRecordedAt": jsonTime(t.FirstRecordedAt), "lastRecordedAt": jsonTime(t.LastRecordedAt),
			"versions": versions[t.Type],
		}); err != nil {
			return err
		}
	}
	for _, name := range types { // recorded types without stored events
		if slices.ContainsFunc(sums, func(s journal.TypeSummary) bool { return s.Type == name }) {
			continue
		}
		if err := emitJSON(e.stdout, map[string]any{"type": name, "count": 0, "versions": versions[name]}); err != nil {
			return err
		}
	}
	return nil
}

// printTypeSchemas shows one type's versions with their schemas in full.
func printTypeSchemas(e *env, name string, infos []typeVersionInfo, builds int) error {
	found := false
	for _, in := range infos {
		if in.Type != name {
			continue
		}
		found = true
		if e.opts.json {
			if err := emitJSON(e.stdout, map[string]any{"type": in.Type, "version": in.Version, "events": in.events, "schema": in.schema, "readBy": append([]string{}, in.readBy...)}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(e.stdout, "%s v%d: %d events, read by %s\n", in.Type, in.Version, in.events, readBy(len(in.readBy), builds))
		if in.schema == nil {
			fmt.Fprintf(e.stdout, "  no schema recorded\n\n")
			continue
		}
		var b bytes.Buffer
		if err := json.Indent(&b, in.schema, "  ", "  "); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "  %s\n\n", b.String())
	}
	if !found {
		return fmt.Errorf("no event type %q is stored or recorded; list the types with `scribe types`", name)
	}
	return nil
}
