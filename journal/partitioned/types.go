package partitioned

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/scribe-es/scribe/journal"
)

var _ journal.TypeRegistry = (*Router)(nil)

// typeRegistry returns m's type registry, or an error naming the member
// whose journal has none.
func (m *member) typeRegistry() (journal.TypeRegistry, error) {
	tr, ok := m.Journal.(journal.TypeRegistry)
	if !ok {
		return nil, fmt.Errorf("%w: partitioned: member %q's journal (%T) records no event types (journal.TypeRegistry); use Scribe's memory or Postgres journal", journal.ErrConfiguration, m.Name, m.Journal)
	}
	return tr, nil
}

// RecordTypes implements journal.TypeRegistry: it records on every member,
// in Config.Members' order, so that each database holds the types of the
// builds that may write to it. Each member's recording is atomic, the whole
// is not: a conflict on a member leaves the earlier members' recordings,
// which a later, corrected call finds the same.
func (r *Router) RecordTypes(ctx context.Context, schemas []journal.TypeSchema, build journal.BuildTypes) error {
	for _, m := range r.order {
		tr, err := m.typeRegistry()
		if err != nil {
			return err
		}
		if err := tr.RecordTypes(ctx, schemas, build); err != nil {
			return fmt.Errorf("partitioned: member %q: %w", m.Name, err)
		}
	}
	return nil
}

// RecordedTypes implements journal.TypeRegistry: the union of the members'
// registries (a type version's schema from the first member holding it; a
// build with its earliest first and latest last recording).
func (r *Router) RecordedTypes(ctx context.Context) (journal.RecordedTypes, error) {
	schemas := map[journal.TypeVersion]journal.TypeSchema{}
	builds := map[string]journal.BuildTypes{}
	for _, m := range r.order {
		tr, err := m.typeRegistry()
		if err != nil {
			return journal.RecordedTypes{}, err
		}
		got, err := tr.RecordedTypes(ctx)
		if err != nil {
			return journal.RecordedTypes{}, fmt.Errorf("partitioned: member %q: %w", m.Name, err)
		}
		for _, s := range got.Schemas {
			if _, ok := schemas[s.TypeVersion]; !ok {
				schemas[s.TypeVersion] = s
			}
		}
		for _, b := range got.Builds {
			old, ok := builds[b.Build]
			switch {
			case !ok:
				builds[b.Build] = b
			case b.LastRecordedAt.After(old.LastRecordedAt):
				b.FirstRecordedAt = minTime(b.FirstRecordedAt, old.FirstRecordedAt)
				builds[b.Build] = b
			default:
				old.FirstRecordedAt = minTime(b.FirstRecordedAt, old.FirstRecordedAt)
				builds[b.Build] = old
			}
		}
	}
	var out journal.RecordedTypes
	for _, tv := range slices.SortedFunc(maps.Keys(schemas), journal.CompareTypeVersions) {
		out.Schemas = append(out.Schemas, schemas[tv])
	}
	for _, name := range slices.Sorted(maps.Keys(builds)) {
		out.Builds = append(out.Builds, builds[name])
	}
	return out, nil
}

// StoredVersions implements journal.TypeRegistry: the union over members.
func (r *Router) StoredVersions(ctx context.Context) ([]journal.TypeVersion, error) {
	seen := map[journal.TypeVersion]bool{}
	for _, m := range r.order {
		tr, err := m.typeRegistry()
		if err != nil {
			return nil, err
		}
		got, err := tr.StoredVersions(ctx)
		if err != nil {
			return nil, fmt.Errorf("partitioned: member %q: %w", m.Name, err)
		}
		for _, tv := range got {
			seen[tv] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), journal.CompareTypeVersions), nil
}

// CountStoredVersions implements journal.TypeRegistry: the members' counts
// summed.
func (r *Router) CountStoredVersions(ctx context.Context) ([]journal.StoredVersion, error) {
	counts := map[journal.TypeVersion]uint64{}
	for _, m := range r.order {
		tr, err := m.typeRegistry()
		if err != nil {
			return nil, err
		}
		got, err := tr.CountStoredVersions(ctx)
		if err != nil {
			return nil, fmt.Errorf("partitioned: member %q: %w", m.Name, err)
		}
		for _, s := range got {
			counts[s.TypeVersion] += s.Count
		}
	}
	out := make([]journal.StoredVersion, 0, len(counts))
	for _, tv := range slices.SortedFunc(maps.Keys(counts), journal.CompareTypeVersions) {
		out = append(out, journal.StoredVersion{TypeVersion: tv, Count: counts[tv]})
	}
	return out, nil
}

// minTime returns the earlier of a and b, ignoring a zero time.
func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
