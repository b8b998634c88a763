package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// printRecord writes one record as a block of lines: where it is (its
// position, time, type) and what it says (ID, tags with their per-tag
// versions, data, metadata).
func printRecord(w io.Writer, r journal.Record) {
	fmt.Fprintf(w, "position %s  %s  %s (schema %d)  partition %s\n", r.Position, fmtTime(r.RecordedAt), r.Type, r.SchemaVersion, r.Partition())
	versions := make([]string, 0, len(r.Links))
	for _, l := range r.Links {
		versions = append(versions, fmt.Sprintf("%s v%d", l.Tag, l.Version))
	}
	chains := "-"
	if len(versions) > 0 {
		chains = strings.Join(versions, ", ")
	}
	fmt.Fprintf(w, "  id        %s\n  tags      %s\n  chains    %s\n  data      %s\n  metadata  %s\n", r.ID, tagList(r.Tags), chains, r.Data, metadataJSON(r.Metadata))
}

// readEvent reads the event with ID id, hot or archived; one that does not
// exist is an error naming the ID and the schema searched.
func (s *store) readEvent(ctx context.Context, id uuid.UUID) (journal.Record, error) {
	r, err := s.journal.ReadEvent(ctx, id)
	if errors.Is(err, journal.ErrNotFound) {
		return r, fmt.Errorf("no event with ID %s in schema %q, hot or archived; check the ID and -schema", id, s.cfg.Schema)
	}
	return r, err
}

func eventCommand() *command {
	return &command{
		name:    "event",
		args:    "ID",
		summary: "show one event by its ID: position, type, tags with their versions, data and metadata",
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if len(args) != 1 {
				return usagef("give exactly one event ID, e.g. `scribe event 0192f0c4-6c2e-7b61-9a0e-3f1c2d4b5a69`")
			}
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usagef("%q is not an event ID (a UUID such as 0192f0c4-6c2e-7b61-9a0e-3f1c2d4b5a69): %v", args[0], err)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			r, err := s.readEvent(e.ctx, id)
			if err != nil {
				return err
			}
			if e.opts.json {
				return emitJSON(e.stdout, viewRecord(r))
			}
			printRecord(e.stdout, r)
			return nil
		},
	}
}

func correlationCommand() *command {
	var limit int
	return &command{
		name:    "correlation",
		args:    "ID",
		summary: "show every event whose metadata carries a correlation ID, in feed order",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "limit", 0, "show at most this many events (0: all)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usagef("give exactly one correlation ID, e.g. `scribe correlation req-42`")
			}
			if limit < 0 {
				return usagef("-limit %d is negative; give 0 for all events or a positive number", limit)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			n := 0
			for r, err := range s.journal.ReadByCorrelation(e.ctx, args[0]) {
				if err != nil {
					return err
				}
				if limit > 0 && n == limit {
					break
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
				printRecord(e.stdout, r)
			}
			if n == 0 {
				return fmt.Errorf("no event carries correlation ID %q in schema %q; correlation IDs are matched exactly", args[0], s.cfg.Schema)
			}
			if !e.opts.json {
				fmt.Fprintf(e.stdout, "\n%d events with correlation ID %q\n", n, args[0])
			}
			return nil
		},
	}
}
