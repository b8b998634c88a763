package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
)

// flagsAfter parses flags given after the first argument ("proof ID
// -checkpoint F") and returns the arguments.
func flagsAfter(fs *flag.FlagSet, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	if err := fs.Parse(args[1:]); err != nil {
		return nil, usagef("%v", err)
	}
	return append([]string{args[0]}, fs.Args()...), nil
}

func proofCommand() *command {
	var checkpoint, tag, pubkey string
	return &command{
		name: "proof",
		args: "EVENT-ID",
		summary: "print (JSON) a proof that one event belongs to a signed checkpoint: the event's canonical bytes, its path to its stream's root, " +
			"the stream's path to the checkpoint's root and the signed statement; check it offline with `scribe verify-proof`",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&checkpoint, "checkpoint", "", "the checkpoint file (required)")
			fs.StringVar(&tag, "tag", "", "the stream to prove the event in (default: its first tag, or its untagged chain)")
			fs.StringVar(&pubkey, "pubkey", "", "also check the checkpoint's signature with this public key file")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error {
			args, err := flagsAfter(fs, args)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return usagef("give exactly one event ID")
			}
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usagef("%q is not an event ID (a UUID such as 0192f0c4-6c2e-7b61-9a0e-3f1c2d4b5a69): %v", args[0], err)
			}
			if checkpoint == "" {
				return usagef("give -checkpoint FILE, the checkpoint to prove the event against")
			}
			c, err := evidence.ReadFile(checkpoint)
			if err != nil {
				return err
			}
			if pubkey != "" {
				pub, err := evidence.ReadPublicKey(pubkey)
				if err != nil {
					return err
				}
				if err := c.Verify(pub); err != nil {
					return fmt.Errorf("checkpoint %s: %w", checkpoint, err)
				}
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
			p, err := evidence.Prove(c, r, journal.Tag(tag))
			if err != nil {
				return err
			}
			if _, err := p.Check(); err != nil {
				return fmt.Errorf("event %s as the journal holds it now is not the event checkpoint %s holds: %w", id, checkpoint, err)
			}
			b, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				return err
			}
			_, err = e.stdout.Write(append(b, '\n'))
			return err
		},
	}
}

func verifyProofCommand() *command {
	var pubkey string
	return &command{
		name: "verify-proof",
		args: "PROOFFILE",
		summary: "check a proof from `scribe proof` offline, without the database, with the signer's public key: " +
			"exit status 0 when the event is in the signed checkpoint, 1 when not",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&pubkey, "pubkey", "", "the public key file of the key that signed the checkpoint (required)")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error {
			args, err := flagsAfter(fs, args)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return usagef("give exactly one proof file (- reads standard input)")
			}
			if pubkey == "" {
				return usagef("give -pubkey FILE, the public key of the checkpoint's signer")
			}
			pub, err := evidence.ReadPublicKey(pubkey)
			if err != nil {
				return err
			}
			var in io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			var p evidence.Proof
			if err := json.NewDecoder(in).Decode(&p); err != nil {
				return fmt.Errorf("%s is not a proof (JSON from `scribe proof`): %w", args[0], err)
			}
			got, err := p.Verify(pub)
			if err != nil {
				if e.opts.json {
					_ = emitJSON(e.stdout, map[string]any{"verified": false, "reason": err.Error()})
				} else {
					fmt.Fprintf(e.stdout, "NOT VERIFIED %s: %v\n", args[0], err)
				}
				return errFailed
			}
			r := got.Record
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"verified": true, "id": r.ID, "type": r.Type, "partition": got.Stream.Partition,
					"tag": got.Stream.Tag, "version": got.Version, "recordedAt": r.RecordedAt, "hash": got.Hash.String(), "checkpoint": got.Checkpoint})
			}
			_, err = fmt.Fprintf(e.stdout, "verified: event %s (type %s, recorded %s) is version %d of %s in the checkpoint made at %s (root %x), signed by key %x\n",
				r.ID, r.Type, r.RecordedAt.Format(timeLayout), got.Version, got.Stream, got.Checkpoint.MadeAt.Format(timeLayout), got.Checkpoint.Root[:], got.Checkpoint.KeyID[:8])
			return err
		},
	}
}
