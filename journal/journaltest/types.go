package journaltest

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// typeCases test journal.TypeRegistry; a journal without it skips them.
func typeCases() []testCase {
	return []testCase{
		{"RecordTypes", testRecordTypes},
		{"RecordTypesConflict", testRecordTypesConflict},
		{"RecordTypesRace", testRecordTypesRace},
		{"StoredVersions", testStoredVersions},
	}
}

func typeRegistry(t *testing.T, h Harness) journal.TypeRegistry {
	t.Helper()
	tr, ok := h.Journal.(journal.TypeRegistry)
	if !ok {
		t.Skipf("%T does not implement journal.TypeRegistry", h.Journal)
	}
	return tr
}

func schemaOf(tv journal.TypeVersion, doc string) journal.TypeSchema {
	return journal.TypeSchema{TypeVersion: tv, Schema: json.RawMessage(doc)}
}

// Recording is idempotent, a schema equal as JSON (other key order and
// spacing) is the same schema, and a build's row is replaced, keeping its
// first recording time.
func testRecordTypes(t *testing.T, h Harness) {
	ctx := testContext(t)
	tr := typeRegistry(t, h)
	empty, err := tr.RecordedTypes(ctx)
	require.NoError(t, err)
	require.Empty(t, empty.Schemas)
	require.Empty(t, empty.Builds)

	a1 := journal.TypeVersion{Type: "Opened", Version: 1}
	b2 := journal.TypeVersion{Type: "Deposited", Version: 2}
	schemas := []journal.TypeSchema{
		schemaOf(a1, `{"type":"object","properties":{"id":{"type":"string"}}}`),
		schemaOf(b2, `{"type":"object","required":["amount"]}`),
	}
	build := journal.BuildTypes{Build: "b1", Node: "n1", Writes: []journal.TypeVersion{a1, b2}, Reads: []journal.TypeVersion{b2, a1, {Type: "Deposited", Version: 1}}}
	require.NoError(t, tr.RecordTypes(ctx, schemas, build))
	got, err := tr.RecordedTypes(ctx)
	require.NoError(t, err)
	require.Len(t, got.Schemas, 2)
	require.Equal(t, b2, got.Schemas[0].TypeVersion, "ordered by type, then version")
	require.Equal(t, a1, got.Schemas[1].TypeVersion)
	require.True(t, journal.SameSchema(schemas[1].Schema, got.Schemas[0].Schema), string(got.Schemas[0].Schema))
	require.False(t, got.Schemas[0].RecordedAt.IsZero())
	require.Len(t, got.Builds, 1)
	first := got.Builds[0]
	require.Equal(t, "b1", first.Build)
	require.Equal(t, "n1", first.Node)
	require.Equal(t, []journal.TypeVersion{b2, a1}, first.Writes, "sorted")
	require.Equal(t, []journal.TypeVersion{{Type: "Deposited", Version: 1}, b2, a1}, first.Reads, "sorted")

	// Again, from another node, the schema written differently.
	again := []journal.TypeSchema{schemaOf(a1, `{ "properties": {"id": {"type": "string"}}, "type": "object" }`)}
	build.Node = "n2"
	require.NoError(t, tr.RecordTypes(ctx, again, build))
	got, err = tr.RecordedTypes(ctx)
	require.NoError(t, err)
	require.Len(t, got.Schemas, 2)
	require.Len(t, got.Builds, 1)
	require.Equal(t, "n2", got.Builds[0].Node)
	require.Equal(t, first.FirstRecordedAt, got.Builds[0].FirstRecordedAt)
	require.False(t, got.Builds[0].LastRecordedAt.Before(first.LastRecordedAt))

	require.ErrorIs(t, tr.RecordTypes(ctx, schemas, journal.BuildTypes{}), journal.ErrInvalidEvent, "a build without a name")
	require.ErrorIs(t, tr.RecordTypes(ctx, []journal.TypeSchema{schemaOf(a1, `[1]`)}, build), journal.ErrInvalidEvent, "a schema that is no object")
}

