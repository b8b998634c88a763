package main

import (
	"flag"
	"fmt"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// deadLetterKeys returns the projection versions that name and version
// select: every version the store knows when name is "", every version of
// name when version is 0.
func deadLetterKeys(e *env, st *postgres.ProjectionStore, name string, version int) ([]projection.Key, error) {
	if name != "" && version != 0 {
		k := projection.Key{Name: name, Version: version}
		if err := k.Validate(); err != nil {
			return nil, usagef("%v", err)
		}
		return []projection.Key{k}, nil
	}
	if name == "" && version != 0 {
		return nil, usagef("-version needs -name")
	}
	statuses, err := st.Statuses(e.ctx)
	if err != nil {
		return nil, err
	}
	var keys []projection.Key
	for _, s := range statuses {
		if name == "" || s.Key.Name == name {
			keys = append(keys, s.Key)
		}
	}
	return keys, nil
}

func deadLetterFlags(fs *flag.FlagSet, name *string, version *int) {
	fs.StringVar(name, "name", "", "only this projection or publisher (default: all)")
	fs.IntVar(version, "version", 0, "only this version of -name (default: all its versions)")
}

func deadLettersListCommand() *command {
	var name string
	var version int
	return &command{
		name:    "projections dead-letters list",
		summary: "list the events publishers (or handlers) gave up on, in position order, with their error and whether a replay is requested",
		flags:   func(fs *flag.FlagSet) { deadLetterFlags(fs, &name, &version) },
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			s, st, err := e.openProjections()
			if err != nil {
				return err
			}
			defer s.Close()
			keys, err := deadLetterKeys(e, st, name, version)
			if err != nil {
				return err
			}
			var t *table
			if !e.opts.json {
				t = newTable(e.stdout, "NAME", "VERSION", "POSITION", "EVENT", "TYPE", "ATTEMPTS", "AT", "REPLAY REQUESTED", "ERROR")
			}
			n := 0
			for _, k := range keys {
				letters, err := st.DeadLetters(e.ctx, k)
				if err != nil {
					return err
				}
				for _, d := range letters {
					n++
					if e.opts.json {
						if err := emitJSON(e.stdout, map[string]any{
							"name": k.Name, "version": k.Version, "position": d.Record.Position, "eventId": d.Record.ID.String(),
							"type": d.Record.Type, "attempts": d.Attempts, "at": jsonTime(d.At), "replayRequestedAt": jsonTime(d.ReplayRequestedAt), "error": d.Error,
						}); err != nil {
							return err
						}
						continue
					}
					t.row(k.Name, k.Version, d.Record.Position, d.Record.ID, d.Record.Type, d.Attempts, fmtTime(d.At), fmtTime(d.ReplayRequestedAt), d.Error)
				}
			}
			if e.opts.json {
				return nil
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d dead letters; replay them with `scribe projections dead-letters replay -confirm`\n", n)
			return nil
		},
	}
}

func deadLettersReplayCommand() *command {
	var name string
	var version int
	var confirm bool
	return &command{
		name: "projections dead-letters replay",
		summary: "ask the running publisher (or runner) of each selected projection to replay its dead letters: it offers each to its sink " +
			"(or Projection.Replay) again, removes the ones that succeed and keeps the others with the new error",
		flags: func(fs *flag.FlagSet) {
			deadLetterFlags(fs, &name, &version)
			fs.BoolVar(&confirm, "confirm", false, "confirm that the events may be delivered again, after the events that followed them")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if !confirm {
				return usagef("a replay delivers the dead letters again, after the events that followed them: make sure their receiver accepts that and the cause of the failure is fixed, then pass -confirm")
			}
			s, st, err := e.openProjections()
			if err != nil {
				return err
			}
			defer s.Close()
			keys, err := deadLetterKeys(e, st, name, version)
			if err != nil {
				return err
			}
			total := 0
			for _, k := range keys {
				n, err := st.RequestReplay(e.ctx, k)
				if err != nil {
					return err
				}
				if n == 0 {
					continue
				}
				total += n
				status, err := st.Status(e.ctx, k)
				if err != nil {
					return err
				}
				if e.opts.json {
					if err := emitJSON(e.stdout, map[string]any{"name": k.Name, "version": k.Version, "requested": n, "state": status.State, "owner": status.Owner}); err != nil {
						return err
					}
					continue
				}
				switch status.State {
				case projection.StateRunning:
					fmt.Fprintf(e.stdout, "%s: replay of %d dead letters requested; its runner %s replays them within its ReplayInterval (default 5s)\n", k, n, status.Owner)
				default:
					fmt.Fprintf(e.stdout, "%s: replay of %d dead letters requested; no runner holds its lease now (state %s): the replay happens when one runs\n", k, n, status.State)
				}
			}
			if !e.opts.json {
				fmt.Fprintf(e.stdout, "%d dead letters marked for replay; a letter that fails again stays, with the new error: see `scribe projections dead-letters list`\n", total)
			}
			return nil
		},
	}
}
