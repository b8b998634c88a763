package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// streamsPage is how many streams one listing query reads.
const streamsPage = 500

func streamsListCommand() *command {
	var partition, prefix string
	var limit int
	return &command{
		name:    "streams list",
		summary: "list streams with their event counts (versions), last position and last write",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition)")
			fs.StringVar(&prefix, "tag-prefix", "", "only tags starting with this prefix, e.g. account:")
			fs.IntVar(&limit, "limit", 0, "list at most this many streams (0: all)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("-limit %d is negative; give 0 for all streams or a positive number", limit)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			var t *table
			if !e.opts.json {
				t = newTable(e.stdout, "PARTITION", "TAG", "VERSION", "FIRST WRITE", "LAST WRITE", "LAST POSITION")
			}
			var streams, events uint64
			q := pgadmin.StreamsQuery{Partition: partition, TagPrefix: prefix}
			for {
				q.Limit = streamsPage
				if limit > 0 {
					q.Limit = min(streamsPage, limit-int(streams))
				}
				page, err := s.admin.Streams(e.ctx, q)
				if err != nil {
					return err
				}
				for _, sum := range page {
					streams++
					events += sum.Version
					if e.opts.json {
						if err := emitJSON(e.stdout, summaryView(sum)); err != nil {
							return err
						}
						continue
					}
					t.row(sum.Stream.Partition, sum.Stream.Tag, sum.Version, fmtTime(sum.FirstRecordedAt), fmtTime(sum.LastRecordedAt), sum.LastPosition)
				}
				if len(page) < q.Limit || (limit > 0 && int(streams) >= limit) {
					break
				}
				q.After = page[len(page)-1].Stream
			}
			if streams == 0 && (partition != "" || prefix != "") {
				return fmt.Errorf("no stream matches %s; check the spelling (without it, `scribe streams list` lists every stream)", streamsFilter(partition, prefix))
			}
			if e.opts.json {
				return nil
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d streams, %d events in them\n", streams, events)
			return nil
		},
	}
}

// streamsFilter describes the selectors of a streams listing.
func streamsFilter(partition, prefix string) string {
	var parts []string
	if partition != "" {
		parts = append(parts, fmt.Sprintf("-partition %q", partition))
	}
	if prefix != "" {
		parts = append(parts, fmt.Sprintf("-tag-prefix %q", prefix))
	}
	return strings.Join(parts, " with ")
}

// summaryView is the JSON form of a tag summary.
func summaryView(s journal.TagSummary) map[string]any {
	return map[string]any{
		"partition":       s.Stream.Partition,
		"tag":             s.Stream.Tag,
		"version":         s.Version,
		"headHash":        s.HeadHash.String(),
		"firstPosition":   s.FirstPosition,
		"lastPosition":    s.LastPosition,
		"firstRecordedAt": jsonTime(s.FirstRecordedAt),
		"lastRecordedAt":  jsonTime(s.LastRecordedAt),
		// The checkpoint: versions up to cut.version are archived.
		"cut":     map[string]any{"version": s.Cut.Version, "hash": s.Cut.Hash.String(), "position": s.Cut.Position},
		"retired": s.Retired,
	}
}

// recordView is the JSON form of a record: data and metadata as JSON
// objects, per-tag versions and hashes by tag.
type recordView struct {
	Position      journal.Position  `json:"position"`
	Partition     string            `json:"partition"`
	ID            string            `json:"id"`
	Type          string            `json:"type"`
	SchemaVersion int               `json:"schemaVersion"`
	Tags          []journal.Tag     `json:"tags"`
	Versions      map[string]uint64 `json:"versions"`
	RecordedAt    any               `json:"recordedAt"`
	Data          json.RawMessage   `json:"data"`
	Metadata      journal.Metadata  `json:"metadata"`
	Hashes        map[string]string `json:"hashes"`
}

func viewRecord(r journal.Record) recordView {
	v := recordView{
		Position: r.Position, Partition: r.Partition(), ID: r.ID.String(), Type: r.Type, SchemaVersion: r.SchemaVersion,
		Tags: r.Tags, Versions: map[string]uint64{}, RecordedAt: jsonTime(r.RecordedAt), Data: r.Data, Metadata: r.Metadata,
		Hashes: map[string]string{},
	}
	for _, l := range r.Links {
		v.Versions[string(l.Tag)] = l.Version
		v.Hashes[string(l.Tag)] = l.Hash.String()
	}
	return v
}

// tagList renders tags for a table.
func tagList(tags []journal.Tag) string {
	if len(tags) == 0 {
		return "-"
	}
	s := make([]string, len(tags))
	for i, t := range tags {
		s[i] = string(t)
	}
	return strings.Join(s, ",")
}

// metadataJSON renders the set fields of md as compact JSON ("{}" when none).
func metadataJSON(md journal.Metadata) string {
	b, err := json.Marshal(md)
	if err != nil {
		return "?"
	}
	return string(b)
}

