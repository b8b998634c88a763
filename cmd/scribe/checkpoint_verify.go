package main

import (
	"crypto/ed25519"
	"fmt"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
)

// checkpointSet is the checkpoint files of a directory and the key that
// must have signed them.
type checkpointSet struct {
	files []string
	pub   ed25519.PublicKey
}

// readCheckpoints lists dir's checkpoint files and reads the public key;
// each file is read when checked (one in memory at a time).
func readCheckpoints(dir, pubkey string) (*checkpointSet, error) {
	files, err := evidence.ListDir(dir)
	if err != nil {
		return nil, err
	}
	pub, err := evidence.ReadPublicKey(pubkey)
	if err != nil {
		return nil, err
	}
	return &checkpointSet{files: files, pub: pub}, nil
}

// check verifies each checkpoint's signature and tree and compares the
// journal with it, printing a line per checkpoint and per diverged stream.
// It reports whether every checkpoint held; an error only when the
// database could not be read.
func (cs *checkpointSet) check(e *env, src evidence.Source, include func(journal.StreamID) bool, workers int) (bool, error) {
	ok := true
	for _, file := range cs.files {
		c, err := evidence.ReadFile(file)
		if err == nil {
			err = c.Verify(cs.pub)
		}
		if err != nil {
			ok = false
			if e.opts.json {
				if err := emitJSON(e.stdout, map[string]any{"checkpoint": file, "valid": false, "reason": err.Error()}); err != nil {
					return false, err
				}
			} else {
				fmt.Fprintf(e.stdout, "INVALID checkpoint %s: %v\n", file, err)
			}
			continue
		}
		pr := progressLine{e: e, verb: "comparing with " + file, on: isTerminal(e.stderr)}
		divs, err := evidence.Compare(e.ctx, src, c, evidence.CompareOptions{Workers: workers, Include: include, Progress: pr.show})
		pr.clear()
		if err != nil {
			return false, err
		}
		for _, d := range divs {
			ok = false
			if e.opts.json {
				if err := emitJSON(e.stdout, map[string]any{"checkpoint": file, "diverged": true, "partition": d.Stream.Partition, "tag": d.Stream.Tag,
					"version": d.Version, "eventId": d.EventID, "currentEventId": d.CurrentID, "position": d.Position, "reason": d.Reason}); err != nil {
					return false, err
				}
				continue
			}
			fmt.Fprintf(e.stdout, "DIVERGED %s at version %d (event %s) from checkpoint %s: %s\n", d.Stream, d.Version, d.EventID, file, d.Reason)
		}
		if e.opts.json {
			if err := emitJSON(e.stdout, map[string]any{"checkpoint": file, "valid": true, "madeAt": c.MadeAt, "streams": c.Statement.Streams,
				"events": c.Events, "divergedStreams": len(divs)}); err != nil {
				return false, err
			}
			continue
		}
		if len(divs) == 0 {
			fmt.Fprintf(e.stdout, "checkpoint %s (made %s, key %x): signature valid, %d streams, %d events: the journal still holds every event it covers\n",
				file, c.MadeAt.Format(timeLayout), c.KeyID[:8], c.Statement.Streams, c.Events)
		} else {
			fmt.Fprintf(e.stdout, "checkpoint %s (made %s, key %x): signature valid, %d of its %d streams differ from the journal\n",
				file, c.MadeAt.Format(timeLayout), c.KeyID[:8], len(divs), c.Statement.Streams)
		}
	}
	return ok, nil
}
