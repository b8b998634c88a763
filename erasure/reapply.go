package erasure

import (
	"context"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// ReapplyParams is what ReapplyRecorded needs.
type ReapplyParams struct {
	// Journal holds the erasure records (RecordType). Required.
	Journal journal.Reader
	// KeyStore is brought up to the erasures the journal records: typically
	// one restored from a backup taken before some of them. Required.
	KeyStore KeyStore
	// Snapshots, when set, loses the snapshots of the re-erased subjects'
	// streams (see EraseParams.Snapshots). Optional.
	Snapshots snapshots.Store
	// DryRun reports the subjects that would be erased again and changes
	// nothing. Default false.
	DryRun bool
}

// reapplyBatch is how many subjects one KeyStore.Lookup asks about.
const reapplyBatch = 100

// ReapplyRecorded erases again, in KeyStore, every subject whose erasure
// record is in Journal but whose erasure KeyStore does not know (state
// NotErased): what a key store restored from a backup taken before those
// erasures holds, its keys readable again. For each such subject it runs
// the steps of Erase but the record's (already in the journal):
// BeginErasure (with the record's by; the key is refused from its return
// on, and every runtime drops the subject within its erasure poll
// interval), DestroyKey, the snapshots, CompleteErasure. Subjects the key
// store holds as erased, pending or complete, are left as they are
// (CompletePending finishes pending ones).
//
// It returns the erasures it applied, in record order (with DryRun: the
// ones it would apply, State NotErased, At the record's time). The key
// store dates an applied erasure at its re-apply; the record keeps the
// original time. Running it again finds nothing to do; it is safe to run
// concurrently with Erase, CompletePending and itself, every step being
// idempotent, and a run stopped midway leaves pending erasures that
// CompletePending completes. On an error for one subject it goes on with
// the others and returns the errors joined.
func ReapplyRecorded(ctx context.Context, p ReapplyParams) ([]Erasure, error) {
	if p.Journal == nil || p.KeyStore == nil {
		return nil, errors.New("erasure: ReapplyRecorded needs a Journal and a KeyStore")
	}
	var done []Erasure
	var errs []error
	var batch []RecordData
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		subjects := make([]string, len(batch))
		for i, d := range batch {
			subjects[i] = d.Subject
		}
		look, err := p.KeyStore.Lookup(ctx, subjects)
		if err != nil {
			return fmt.Errorf("erasure: asking the key store about recorded erasures: %w", err)
		}
		for _, d := range batch {
			if _, erased := look.Erased[d.Subject]; erased {
				continue
			}
			if p.DryRun {
				done = append(done, Erasure{Subject: d.Subject, By: d.By, At: d.ErasedAt})
				continue
			}
			e, err := reapply(ctx, p, d)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, e)
		}
		batch = batch[:0]
		return nil
	}
	seen := map[string]bool{}
	for rec, err := range p.Journal.Read(ctx, RecordQuery(), journal.ReadOptions{}) {
		if err != nil {
			return done, errors.Join(append(errs, fmt.Errorf("erasure: reading the journal's erasure records: %w", err))...)
		}
		d, ok, err := ParseRecord(&rec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok || seen[d.Subject] {
			continue
		}
		seen[d.Subject] = true
		batch = append(batch, d)
		if len(batch) == reapplyBatch {
			if err := flush(); err != nil {
				return done, errors.Join(append(errs, err)...)
			}
		}
	}
	if err := flush(); err != nil {
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}

// reapply erases d's subject in the key store, its record being in the
// journal already.
func reapply(ctx context.Context, p ReapplyParams, d RecordData) (Erasure, error) {
	e, err := p.KeyStore.BeginErasure(ctx, d.Subject, d.By)
	if err != nil {
		return Erasure{}, fmt.Errorf("erasure: re-applying the recorded erasure of subject %q: %w", d.Subject, err)
	}
	if e.State == ErasureComplete {
		return e, nil
	}
	done, err := finish(ctx, p.KeyStore, p.Snapshots, e)
	if err != nil {
		return done, fmt.Errorf("erasure: re-applying the recorded erasure of subject %q: %w", d.Subject, err)
	}
	return done, nil
}