func streamShowCommand() *command {
	var partition string
	var from uint64
	var limit, last int
	var archive bool
	return &command{
		name:    "stream show",
		args:    "TAG",
		summary: "show a stream's events: versions, positions, types, data and metadata",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", journal.DefaultPartition, "the stream's partition")
			fs.Uint64Var(&from, "from", 1, "first version to show")
			fs.IntVar(&limit, "limit", 0, "show at most this many events (0: all)")
			fs.IntVar(&last, "last", 0, "show only the newest N events, oldest of them first (not with -from or -limit)")
			fs.BoolVar(&archive, "archive", false, "read archived events too (by default an archived stream is shown from its cut on)")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error {
			fromSet := false
			fs.Visit(func(f *flag.Flag) { fromSet = fromSet || f.Name == "from" })
			if len(args) != 1 {
				return usagef("give exactly one stream tag, e.g. `scribe stream show account:42`")
			}
			if limit < 0 {
				return usagef("-limit %d is negative; give 0 for all events or a positive number", limit)
			}
			if last < 0 {
				return usagef("-last %d is negative; give the number of newest events to show", last)
			}
			if last > 0 && (fromSet || limit > 0) {
				return usagef("-last shows the newest events; it cannot be combined with -from or -limit")
			}
			stream := journal.StreamID{Partition: partition, Tag: journal.Tag(args[0])}.Normalize()
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			n := 0
			read := s.journal.ReadStream
			if archive {
				read = s.journal.ReadStreamWithArchive
			}
			if last > 0 {
				sum, err := s.journal.TagSummary(e.ctx, stream)
				if err != nil {
					return err
				}
				if sum.Version > uint64(last) {
					from = sum.Version - uint64(last) + 1
				}
				limit = last
				fromSet = from > sum.Cut.Version
			}
			if !archive && !fromSet {
				sum, err := s.journal.TagSummary(e.ctx, stream)
				if err != nil {
					return err
				}
				if sum.Cut.Version >= from {
					fmt.Fprintf(e.stderr, "versions 1 to %d of %s are archived (show them with -archive); showing the stream from version %d\n", sum.Cut.Version, stream, sum.Cut.Version+1)
					from = sum.Cut.Version + 1
				}
			}
			for r, err := range read(e.ctx, stream, from, limit) {
				if err != nil {
					return err
				}
				n++
				if e.opts.json {
					if err := emitJSON(e.stdout, viewRecord(r)); err != nil {
						return err
					}
					continue
				}
				if n > 1 {
					fmt.Fprintln(e.stdout)
				}
				fmt.Fprintf(e.stdout, "%s version %d  position %s  %s  %s (schema %d)\n", stream, r.Version(stream.Tag), r.Position, fmtTime(r.RecordedAt), r.Type, r.SchemaVersion)
				fmt.Fprintf(e.stdout, "  id        %s\n  tags      %s\n  data      %s\n  metadata  %s\n", r.ID, tagList(r.Tags), r.Data, metadataJSON(r.Metadata))
			}
			if n == 0 {
				sum, err := s.journal.TagSummary(e.ctx, stream)
				if err != nil {
					return err
				}
				if sum.Version == 0 {
					return fmt.Errorf("stream %s has no events; check the tag and -partition, or list streams with `scribe streams list -tag-prefix %s`", stream, stream.Tag.Group()+":")
				}
				if !e.opts.json {
					fmt.Fprintf(e.stdout, "stream %s has %d events; none from version %d\n", stream, sum.Version, from)
				}
			}
			return nil
		},
	}
}

func tagsCommand() *command {
	var partition string
	return &command{
		name:    "tags",
		args:    "GROUP",
		summary: "summarize the tags (streams) of a group, e.g. `scribe tags account`",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", journal.DefaultPartition, "the partition")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usagef("give exactly one tag group, the text before the colon of its tags (\"account\" for account:42)")
			}
			group := strings.TrimSuffix(args[0], ":")
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			sums, err := s.journal.TagsOfGroup(e.ctx, partition, group)
			if err != nil {
				return err
			}
			if len(sums) == 0 {
				return fmt.Errorf("group %q has no streams in partition %s; check the group and -partition (`scribe streams list` shows every stream's partition and tag)",
					group, journal.StreamID{Partition: partition}.Normalize().Partition)
			}
			if e.opts.json {
				for _, sum := range sums {
					if err := emitJSON(e.stdout, summaryView(sum)); err != nil {
						return err
					}
				}
				return nil
			}
			t := newTable(e.stdout, "TAG", "VERSION", "CUT", "FIRST WRITE", "LAST WRITE", "LAST POSITION", "HEAD HASH")
			var events uint64
			for _, sum := range sums {
				events += sum.Version
				cut := strconv.FormatUint(sum.Cut.Version, 10)
				if sum.Retired {
					cut += " (retired)"
				}
				t.row(sum.Stream.Tag, sum.Version, cut, fmtTime(sum.FirstRecordedAt), fmtTime(sum.LastRecordedAt), sum.LastPosition, sum.HeadHash.String()[:16])
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%s tags in group %q of partition %s, %d events\n", strconv.Itoa(len(sums)), group, journal.StreamID{Partition: partition}.Normalize().Partition, events)
			return nil
		},
	}
}
