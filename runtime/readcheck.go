package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// ReadCheck is the outcome of CheckStored: for each stored event type and
// schema version, how many events there are, how many were decoded by this
// build and how many failed.
type ReadCheck struct {
	// Types, sorted by type then version.
	Types []TypeCheck
	// Events and Checked count every event read and decoded; Failed those
	// that did not decode.
	Events, Checked, Failed uint64
}

// TypeCheck is one stored event type and schema version of a ReadCheck.
type TypeCheck struct {
	Type          string
	SchemaVersion int
	// Events stored, Checked (all of them, or the sample), Failed.
	Events, Checked, Failed uint64
	// FirstFailure is the first event of this type and version that did
	// not decode, nil when none failed.
	FirstFailure *ReadFailure
}

// ReadFailure names an event that does not decode and why.
type ReadFailure struct {
	EventID  uuid.UUID
	Position journal.Position
	Err      string
}

// Err is nil when every checked event decoded, else an error naming each
// failing type and version with its first failing event: a deploy gate.
func (c ReadCheck) Err() error {
	if c.Failed == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "runtime: %d of %d stored events do not decode with this build:", c.Failed, c.Checked)
	for _, t := range c.Types {
		if t.FirstFailure != nil {
			fmt.Fprintf(&b, "\n  %s v%d: %d failed, first event %s at %s: %s", t.Type, t.SchemaVersion, t.Failed, t.FirstFailure.EventID, t.FirstFailure.Position, t.FirstFailure.Err)
		}
	}
	b.WriteString("\nregister the missing types, or upcasters for the missing versions (RegisterUpcaster, RegisterEventUpcaster), before deploying")
	return fmt.Errorf("%w: %s", ErrUnknownEvent, b.String())
}

// CheckOption configures CheckStored.
type CheckOption func(*checkOptions)

type checkOptions struct{ sample uint64 }

// SamplePerVersion makes CheckStored decode at most n events of each type
// and schema version (the oldest n: they have travelled through the most
// upcasters), counting the rest; 0 decodes every event.
func SamplePerVersion(n uint64) CheckOption { return func(o *checkOptions) { o.sample = n } }

// CheckStored reads every event of the journal (hot events, every
// partition) and decodes it with this runtime's registrations and
// upcasters, as recovery, State, DCB folds and projections would (an event
// that upcasts to several values or to none, a split or a retired type,
// decodes); it reports
// what does not decode, by type and schema version. Run it before a deploy
// (from a test or a subcommand of the service, against a copy of production
// or production itself, read-only) and gate on ReadCheck.Err. Scribe's own
// records (types starting "scribe.") are skipped. The error is for the read
// itself (the journal could not be read), never for an event that does not
// decode.
func CheckStored(ctx context.Context, rt *Runtime, opts ...CheckOption) (ReadCheck, error) {
	var o checkOptions
	for _, opt := range opts {
		opt(&o)
	}
	type key struct {
		typ     string
		version int
	}
	byKey := map[key]*TypeCheck{}
	var out ReadCheck
	for rec, err := range rt.cfg.Journal.ReadAll(ctx, journal.Position{}, 0) {
		if err != nil {
			return out, fmt.Errorf("runtime: reading the journal to check its events: %w", err)
		}
		if strings.HasPrefix(rec.Type, "scribe.") {
			continue
		}
		k := key{rec.Type, rec.SchemaVersion}
		tc := byKey[k]
		if tc == nil {
			tc = &TypeCheck{Type: rec.Type, SchemaVersion: rec.SchemaVersion}
			byKey[k] = tc
		}
		tc.Events++
		out.Events++
		if o.sample > 0 && tc.Checked >= o.sample {
			continue
		}
		tc.Checked++
		out.Checked++
		if _, err := rt.DecodeValues(ctx, rec); err != nil {
			tc.Failed++
			out.Failed++
			if tc.FirstFailure == nil {
				tc.FirstFailure = &ReadFailure{EventID: rec.ID, Position: rec.Position, Err: err.Error()}
			}
		}
	}
	for _, tc := range byKey {
		out.Types = append(out.Types, *tc)
	}
	slices.SortFunc(out.Types, func(a, b TypeCheck) int {
		if c := strings.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		return a.SchemaVersion - b.SchemaVersion
	})
	return out, nil
}