// A type version recorded with another schema refuses the whole call:
// nothing of it is recorded.
func testRecordTypesConflict(t *testing.T, h Harness) {
	ctx := testContext(t)
	tr := typeRegistry(t, h)
	a1 := journal.TypeVersion{Type: "Opened", Version: 1}
	require.NoError(t, tr.RecordTypes(ctx, []journal.TypeSchema{schemaOf(a1, `{"type":"object"}`)}, journal.BuildTypes{Build: "old"}))
	c1 := journal.TypeVersion{Type: "Closed", Version: 1}
	err := tr.RecordTypes(ctx, []journal.TypeSchema{
		schemaOf(c1, `{"type":"object"}`),
		schemaOf(a1, `{"type":"object","required":["id"]}`),
	}, journal.BuildTypes{Build: "new"})
	require.ErrorIs(t, err, journal.ErrTypeConflict)
	var conflict *journal.TypeConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, a1, conflict.TypeVersion)
	require.True(t, journal.SameSchema(json.RawMessage(`{"type":"object"}`), conflict.Recorded))
	require.Contains(t, err.Error(), `"Opened" version 1`)
	got, err := tr.RecordedTypes(ctx)
	require.NoError(t, err)
	require.Len(t, got.Schemas, 1, "Closed was not recorded")
	require.Len(t, got.Builds, 1, "the refused build was not recorded")
	require.Equal(t, "old", got.Builds[0].Build)
}

// Two builds recording one type version with different schemas at once:
// exactly one wins, the other gets the conflict.
func testRecordTypesRace(t *testing.T, h Harness) {
	ctx := testContext(t)
	tr := typeRegistry(t, h)
	tv := journal.TypeVersion{Type: "Raced", Version: 1}
	docs := []string{`{"type":"object","title":"a"}`, `{"type":"object","title":"b"}`}
	errs := make([]error, len(docs))
	var wg sync.WaitGroup
	for i, doc := range docs {
		wg.Go(func() {
			errs[i] = tr.RecordTypes(ctx, []journal.TypeSchema{schemaOf(tv, doc)}, journal.BuildTypes{Build: doc})
		})
	}
	wg.Wait()
	conflicts := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, journal.ErrTypeConflict)
			conflicts++
		}
	}
	require.Equal(t, 1, conflicts, "%v", errs)
	got, err := tr.RecordedTypes(ctx)
	require.NoError(t, err)
	require.Len(t, got.Schemas, 1)
	require.Len(t, got.Builds, 1)
	require.True(t, journal.SameSchema(json.RawMessage(got.Builds[0].Build), got.Schemas[0].Schema), "the winner's schema is the recorded one")
}

// StoredVersions and CountStoredVersions see every stored type version,
// in every partition.
func testStoredVersions(t *testing.T, h Harness) {
	ctx := testContext(t)
	tr := typeRegistry(t, h)
	none, err := tr.StoredVersions(ctx)
	require.NoError(t, err)
	require.Empty(t, none)
	at := func(typ string, v int, tags ...journal.Tag) journal.Event {
		e := newEvent(typ, tags...)
		e.SchemaVersion = v
		return e
	}
	appendEach(t, ctx, h.Journal, at("B", 2, "b:1"), at("A", 1), at("B", 1, "b:1"), at("B", 2, "b:2"), inPartition(at("A", 3, "a:1"), "tenant-b"))
	got, err := tr.StoredVersions(ctx)
	require.NoError(t, err)
	require.Equal(t, []journal.TypeVersion{{Type: "A", Version: 1}, {Type: "A", Version: 3}, {Type: "B", Version: 1}, {Type: "B", Version: 2}}, got)
	counts, err := tr.CountStoredVersions(ctx)
	require.NoError(t, err)
	require.Equal(t, []journal.StoredVersion{
		{TypeVersion: journal.TypeVersion{Type: "A", Version: 1}, Count: 1},
		{TypeVersion: journal.TypeVersion{Type: "A", Version: 3}, Count: 1},
		{TypeVersion: journal.TypeVersion{Type: "B", Version: 1}, Count: 1},
		{TypeVersion: journal.TypeVersion{Type: "B", Version: 2}, Count: 2},
	}, counts)
}
