package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// openProjections opens the schema's projection store.
func (e *env) openProjections() (*store, *postgres.ProjectionStore, error) {
	s, err := e.open()
	if err != nil {
		return nil, nil, err
	}
	st, err := postgres.NewProjectionStore(s.pool, s.cfg)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, st, nil
}

func projectionsStatusCommand() *command {
	return &command{
		name:    "projections status",
		summary: "list every projection version: state, checkpoint, lag behind the feed, lease holder, failure",
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			s, st, err := e.openProjections()
			if err != nil {
				return err
			}
			defer s.Close()
			statuses, err := st.Statuses(e.ctx)
			if err != nil {
				return err
			}
			lags := make([]uint64, len(statuses))
			behind := make([]time.Duration, len(statuses))
			now := time.Now()
			sliced := make([]slicedStatus, len(statuses))
			for i, p := range statuses {
				if sliced[i], err = readSliced(e, st, s.admin, p.Key); err != nil {
					return err
				}
				if sliced[i].slices != nil {
					// A sliced projection's lag is its slices' (its status
					// already sums up their progress).
					lags[i], behind[i] = sliced[i].lag, sliced[i].behind
					continue
				}
				if lags[i], err = s.journal.CountAfter(e.ctx, p.Checkpoint); err != nil {
					return err
				}
				if lags[i] > 0 {
					// The lag in time is the age of the oldest event the
					// projection has not applied yet.
					for r, err := range s.journal.ReadAll(e.ctx, p.Checkpoint, 1) {
						if err != nil {
							return err
						}
						behind[i] = max(0, now.Sub(r.RecordedAt)).Round(time.Millisecond)
					}
				}
			}
			if e.opts.json {
				for i, p := range statuses {
					if err := emitJSON(e.stdout, map[string]any{
						"name": p.Key.Name, "version": p.Key.Version, "state": p.State, "paused": p.Paused, "active": p.Active,
						"checkpoint": p.Checkpoint, "events": p.Events, "lag": lags[i], "lagSeconds": behind[i].Seconds(), "owner": p.Owner, "epoch": p.Epoch,
						"leaseUntil": jsonTime(p.LeaseUntil), "failedAt": p.FailedAt, "error": p.Error, "updatedAt": jsonTime(p.UpdatedAt),
						"readModel": string(p.ReadModel), "slices": sliced[i].json(),
					}); err != nil {
						return err
					}
				}
				return nil
			}
			t := newTable(e.stdout, "NAME", "VERSION", "STATE", "ACTIVE", "CHECKPOINT", "EVENTS", "LAG", "LAG TIME", "OWNER", "LEASE UNTIL", "ERROR")
			for i, p := range statuses {
				owner := p.Owner
				switch {
				case p.Slices > 0:
					owner = fmt.Sprintf("%d runners (sliced)", p.SliceOwners)
				case owner == "":
					owner = "-"
				}
				msg := p.Error
				if msg == "" {
					msg = "-"
				} else if !p.FailedAt.IsZero() {
					msg = fmt.Sprintf("at %s: %s", p.FailedAt, msg)
				}
				state := string(p.State)
				if p.Paused && p.State != projection.StatePaused {
					state += " (paused)" // a failed projection paused by an operator
				}
				t.row(p.Key.Name, p.Key.Version, state, yesNo(p.Active), p.Checkpoint, p.Events, lags[i], behind[i], owner, fmtTime(p.LeaseUntil), msg)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d projection versions; LAG counts the feed's events after each checkpoint, LAG TIME is the age of the oldest of them\n", len(statuses))
			for i, p := range statuses {
				if err := sliced[i].print(e, p.Key); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func projectionsRebuildCommand() *command {
	var version int
	var confirm bool
	return &command{
		name: "projections rebuild",
		args: "NAME",
		summary: "reset a projection's checkpoint to the start of the feed (and clear its failure) so its runner replays every event; " +
			"a rows read model (projection.RowProjection) is emptied in the same transaction, a read model in the service's own tables is not",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&version, "version", 0, "the projection version to rebuild (required; scribe projections status lists them)")
			fs.BoolVar(&confirm, "confirm", false, "confirm the rebuild: the projection's rows are deleted; a read model in the service's own tables must be emptied first or have an idempotent handler")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if len(args) != 1 {
				return usagef("give exactly one projection name, e.g. `scribe projections rebuild -version 2 -confirm accounts`")
			}
			k := projection.Key{Name: args[0], Version: version}
			if err := k.Validate(); err != nil {
				return usagef("%v; give the version with -version (see `scribe projections status`)", err)
			}
			if !confirm {
				return usagef("rebuilding replays every event into %s's read model: scribe empties a rows read model (projection.RowProjection) with the checkpoint, "+
					"but cannot empty the service's own tables (empty them first, make sure the handler is idempotent, or rebuild from the service with projection.Rebuild); then pass -confirm", k)
			}
			s, st, err := e.openProjections()
			if err != nil {
				return err
			}
			defer s.Close()
			before, err := st.Status(e.ctx, k)
			if err != nil {
				return err
			}
			if before.State == projection.StateIdle && before.Checkpoint.IsZero() && before.Events == 0 && before.UpdatedAt.IsZero() {
				return fmt.Errorf("projection %s is unknown to schema %q; list projections with `scribe projections status`", k, s.cfg.Schema)
			}
			rows, err := st.CountRows(e.ctx, k)
			if err != nil {
				return err
			}
			// Reset deletes the projection's rows in its transaction: that
			// empties a rows read model; the service's own tables are out of
			// scribe's reach (their Clear is Go code).
			if err := st.Reset(e.ctx, k, nil); err != nil {
				return err
			}
			cleared := before.ReadModel == projection.ReadModelRows
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"name": k.Name, "version": k.Version, "previousCheckpoint": before.Checkpoint, "previousEvents": before.Events,
					"readModel": string(before.ReadModel), "readModelCleared": cleared, "rowsDeleted": rows})
			}
			fmt.Fprintf(e.stdout, "projection %s reset from checkpoint %s (%d events applied); its runner starts over from the beginning of the feed\n", k, before.Checkpoint, before.Events)
			switch {
			case cleared:
				fmt.Fprintf(e.stdout, "its rows read model was emptied in the same transaction (%d rows deleted): the replay counts every event once\n", rows)
			default:
				fmt.Fprintf(e.stdout, "its read model is %s: scribe did not empty it (%d rows deleted); unless it was emptied or its handler is idempotent the replay counts events twice. "+
					"Rebuild from the service with projection.Rebuild, which runs the projection's Clear in the same transaction\n", readModelName(before.ReadModel), rows)
			}
			return nil
		},
	}
}

