package main

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// evidenceSource is the Postgres journal as package evidence reads it: the
// journal with its archive, and a listing of every stream (archived whole
// ones included) from the streams table (pgadmin.Admin.ListStreams,
// evidence.StreamLister).
type evidenceSource struct {
	*postgres.Journal
	*pgadmin.Admin
}

func checkpointKeygenCommand() *command {
	var out string
	return &command{
		name: "checkpoint keygen",
		summary: "write a new Ed25519 key pair for signing checkpoints: the private key to -out (mode 0600; keep it away from the database " +
			"and its administrators) and the public key to -out.pub (give it to whoever verifies)",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&out, "out", "", "the private key file to create (required; never overwritten); the public key goes to FILE.pub")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if out == "" {
				return usagef("give -out FILE, the private key file to create")
			}
			pub, err := evidence.GenerateKeyFiles(out)
			if err != nil {
				return err
			}
			id := evidence.KeyID(pub)
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"privateKey": out, "publicKey": out + ".pub", "keyId": fmt.Sprintf("%x", id[:])})
			}
			_, err = fmt.Fprintf(e.stdout, "wrote the private key to %s (mode 0600) and the public key to %s.pub; key ID %x\n", out, out, id[:])
			return err
		},
	}
}

func checkpointCommand() *command {
	var key, out, partition string
	var workers int
	var every time.Duration
	return &command{
		name: "checkpoint",
		summary: "make a signed checkpoint of every chain (each stream's event hashes in a Merkle tree, the streams in one root, signed with -key) " +
			"and write it to a file in -out, once or, with -every, at once and then once per interval until SIGINT/SIGTERM; " +
			"`scribe verify -checkpoints` later names any event changed since, recomputed hashes or not",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&key, "key", "", "the private key file (written by scribe checkpoint keygen; required)")
			fs.StringVar(&out, "out", "", "the directory to write the checkpoint file to (required; created when missing)")
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition)")
			fs.IntVar(&workers, "workers", 4, "streams read at once (each uses one connection at a time)")
			fs.DurationVar(&every, "every", 0, "keep running: a checkpoint at once and then one per interval (such as 10m), each logged, until SIGINT or SIGTERM; "+
				"a failed one is logged and the next interval tries again, and the exit status is 1 if any failed (default: one checkpoint, then exit)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if key == "" || out == "" {
				return usagef("give -key FILE (the signing key) and -out DIR (where the checkpoint goes)")
			}
			if workers < 1 {
				return usagef("-workers %d: give at least 1", workers)
			}
			if every < 0 || (every > 0 && every < time.Second) {
				return usagef("-every %s: give an interval of at least 1s, such as 10m (or leave it out for one checkpoint)", every)
			}
			priv, err := readSigningKey(e, key)
			if err != nil {
				return err
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			pr := progressLine{e: e, verb: "checkpointing", on: isTerminal(e.stderr) && every == 0}
			src := evidenceSource{s.journal, s.admin}
			opts := evidence.MakeOptions{Journal: s.cfg.Schema, Partition: partition, Workers: workers, Progress: pr.show}
			sink := evidence.DirSink{Dir: out}
			if every == 0 {
				res := evidence.MakeSigned(e.ctx, src, priv, sink, opts)
				pr.clear()
				if res.Err != nil {
					return res.Err
				}
				return reportCheckpoint(e, res)
			}
			var written, failed int
			fmt.Fprintf(e.stderr, "scribe checkpoint: writing a checkpoint to %s at once and then every %s; stop with Ctrl-C (SIGINT) or SIGTERM\n", out, every)
			err = evidence.Schedule(e.ctx, src, priv, sink, evidence.ScheduleOptions{Every: every, Make: opts, Done: func(res evidence.Scheduled) {
				if res.Err != nil {
					failed++
					fmt.Fprintf(e.stderr, "scribe checkpoint: %s: %v; trying again in %s\n", fmtTime(time.Now()), res.Err, every)
					return
				}
				written++
				if err := reportCheckpoint(e, res); err != nil {
					failed++
					fmt.Fprintf(e.stderr, "scribe checkpoint: %v\n", err)
				}
			}})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "scribe checkpoint: stopped: %d checkpoint(s) written, %d attempt(s) failed\n", written, failed)
			if failed > 0 {
				return errFailed
			}
			return nil
		},
	}
}

// reportCheckpoint prints what one checkpoint wrote.
func reportCheckpoint(e *env, res evidence.Scheduled) error {
	c := res.Checkpoint
	st, err := os.Stat(res.Name)
	if err != nil {
		return err
	}
	if e.opts.json {
		return emitJSON(e.stdout, map[string]any{"file": res.Name, "bytes": st.Size(), "seconds": res.Took.Seconds(), "checkpoint": c.Signed})
	}
	_, err = fmt.Fprintf(e.stdout, "wrote %s: %d streams, %d events, root %x, key %x, %d bytes, in %s\n",
		res.Name, c.Statement.Streams, c.Events, c.Root[:], c.KeyID[:8], st.Size(), res.Took.Round(time.Millisecond))
	return err
}

// readSigningKey reads the private key file, warning when others may read it.
func readSigningKey(e *env, path string) (ed25519.PrivateKey, error) {
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(e.stderr, "scribe: warning: the key file %s can be read by others (mode %o); chmod 600 it\n", path, st.Mode().Perm())
	}
	return evidence.ReadPrivateKey(path)
}

// progressLine redraws one progress line on a terminal.
type progressLine struct {
	e     *env
	verb  string
	on    bool
	shown time.Time
}

func (p *progressLine) show(pr evidence.Progress) {
	if !p.on || time.Since(p.shown) < progressEvery {
		return
	}
	p.shown = time.Now()
	fmt.Fprintf(p.e.stderr, "\r%s: %d/%d streams (%d%%), %d events", p.verb, pr.StreamsDone, pr.Streams, pr.StreamsDone*100/max(pr.Streams, 1), pr.Events)
}

func (p *progressLine) clear() {
	if p.on && !p.shown.IsZero() {
		fmt.Fprint(p.e.stderr, "\r\033[K")
	}
}
