package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/snapshots"
)

// openSnapshots opens the schema's snapshot store.
func (e *env) openSnapshots() (*store, *postgres.SnapshotStore, error) {
	s, err := e.open()
	if err != nil {
		return nil, nil, err
	}
	st, err := postgres.NewSnapshotStore(s.pool, s.cfg)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, st, nil
}

func snapshotsListCommand() *command {
	var partition, tag string
	return &command{
		name:    "snapshots list",
		summary: "list the streams that have snapshots (or, with -tag, one stream's snapshots)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition; with -tag: default)")
			fs.StringVar(&tag, "tag", "", "list the snapshots of this stream")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			s, st, err := e.openSnapshots()
			if err != nil {
				return err
			}
			defer s.Close()
			if tag != "" {
				stream := journal.StreamID{Partition: partition, Tag: journal.Tag(tag)}.Normalize()
				infos, err := st.List(e.ctx, stream)
				if err != nil {
					return err
				}
				if e.opts.json {
					for _, in := range infos {
						if err := emitJSON(e.stdout, map[string]any{"partition": stream.Partition, "tag": stream.Tag, "version": in.Version, "schemaVersion": in.SchemaVersion, "size": in.Size, "createdAt": jsonTime(in.CreatedAt)}); err != nil {
							return err
						}
					}
					return nil
				}
				t := newTable(e.stdout, "VERSION", "SCHEMA", "SIZE", "CREATED")
				for _, in := range infos {
					t.row(in.Version, in.SchemaVersion, in.Size, fmtTime(in.CreatedAt))
				}
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "\n%d snapshots of stream %s\n", len(infos), stream)
				return nil
			}
			sums, err := st.Streams(e.ctx, partition)
			if err != nil {
				return err
			}
			if e.opts.json {
				for _, sum := range sums {
					if err := emitJSON(e.stdout, map[string]any{"partition": sum.Stream.Partition, "tag": sum.Stream.Tag, "count": sum.Count, "oldest": sum.Oldest, "newest": sum.Newest, "newestAt": jsonTime(sum.NewestAt), "size": sum.Size}); err != nil {
						return err
					}
				}
				return nil
			}
			t := newTable(e.stdout, "PARTITION", "TAG", "SNAPSHOTS", "OLDEST", "NEWEST", "NEWEST CREATED", "BYTES")
			total := 0
			for _, sum := range sums {
				total += sum.Count
				t.row(sum.Stream.Partition, sum.Stream.Tag, sum.Count, sum.Oldest, sum.Newest, fmtTime(sum.NewestAt), sum.Size)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d snapshots of %d streams\n", total, len(sums))
			return nil
		},
	}
}

func snapshotsPruneCommand() *command {
	var partition, tag string
	var keep int
	return &command{
		name:    "snapshots prune",
		summary: "delete all but the newest N snapshots of each stream (-keep N, at least 1: the newest is never deleted)",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&keep, "keep", 0, "how many of each stream's newest snapshots to keep (required, ≥ 1)")
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition; with -tag: default)")
			fs.StringVar(&tag, "tag", "", "only this stream")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			policy := snapshots.Retention{Keep: keep}
			if policy.Validate() != nil {
				return usagef("-keep %d: give how many snapshots to keep per stream, at least 1 (a stream's newest snapshot is never deleted)", keep)
			}
			s, st, err := e.openSnapshots()
			if err != nil {
				return err
			}
			defer s.Close()
			if err := snapshotsMatch(e.ctx, st, partition, tag); err != nil {
				return err
			}
			var res snapshots.PruneResult
			if tag != "" {
				n, err := policy.Prune(e.ctx, st, journal.StreamID{Partition: partition, Tag: journal.Tag(tag)}.Normalize())
				if err != nil {
					return err
				}
				res.Deleted = n
				if n > 0 {
					res.Streams = 1
				}
			} else if res, err = policy.PruneAll(e.ctx, st, partition); err != nil {
				return fmt.Errorf("%w (deleted %d snapshots of %d streams before the failure)", err, res.Deleted, res.Streams)
			}
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"keep": keep, "streams": res.Streams, "deleted": res.Deleted})
			}
			fmt.Fprintf(e.stdout, "deleted %d snapshots of %d streams; each stream keeps its newest %d\n", res.Deleted, res.Streams, keep)
			return nil
		},
	}
}

// snapshotsMatch fails, naming the selector, when -tag or -partition
// selects no stream with snapshots: a typo must not pass for "nothing to
// prune". Without a selector an empty store is not an error.
func snapshotsMatch(ctx context.Context, st snapshots.Store, partition, tag string) error {
	if tag != "" {
		stream := journal.StreamID{Partition: partition, Tag: journal.Tag(tag)}.Normalize()
		infos, err := st.List(ctx, stream)
		if err != nil {
			return err
		}
		if len(infos) == 0 {
			return fmt.Errorf("stream %s has no snapshots; nothing deleted (list them with `scribe snapshots list`)", stream)
		}
		return nil
	}
	if partition == "" {
		return nil
	}
	l, ok := st.(snapshots.Lister)
	if !ok {
		return nil // PruneAll says the store cannot list
	}
	streams, err := l.Streams(ctx, partition)
	if err != nil {
		return err
	}
	if len(streams) == 0 {
		return fmt.Errorf("partition %q has no snapshots; nothing deleted (list them with `scribe snapshots list`)", partition)
	}
	return nil
}
