package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// policyFlag collects -policy GROUP=RULE flags.
type policyFlag map[string]pgadmin.RetentionRule

func (p policyFlag) String() string {
	parts := make([]string, 0, len(p))
	for g, r := range p {
		parts = append(parts, g+"="+r.String())
	}
	return strings.Join(parts, " ")
}

func (p policyFlag) Set(s string) error {
	group, rule, ok := strings.Cut(s, "=")
	if !ok || group == "" {
		return fmt.Errorf("%q: give GROUP=RULE, for example account=keep:100", s)
	}
	if _, dup := p[group]; dup {
		return fmt.Errorf("group %q has two rules; give one -policy per group", group)
	}
	r, err := pgadmin.ParseRetentionRule(rule)
	if err != nil {
		return err
	}
	p[group] = r
	return nil
}

func archiveCommand() *command {
	policy := policyFlag{}
	var (
		partition       string
		dryRun, confirm bool
		compact, skip   bool
		batch           int
	)
	return &command{
		name: "archive",
		summary: "retire old events into the archive by retention policy: -dry-run shows what would go, -confirm retires it " +
			"in batches (resumable); retired streams always go whole",
		flags: func(fs *flag.FlagSet) {
			fs.Var(policy, "policy", "GROUP=RULE, repeatable; RULE is keep:N (newest N per stream), age:DURATION (e.g. 720h) "+
				"or snapshot (up to the newest snapshot), optionally with ,nosnapshot for groups no aggregate recovers from; "+
				"group "+journal.UntaggedGroup+" holds the untagged events' chains")
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition)")
			fs.BoolVar(&dryRun, "dry-run", false, "show what the policy would retire, change nothing")
			fs.BoolVar(&confirm, "confirm", false, "retire it")
			fs.IntVar(&batch, "batch", 1000, "stream versions retired per transaction")
			fs.BoolVar(&skip, "skip-refused", false, "with -confirm: retire the other streams when some are refused "+
				"(no snapshot at or after their new cut) and leave those untouched; by default nothing is retired then")
			fs.BoolVar(&compact, "compact", false, "after retiring, VACUUM FULL the hot tables so their files shrink "+
				"(locks the journal's tables while it runs: a maintenance window); without it a plain VACUUM makes the space reusable")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if dryRun == confirm {
				return usagef("give -dry-run to see what would be retired, or -confirm to retire it")
			}
			if batch < 1 {
				return usagef("-batch %d: give at least 1", batch)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			if err := checkArchiveSelectors(e, s, partition, policy); err != nil {
				return err
			}
			pol := pgadmin.RetentionPolicy{Groups: policy, Partition: partition}
			plan, err := s.admin.PlanArchive(e.ctx, pol)
			if err != nil {
				return err
			}
			if dryRun {
				return printPlan(e, plan)
			}
			if len(plan.Streams) == 0 {
				fmt.Fprintln(e.stdout, "nothing to retire: every stream the policy selects is within its rule, and no retired stream has hot events; nothing was changed")
				return nil
			}
			if refused := plan.Refused(); len(refused) > 0 {
				if !skip {
					return fmt.Errorf("%w (or pass -skip-refused to retire the other streams)", &pgadmin.SnapshotRequiredError{Streams: refused})
				}
				for _, c := range refused {
					fmt.Fprintf(e.stderr, "archive: skipping %s: %s\n", c.Stream, c.Refused)
				}
			}
			return runArchive(e, s, plan, batch, compact)
		},
	}
}

// checkArchiveSelectors fails, naming them, when -partition names a
// partition without streams or a -policy group has no stream (in that
// partition, or in any): such a run would retire nothing and say only
// "retired 0", so a typo in a scheduled job would never be noticed.
func checkArchiveSelectors(e *env, s *store, partition string, policy policyFlag) error {
	where := "any partition"
	if partition != "" {
		where = fmt.Sprintf("partition %q", partition)
		page, err := s.admin.Streams(e.ctx, pgadmin.StreamsQuery{Partition: partition, Limit: 1})
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return fmt.Errorf("-partition %q matches no stream, so nothing was retired; check its spelling (`scribe streams list` shows each stream's partition)", partition)
		}
	}
	var missing []string
	for _, g := range slices.Sorted(maps.Keys(policy)) {
		page, err := s.admin.Streams(e.ctx, pgadmin.StreamsQuery{Partition: partition, TagPrefix: g + ":", Limit: 1})
		if err != nil {
			return err
		}
		if len(page) == 0 {
			missing = append(missing, strconv.Quote(g))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("-policy group %s matches no stream in %s, so nothing was retired; check its spelling (`scribe streams list` shows the tags, group:value)",
			strings.Join(missing, ", "), where)
	}
	return nil
}

