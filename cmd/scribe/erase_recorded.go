package main

import (
	"cmp"
	"fmt"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/postgres"
)

// eraseRecorded runs `scribe erase -recorded`: erasure.ReapplyRecorded of
// the journal's erasure records onto the key store. Without confirm it lists
// the subjects it would erase, changes nothing and fails when there are any
// (so a script notices a key store behind its journal).
func eraseRecorded(e *env, keys, keysDB string, confirm bool) error {
	s, snaps, err := e.openSnapshots()
	if err != nil {
		return err
	}
	defer s.Close()
	kcfg := e.keyStoreConfig(keys)
	ks, closeKeys, err := e.openKeyStore(s, kcfg, keysDB)
	if err != nil {
		return err
	}
	defer closeKeys()
	schema := cmp.Or(kcfg.Schema, postgres.DefaultKeyStoreSchema)
	done, err := erasure.ReapplyRecorded(e.ctx, erasure.ReapplyParams{Journal: s.journal, KeyStore: ks, Snapshots: snaps, DryRun: !confirm})
	if e.opts.json {
		out := make([]map[string]any, len(done))
		for i, er := range done {
			out[i] = map[string]any{"subject": er.Subject, "by": er.By, "erasedAt": jsonTime(er.At), "state": er.State.String()}
		}
		if jerr := emitJSON(e.stdout, map[string]any{"confirmed": confirm, "keyStore": schema, "erasures": out}); jerr != nil {
			return jerr
		}
	}
	if err != nil {
		return fmt.Errorf("%w; what was erased stays erased: run scribe erase -recorded -confirm again", err)
	}
	if !confirm {
		if len(done) == 0 {
			if !e.opts.json {
				fmt.Fprintf(e.stdout, "the key store (schema %q) knows every erasure the journal (schema %q) records; nothing to do\n", schema, s.cfg.Schema)
			}
			return nil
		}
		if !e.opts.json {
			for _, er := range done {
				fmt.Fprintf(e.stderr, "%s  erased at %s by %q in the journal, not in the key store\n", er.Subject, fmtTime(er.At), er.By)
			}
			fmt.Fprintf(e.stderr, "scribe erase: not erasing without -confirm. The key store (schema %q) does not know %d erasure(s) the journal records: "+
				"their subjects' data is readable again (a key store restored from an older backup?). With -confirm each is erased again: key refused at once, "+
				"destroyed, snapshots deleted, complete; running services drop the subjects within a second.\n", schema, len(done))
		}
		return errFailed
	}
	if !e.opts.json {
		for _, er := range done {
			fmt.Fprintf(e.stdout, "subject %q erased again (recorded in the journal, unknown to the key store): key destroyed, snapshots deleted; complete\n", er.Subject)
		}
		fmt.Fprintf(e.stdout, "%d recorded erasure(s) applied to the key store (schema %q)\n", len(done), schema)
	}
	return nil
}
