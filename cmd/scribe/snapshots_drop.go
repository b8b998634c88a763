package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func snapshotsDropCommand() *command {
	var aggregate, partition string
	var below int
	return &command{
		name:    "snapshots drop",
		summary: "delete the snapshots of an aggregate's streams (-aggregate A), all or those below a state schema version (-below-version N); they replay at their next recovery",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&aggregate, "aggregate", "", "the aggregate (tag group) whose snapshots to delete (required)")
			fs.IntVar(&below, "below-version", 0, "delete only snapshots stamped with a state schema version below this (default: every snapshot)")
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			switch {
			case aggregate == "" || strings.ContainsRune(aggregate, ':'):
				return usagef("-aggregate %q: give the aggregate's name, the tag group of its streams (e.g. account)", aggregate)
			case below < 0:
				return usagef("-below-version %d: give a positive state schema version, or leave it out to delete every snapshot", below)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := s.admin.DropSnapshots(e.ctx, pgadmin.SnapshotDrop{Aggregate: aggregate, Partition: partition, BelowSchemaVersion: below})
			if err != nil {
				return err
			}
			if res.Found == 0 {
				where := "any partition"
				if partition != "" {
					where = "partition " + partition
				}
				return fmt.Errorf("no snapshots of aggregate %q in %s; nothing deleted (list them with `scribe snapshots list`)", aggregate, where)
			}
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"aggregate": aggregate, "partition": partition, "belowVersion": below, "found": res.Found, "deleted": res.Deleted, "streams": res.Streams})
			}
			which := "every snapshot"
			if below > 0 {
				which = fmt.Sprintf("the snapshots below state schema version %d", below)
			}
			fmt.Fprintf(e.stdout, "deleted %d of %d snapshots of aggregate %q (%s) from %d streams; they replay from their events at their next recovery\n",
				res.Deleted, res.Found, aggregate, which, res.Streams)
			return nil
		},
	}
}
