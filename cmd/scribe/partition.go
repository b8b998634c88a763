package main

import (
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func partitionMoveCommand() *command {
	var from, to, partition, fromSchema, toSchema, toName string
	var confirm bool
	var batch int
	return &command{
		name: "partition move",
		summary: "move a partition to another database: copy its events while it serves, fence its streams (commands to it get a retryable error " +
			"for the cut-over), copy the rest, its stream heads and snapshots, verify them on the target, switch and delete the source's copy; " +
			"resumable: a failure says whether running it again continues the move (a crash, a lost connection) or what to fix first",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&from, "from", "", "the source database URL (default: -db or $"+EnvDatabaseURL+")")
			fs.StringVar(&to, "to", "", "the target database URL (required)")
			fs.StringVar(&partition, "partition", "", "the partition to move (required)")
			fs.StringVar(&fromSchema, "from-schema", "", "the source's schema (default: -schema)")
			fs.StringVar(&toSchema, "to-schema", "", "the target's schema (default: -schema)")
			fs.StringVar(&toName, "to-name", "", "the target's name in the services' partition map: the moved source names it, and a partitioned.Router "+
				"with a member of that name switches to it by itself (default: the target's address)")
			fs.IntVar(&batch, "batch", 1000, "events copied per transaction")
			fs.BoolVar(&confirm, "confirm", false, "move it (without it, show what would be moved)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if from == "" {
				from = e.opts.db
			}
			if from == "" {
				from = e.opts.getenv(EnvDatabaseURL)
			}
			switch {
			case from == "" || to == "":
				return usagef("give the source with -from and the target with -to (database URLs)")
			case partition == "":
				return usagef("give the partition to move with -partition")
			case batch < 1:
				return usagef("-batch %d: give at least 1", batch)
			}
			if fromSchema == "" {
				fromSchema = e.opts.schema
			}
			if toSchema == "" {
				toSchema = e.opts.schema
			}
			src, err := e.migratedPool(from, fromSchema, "-from")
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := e.migratedPool(to, toSchema, "-to")
			if err != nil {
				return err
			}
			defer dst.Close()
			spec := pgadmin.PartitionMove{
				Partition: partition, Source: src, SourceSchema: fromSchema, Target: dst, TargetSchema: toSchema,
				To: toName, BatchSize: batch,
			}
			if !confirm {
				// A refusal (a partition the source does not hold, one moved
				// away, a target that holds it) fails here as -confirm would,
				// writing nothing.
				plan, err := pgadmin.PlanPartitionMove(e.ctx, spec)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "partition %q on %s: %d events (%d archived) in %d streams (%d retired), %d snapshots\n",
					plan.Partition, plan.Source, plan.Events, plan.Archived, plan.Streams, plan.Tombstones, plan.Snapshots)
				if plan.Resume != "" {
					fmt.Fprintf(e.stdout, "the target records an unfinished move of it from this source, stopped at step %q: -confirm resumes it there\n", plan.Resume)
				}
				fmt.Fprintf(e.stdout, "-confirm would copy it to %s, fence it (commands to it get a retryable error for the cut-over), copy the rest, verify, switch and delete the source's copy\n",
					plan.Target)
				return nil
			}
			spec.Progress = func(p pgadmin.MoveProgress) {
				if p.Step == pgadmin.MoveCopy || p.Step == pgadmin.MovePrecopy {
					fmt.Fprintf(e.stderr, "%s: %d/%d events\n", p.Step, p.Copied, p.Total)
					return
				}
				fmt.Fprintf(e.stderr, "%s: done (%d/%d events, %d streams)\n", p.Step, p.Copied, p.Total, p.Streams)
			}
			// A failure's *pgadmin.MoveError says whether running the same
			// command again continues the move or what to fix first.
			rep, err := pgadmin.MovePartition(e.ctx, spec)
			if err != nil {
				return err
			}
			resumed := ""
			if rep.Resumed {
				resumed = " (resumed)"
			}
			fmt.Fprintf(e.stdout, "moved partition %q%s: %d events (%d archived), %d streams (%d retired), %d snapshots; the source answers that it moved; update every node's partition map\n",
				rep.Partition, resumed, rep.Events, rep.Archived, rep.Streams, rep.Tombstones, rep.Snapshots)
			return nil
		},
	}
}

// migratedPool connects to url and checks that schema is migrated to this
// build's version (a move needs the partition_fences table on both sides).
func (e *env) migratedPool(url, schema, flagName string) (*pgxpool.Pool, error) {
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return nil, usagef("%s: the database URL is not valid (%v)", flagName, err)
	}
	pool, err := postgres.Connect(e.ctx, url, postgres.Config{MaxConns: 4})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if err := postgres.VerifySchema(e.ctx, pool, postgres.Config{Schema: schema}); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s schema %q: %w (run `scribe migrate up` on it with this build)", flagName, schema, err)
	}
	return pool, nil
}
