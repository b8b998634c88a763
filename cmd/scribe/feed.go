package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// listFlag is a comma-separated list flag that may also be repeated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// feedLine renders a record as one line of the feed.
func feedLine(r journal.Record) string {
	return fmt.Sprintf("%-14s %s  %-10s %-22s %-34s %s", r.Position, fmtTime(r.RecordedAt), r.Partition(), r.Type, tagList(r.Tags), r.Data)
}

func tailCommand() *command {
	var types, tags listFlag
	var partition, from string
	return &command{
		name:    "tail",
		summary: "follow the global feed live (until interrupted)",
		flags: func(fs *flag.FlagSet) {
			fs.Var(&types, "type", "only events of these types (comma-separated or repeated; any of them)")
			fs.Var(&tags, "tag", "only events carrying these tags (comma-separated or repeated; all of them)")
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition)")
			fs.StringVar(&from, "from", "", "start after this position (as printed, e.g. 812.4031), or \"start\" for the whole feed (default: only new events)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			var after journal.Position
			fromHead := from == ""
			if !fromHead && from != "start" {
				p, err := journal.ParsePosition(from)
				if err != nil {
					return usagef("-from %q is not a position; give one as tail and events print it (e.g. 812.4031) or \"start\"", from)
				}
				after = p
			}
			item := journal.QueryItem{Types: types}
			for _, t := range tags {
				item.Tags = append(item.Tags, journal.Tag(t))
			}
			filtered := len(item.Types) > 0 || len(item.Tags) > 0
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			if fromHead {
				if after, err = s.journal.Head(e.ctx); err != nil {
					return err
				}
			}
			if !e.opts.json {
				fmt.Fprintf(e.stderr, "following the feed after position %s; interrupt (Ctrl-C) to stop\n", after)
			}
			for r, err := range s.journal.Subscribe(e.ctx, journal.Query{All: true, AllPartitions: true}, after) {
				if err != nil {
					if e.ctx.Err() != nil && errors.Is(err, e.ctx.Err()) {
						return nil // interrupted: a clean end
					}
					return err
				}
				if (partition != "" && r.Partition() != partition) || (filtered && !item.Matches(&r.Event)) {
					continue
				}
				if e.opts.json {
					if err := emitJSON(e.stdout, viewRecord(r)); err != nil {
						return err
					}
					continue
				}
				if _, err := fmt.Fprintln(e.stdout, feedLine(r)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// parseTime reads a time flag: RFC 3339 ("2026-11-25T08:00:00Z"), a date
// ("2026-11-25", UTC midnight) or a duration before now ("90m", "24h").
func parseTime(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usagef("-%s %q is a negative duration; give how long ago, e.g. 1h", name, s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("-%s %q is not a time; give RFC 3339 (2026-11-25T08:00:00Z), a date (2026-11-25) or a duration before now (90m)", name, s)
}

func eventsCommand() *command {
	var types listFlag
	var since, until string
	var desc bool
	var limit int
	return &command{
		name:    "events",
		summary: "read events by type and time range, ascending or descending",
		flags: func(fs *flag.FlagSet) {
			fs.Var(&types, "type", "event types to read (comma-separated or repeated; required)")
			fs.StringVar(&since, "since", "", "only events recorded at or after this time (RFC 3339, a date, or a duration before now such as 1h)")
			fs.StringVar(&until, "until", "", "only events recorded before this time (same forms as -since)")
			fs.BoolVar(&desc, "desc", false, "newest first")
			fs.IntVar(&limit, "limit", 100, "show at most this many events (0: all)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if len(types) == 0 {
				return usagef("name at least one event type with -type, e.g. -type MoneyDeposited")
			}
			if limit < 0 {
				return usagef("-limit %d is negative; give 0 for all events or a positive number", limit)
			}
			now := time.Now()
			from, err := parseTime("since", since, now)
			if err != nil {
				return err
			}
			to, err := parseTime("until", until, now)
			if err != nil {
				return err
			}
			if !from.IsZero() && !to.IsZero() && !from.Before(to) {
				return usagef("-since %s is not before -until %s; the range is empty", since, until)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			q := journal.TypeQuery{Types: types, From: from, To: to, Descending: desc, Limit: limit}
			n := 0
			for r, err := range s.journal.ReadTypes(e.ctx, q) {
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
				if _, err := fmt.Fprintln(e.stdout, feedLine(r)); err != nil {
					return err
				}
			}
			if !e.opts.json {
				more := ""
				if limit > 0 && n == limit {
					more = " (the limit; raise -limit or narrow -since/-until)"
				}
				fmt.Fprintf(e.stderr, "%d events%s\n", n, more)
			}
			return nil
		},
	}
}
