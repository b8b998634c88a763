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
			for i, p := range statuses {
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
						"name": p.Key.Name, "version": p.Key.Version, "state": p.State, "active": p.Active,
						"checkpoint": p.Checkpoint, "events": p.Events, "lag": lags[i], "lagSeconds": behind[i].Seconds(), "owner": p.Owner, "epoch": p.Epoch,
						"leaseUntil": jsonTime(p.LeaseUntil), "failedAt": p.FailedAt, "error": p.Error, "updatedAt": jsonTime(p.UpdatedAt),
					}); err != nil {
						return err
					}
				}
				return nil
			}
			t := newTable(e.stdout, "NAME", "VERSION", "STATE", "ACTIVE", "CHECKPOINT", "EVENTS", "LAG", "LAG TIME", "OWNER", "LEASE UNTIL", "ERROR")
			for i, p := range statuses {
				owner := p.Owner
				if owner == "" {
					owner = "-"
				}
				msg := p.Error
				if msg == "" {
					msg = "-"
				} else if !p.FailedAt.IsZero() {
					msg = fmt.Sprintf("at %s: %s", p.FailedAt, msg)
				}
				t.row(p.Key.Name, p.Key.Version, p.State, yesNo(p.Active), p.Checkpoint, p.Events, lags[i], behind[i], owner, fmtTime(p.LeaseUntil), msg)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d projection versions; LAG counts the feed's events after each checkpoint, LAG TIME is the age of the oldest of them\n", len(statuses))
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
			"scribe does not empty the read model",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&version, "version", 0, "the projection version to rebuild (required; scribe projections status lists them)")
			fs.BoolVar(&confirm, "confirm", false, "confirm that the read model was emptied or that the projection's handler is idempotent")
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
				return usagef("rebuilding replays every event into the read model without emptying it (the service's code owns it): empty it first, or make sure %s's handler is idempotent, then pass -confirm", k)
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
			if err := st.Reset(e.ctx, k, nil); err != nil {
				return err
			}
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"name": k.Name, "version": k.Version, "previousCheckpoint": before.Checkpoint, "previousEvents": before.Events})
			}
			fmt.Fprintf(e.stdout, "projection %s reset from checkpoint %s (%d events applied); its runner starts over from the beginning of the feed\n", k, before.Checkpoint, before.Events)
			return nil
		},
	}
}
