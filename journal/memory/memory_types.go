package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/scribe-es/scribe/journal"
)

var _ journal.TypeRegistry = (*Journal)(nil)

// memTypes is the journal's type registry, guarded by Journal.mu.
type memTypes struct {
	schemas map[journal.TypeVersion]journal.TypeSchema
	builds  map[string]journal.BuildTypes
}

// RecordTypes implements journal.TypeRegistry.
func (m *Journal) RecordTypes(ctx context.Context, schemas []journal.TypeSchema, build journal.BuildTypes) error {
	if build.Build == "" {
		return fmt.Errorf("%w: memory: RecordTypes needs BuildTypes.Build; name the build", journal.ErrInvalidEvent)
	}
	canon := make([]journal.TypeSchema, len(schemas))
	for i, s := range schemas {
		c, err := canonicalSchema(s)
		if err != nil {
			return err
		}
		canon[i] = c
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.types.schemas == nil {
		m.types = memTypes{schemas: map[journal.TypeVersion]journal.TypeSchema{}, builds: map[string]journal.BuildTypes{}}
	}
	for _, s := range canon {
		if old, ok := m.types.schemas[s.TypeVersion]; ok && string(old.Schema) != string(s.Schema) {
			return &journal.TypeConflictError{TypeVersion: s.TypeVersion, Recorded: slices.Clone(old.Schema), Given: slices.Clone(s.Schema)}
		}
	}
	now := m.now()
	for _, s := range canon {
		if _, ok := m.types.schemas[s.TypeVersion]; !ok {
			s.RecordedAt = now
			m.types.schemas[s.TypeVersion] = s
		}
	}
	b := journal.BuildTypes{
		Build: build.Build, Node: build.Node,
		Writes: sortedTypeVersions(build.Writes), Reads: sortedTypeVersions(build.Reads),
		FirstRecordedAt: now, LastRecordedAt: now,
	}
	if old, ok := m.types.builds[b.Build]; ok {
		b.FirstRecordedAt = old.FirstRecordedAt
	}
	m.types.builds[b.Build] = b
	return nil
}

// canonicalSchema checks that s names a type version and holds a JSON
// object, and compacts the object with its keys sorted.
func canonicalSchema(s journal.TypeSchema) (journal.TypeSchema, error) {
	if s.Type == "" || s.Version < 1 {
		return s, fmt.Errorf("%w: memory: a recorded schema needs a type and a version ≥ 1 (got %q v%d)", journal.ErrInvalidEvent, s.Type, s.Version)
	}
	var obj map[string]any
	if err := json.Unmarshal(s.Schema, &obj); err != nil || obj == nil {
		return s, fmt.Errorf("%w: memory: the schema of %s is not a JSON object; give a JSON Schema document", journal.ErrInvalidEvent, s.TypeVersion)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return s, fmt.Errorf("%w: memory: the schema of %s: %v", journal.ErrInvalidEvent, s.TypeVersion, err)
	}
	return journal.TypeSchema{TypeVersion: s.TypeVersion, Schema: b}, nil
}

func sortedTypeVersions(in []journal.TypeVersion) []journal.TypeVersion {
	out := slices.Clone(in)
	slices.SortFunc(out, journal.CompareTypeVersions)
	return slices.Compact(out)
}

// RecordedTypes implements journal.TypeRegistry.
func (m *Journal) RecordedTypes(ctx context.Context) (journal.RecordedTypes, error) {
	if err := m.lock(ctx); err != nil {
		return journal.RecordedTypes{}, err
	}
	defer m.mu.Unlock()
	var out journal.RecordedTypes
	for _, tv := range slices.SortedFunc(maps.Keys(m.types.schemas), journal.CompareTypeVersions) {
		s := m.types.schemas[tv]
		s.Schema = slices.Clone(s.Schema)
		out.Schemas = append(out.Schemas, s)
	}
	for _, name := range slices.Sorted(maps.Keys(m.types.builds)) {
		b := m.types.builds[name]
		b.Writes, b.Reads = slices.Clone(b.Writes), slices.Clone(b.Reads)
		out.Builds = append(out.Builds, b)
	}
	return out, nil
}

// StoredVersions implements journal.TypeRegistry (a scan of the records).
func (m *Journal) StoredVersions(ctx context.Context) ([]journal.TypeVersion, error) {
	counts, err := m.CountStoredVersions(ctx)
	out := make([]journal.TypeVersion, len(counts))
	for i, c := range counts {
		out[i] = c.TypeVersion
	}
	return out, err
}

// CountStoredVersions implements journal.TypeRegistry.
func (m *Journal) CountStoredVersions(ctx context.Context) ([]journal.StoredVersion, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	counts := map[journal.TypeVersion]uint64{}
	for ty, l := range m.byType {
		for _, idx := range l {
			counts[journal.TypeVersion{Type: ty, Version: m.records.at(idx).SchemaVersion}]++
		}
	}
	out := make([]journal.StoredVersion, 0, len(counts))
	for tv, n := range counts {
		out = append(out, journal.StoredVersion{TypeVersion: tv, Count: n})
	}
	slices.SortFunc(out, func(a, b journal.StoredVersion) int { return journal.CompareTypeVersions(a.TypeVersion, b.TypeVersion) })
	return out, nil
}