// printPlan prints what a plan would retire: a row per stream and a total
// per group.
func printPlan(e *env, plan pgadmin.ArchivePlan) error {
	type total struct {
		streams int
		retire  uint64
		refused int
	}
	groups := map[string]*total{}
	var order []string
	for _, c := range plan.Streams {
		g := c.Stream.Tag.Group()
		if groups[g] == nil {
			groups[g] = &total{}
			order = append(order, g)
		}
		t := groups[g]
		t.streams++
		if c.Refused != "" {
			t.refused++
		} else {
			t.retire += c.Retire()
		}
	}
	if e.opts.json {
		for _, c := range plan.Streams {
			if err := emitJSON(e.stdout, map[string]any{"partition": c.Stream.Partition, "tag": c.Stream.Tag, "rule": c.Rule,
				"version": c.Version, "cut": c.Cut, "target": c.Target, "retire": c.Retire(), "snapshot": c.Snapshot, "refused": c.Refused}); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(e.stdout, "PARTITION", "TAG", "RULE", "VERSION", "CUT", "NEW CUT", "RETIRE", "SNAPSHOT", "STATUS")
	for _, c := range plan.Streams {
		status := "ok"
		if c.Refused != "" {
			status = "REFUSED: " + c.Refused
		}
		t.row(c.Stream.Partition, c.Stream.Tag, c.Rule, c.Version, c.Cut, c.Target, c.Retire(), c.Snapshot, status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	gt := newTable(e.stdout, "GROUP", "STREAMS", "VERSIONS TO RETIRE", "REFUSED")
	for _, g := range order {
		gt.row(g, groups[g].streams, groups[g].retire, groups[g].refused)
	}
	if err := gt.flush(); err != nil {
		return err
	}
	if len(plan.Streams) == 0 {
		fmt.Fprintln(e.stdout, "\nnothing to retire")
		return nil
	}
	fmt.Fprintf(e.stdout, "\n%d stream versions of %d streams would be retired", plan.Events(), len(plan.Streams)-len(plan.Refused()))
	if n := len(plan.Refused()); n > 0 {
		fmt.Fprintf(e.stdout, "; %d stream(s) REFUSED (no snapshot at or after the new cut): -confirm retires nothing until they are snapshotted", n)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// progressBar renders an Archive run's progress on stderr: redrawn in place
// on a terminal, one line per committed batch otherwise (a log, or a
// supervising program, sees each batch as it commits).
type progressBar struct {
	w        io.Writer
	terminal bool
	shown    time.Time
}

func (p *progressBar) show(pr pgadmin.ArchiveProgress) {
	pct := pr.Versions * 100 / max(pr.Total, 1)
	if !p.terminal {
		fmt.Fprintf(p.w, "archive: batch %d committed: %d/%d versions (%d%%), %d event rows moved\n", pr.Batches, pr.Versions, pr.Total, pct, pr.Events)
		return
	}
	if time.Since(p.shown) < progressEvery && pr.Versions < pr.Total {
		return
	}
	p.shown = time.Now()
	const width = 30
	filled := int(pct) * width / 100
	fmt.Fprintf(p.w, "\rarchive: [%s%s] %d/%d versions (%d%%), batch %d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), pr.Versions, pr.Total, pct, pr.Batches)
}

func (p *progressBar) clear() {
	if p.terminal && !p.shown.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// runArchive retires plan in batches with a progress bar, then vacuums
// (fully with compact) and reports the hot tables' sizes.
func runArchive(e *env, s *store, plan pgadmin.ArchivePlan, batch int, compact bool) error {
	before, err := s.admin.StorageSizes(e.ctx)
	if err != nil {
		return err
	}
	bar := &progressBar{w: e.stderr, terminal: isTerminal(e.stderr)}
	fmt.Fprintf(e.stderr, "archive: retiring %d stream versions of %d streams in batches of at most %d\n", plan.Events(), len(plan.Streams)-len(plan.Refused()), batch)
	prog, err := s.admin.ArchivePlanned(e.ctx, plan, pgadmin.ArchiveOptions{BatchSize: batch, Progress: bar.show})
	bar.clear()
	if err != nil {
		return archiveStopped(err, prog)
	}
	vacuum := "VACUUM"
	if compact {
		vacuum = "VACUUM FULL"
	}
	fmt.Fprintf(e.stderr, "archive: running %s on the hot tables\n", vacuum)
	if err := s.admin.Compact(e.ctx, compact); err != nil {
		return err
	}
	after, err := s.admin.StorageSizes(e.ctx)
	if err != nil {
		return err
	}
	if e.opts.json {
		return emitJSON(e.stdout, map[string]any{"batches": prog.Batches, "versions": prog.Versions, "events": prog.Events, "streams": prog.Streams,
			"hotBytesBefore": before.Hot(), "hotBytesAfter": after.Hot(), "archiveBytes": after.Archive(), "vacuum": vacuum})
	}
	fmt.Fprintf(e.stdout, "retired %d stream versions of %d streams in %d batches; %d event rows moved to the archive\n", prog.Versions, prog.Streams, prog.Batches, prog.Events)
	fmt.Fprintf(e.stdout, "hot tables (events, event_tags and their indexes): %s before, %s after %s; archive tables: %s\n",
		bytesString(before.Hot()), bytesString(after.Hot()), vacuum, bytesString(after.Archive()))
	if !compact {
		fmt.Fprintln(e.stdout, "(a plain VACUUM makes the space of retired rows reusable by new events but shrinks the files only at their end; run with -compact in a maintenance window to return it)")
	}
	return nil
}

// archiveStoppedError is an archive run that failed after planning: what
// stopped it and what was retired before (prog), which stays retired.
type archiveStoppedError struct {
	err  error
	prog pgadmin.ArchiveProgress
}

func (e *archiveStoppedError) Error() string {
	done := "nothing was retired"
	if e.prog.Versions > 0 {
		done = fmt.Sprintf("the %d batches committed before it retired %d of %d versions, which stay retired", e.prog.Batches, e.prog.Versions, e.prog.Total)
	}
	var sr *pgadmin.SnapshotRequiredError
	if errors.As(e.err, &sr) && len(sr.Streams) > 0 {
		// Its own message says "Nothing was retired", true of a plan but
		// not of a run that committed batches before the check failed.
		c := sr.Streams[0]
		return fmt.Sprintf("archive stopped: stream %s no longer has a snapshot at or after version %d (newest now: %d), so its batch was rolled back; %s. Snapshot it, or retire less, and run again",
			c.Stream, c.Target, c.Snapshot, done)
	}
	return fmt.Sprintf("archive stopped: %v; %s. Run the same command again to go on", e.err, done)
}

// Unwrap returns what stopped the run.
func (e *archiveStoppedError) Unwrap() error { return e.err }

// archiveStopped says what stopped an archive run and what it had retired.
func archiveStopped(err error, prog pgadmin.ArchiveProgress) error {
	return &archiveStoppedError{err: err, prog: prog}
}

// bytesString renders a size in MiB.
func bytesString(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func retireStreamCommand() *command {
	var partition string
	var confirm bool
	var batch int
	return &command{
		name:    "retire-stream",
		args:    "TAG",
		summary: "close a stream for good behind a tombstone (appends to it fail from then on) and retire all its events into the archive",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "the stream's partition (default: default)")
			fs.BoolVar(&confirm, "confirm", false, "retire it (without it, show the stream and what would happen)")
			fs.IntVar(&batch, "batch", 1000, "stream versions retired per transaction")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if len(args) != 1 {
				return usagef("give exactly one stream tag, such as account:42")
			}
			if batch < 1 {
				return usagef("-batch %d: give at least 1", batch)
			}
			stream := journal.StreamID{Partition: partition, Tag: journal.Tag(args[0])}.Normalize()
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			if !confirm {
				sum, err := s.journal.TagSummary(e.ctx, stream)
				if err != nil {
					return err
				}
				if sum.Version == 0 {
					return fmt.Errorf("stream %s has no events, so there is nothing to retire; check the tag and -partition", stream)
				}
				fmt.Fprintf(e.stdout, "stream %s: version %d, cut %d, retired %v\n-confirm would close it for good (every append naming it fails, its versions are never reused) and move versions %d to %d to the archive\n",
					stream, sum.Version, sum.Cut.Version, sum.Retired, sum.Cut.Version+1, sum.Version)
				return nil
			}
			sum, err := s.admin.RetireStream(e.ctx, stream)
			if err != nil {
				return err
			}
			plan, err := s.admin.PlanArchive(e.ctx, pgadmin.RetentionPolicy{Partition: stream.Partition})
			if err != nil {
				return err
			}
			var mine pgadmin.ArchivePlan
			for _, c := range plan.Streams {
				if c.Stream == stream {
					mine.Streams = append(mine.Streams, c)
				}
			}
			bar := &progressBar{w: e.stderr, terminal: isTerminal(e.stderr)}
			prog, err := s.admin.ArchivePlanned(e.ctx, mine, pgadmin.ArchiveOptions{BatchSize: batch, Progress: bar.show})
			bar.clear()
			if err != nil {
				return fmt.Errorf("stream %s is retired (its tombstone is committed), but archiving its events failed: %w; run `scribe archive -confirm` to finish", stream, err)
			}
			fmt.Fprintf(e.stdout, "retired stream %s at version %d: appends to it now fail; %d versions moved to the archive (%d event rows; events shared with other streams stay hot until those retire them too)\n",
				stream, sum.Version, prog.Versions, prog.Events)
			return nil
		},
	}
}