// readModelName says what a projection's declared read model is.
func readModelName(k projection.ReadModelKind) string {
	switch k {
	case projection.ReadModelRows:
		return "rows"
	case projection.ReadModelCustom:
		return "the service's own tables"
	}
	return "undeclared (no runner of this version of Scribe has started the projection)"
}

// pauseCommand is `projections pause` (pause true) or `projections resume`.
func pauseCommand(pause bool) *command {
	var version int
	name, summary := "projections resume", "let runners claim a paused projection again; they continue from its checkpoint"
	if pause {
		name, summary = "projections pause", "stop a projection where it is: its runner's lease is fenced and no runner claims it until `projections resume` (checkpoint, read model and dead letters stay)"
	}
	return &command{
		name:    name,
		args:    "NAME",
		summary: summary,
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&version, "version", 0, "the projection version (required; scribe projections status lists them)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if len(args) != 1 {
				return usagef("give exactly one projection name, e.g. `scribe %s -version 2 accounts`", name)
			}
			k := projection.Key{Name: args[0], Version: version}
			if err := k.Validate(); err != nil {
				return usagef("%v; give the version with -version (see `scribe projections status`)", err)
			}
			s, st, err := e.openProjections()
			if err != nil {
				return err
			}
			defer s.Close()
			before, err := st.Status(e.ctx, k)
			if err != nil {
				return err
			}
			if pause {
				err = st.Pause(e.ctx, k)
			} else {
				err = st.Resume(e.ctx, k)
			}
			if err != nil {
				return err
			}
			after, err := st.Status(e.ctx, k)
			if err != nil {
				return err
			}
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"name": k.Name, "version": k.Version, "state": after.State, "paused": after.Paused,
					"wasPaused": before.Paused, "checkpoint": after.Checkpoint})
			}
			fmt.Fprintln(e.stdout, pauseMessage(k, pause, before, after))
			return nil
		},
	}
}

// pauseMessage says what `projections pause` (pause true) or `projections
// resume` did to k, from its status before and after.
func pauseMessage(k projection.Key, pause bool, before, after projection.Status) string {
	from := "continues from " + after.Checkpoint.String()
	if after.Checkpoint.IsZero() && after.Events == 0 {
		from = "starts from the beginning of the feed (nothing is applied: it never ran or was rebuilt)"
	}
	switch {
	case pause && before.Paused:
		return fmt.Sprintf("projection %s was already paused; nothing changed (state %s, checkpoint %s)", k, after.State, after.Checkpoint)
	case pause:
		return fmt.Sprintf("projection %s paused at checkpoint %s (state %s); resume it with `scribe projections resume -version %d %s`", k, after.Checkpoint, after.State, k.Version, k.Name)
	case !before.Paused:
		return fmt.Sprintf("projection %s was not paused; nothing changed (state %s)", k, after.State)
	case after.State == projection.StateFailed:
		return fmt.Sprintf("projection %s resumed but failed at %s (%s): fix the handler or the data, or rebuild it; a runner then %s", k, after.FailedAt, after.Error, from)
	}
	return fmt.Sprintf("projection %s resumed (state %s): no runner holds it yet; a running runner claims it within a quarter of its lease TTL and %s", k, after.State, from)
}
