package journal_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func validEvent() journal.Event {
	return journal.Event{
		ID:   journal.NewEventID(),
		Type: "AccountOpened",
		Tags: []journal.Tag{"account:42"},
		Data: json.RawMessage(`{"owner":"ada"}`),
	}
}

func requireInvalid(t *testing.T, err error, index int, field string, reasonPart string) {
	t.Helper()
	require.ErrorIs(t, err, journal.ErrInvalidEvent)
	var ie *journal.InvalidEventError
	require.True(t, errors.As(err, &ie), "want *InvalidEventError, got %T: %v", err, err)
	require.Equal(t, index, ie.Index, "index: %v", err)
	require.Equal(t, field, ie.Field, "field: %v", err)
	require.Contains(t, ie.Reason, reasonPart)
}

func TestPrepareAppendNormalizes(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("X", 3*3600)
	created := time.Date(2026, 1, 2, 3, 4, 5, 123456789, loc)
	in := []journal.Event{{
		ID:            journal.NewEventID(),
		Type:          "Moved",
		SchemaVersion: 2,
		Tags:          []journal.Tag{"b:2", "a:1", "c"},
		Data:          json.RawMessage("{ \"x\" : [1, 2,\n 3] ,\"y\":{ } }"),
		Metadata:      journal.Metadata{CreatedAt: created, Scopes: []string{}},
	}}
	origTags := append([]journal.Tag(nil), in[0].Tags...)
	origData := append(json.RawMessage(nil), in[0].Data...)

	out, partition, err := journal.PrepareAppend(in, journal.AppendOptions{}, journal.Limits{})
	require.NoError(t, err)
	require.Equal(t, journal.DefaultPartition, partition)
	require.Len(t, out, 1)
	ev := out[0]
	require.Equal(t, []journal.Tag{"a:1", "b:2", "c"}, ev.Tags)
	require.Equal(t, `{"x":[1,2,3],"y":{}}`, string(ev.Data))
	require.Equal(t, journal.DefaultPartition, ev.Metadata.Partition)
	require.Equal(t, time.UTC, ev.Metadata.CreatedAt.Location())
	require.True(t, ev.Metadata.CreatedAt.Equal(created.Truncate(time.Microsecond)))
	require.Equal(t, 123456000, ev.Metadata.CreatedAt.Nanosecond())
	require.Nil(t, ev.Metadata.Scopes)
	require.Equal(t, 2, ev.SchemaVersion)

	// The caller's slices are untouched and not shared.
	require.Equal(t, origTags, in[0].Tags)
	require.Equal(t, origData, in[0].Data)
	require.Equal(t, "", in[0].Metadata.Partition)
	ev.Tags[0] = "zzz"
	ev.Data[1] = 'Q'
	require.Equal(t, origTags, in[0].Tags)
	require.Equal(t, origData, in[0].Data)
}

func TestPrepareAppendAcceptsUntaggedEvents(t *testing.T) {
	t.Parallel()
	for _, tags := range [][]journal.Tag{nil, {}} {
		e := validEvent()
		e.Tags = tags
		out, _, err := journal.PrepareAppend([]journal.Event{validEvent(), e}, journal.AppendOptions{}, journal.Limits{})
		require.NoError(t, err, "an event without tags is valid (tags %#v)", tags)
		require.Empty(t, out[1].Tags)
		require.Equal(t, []journal.Tag{journal.UntaggedChain(e.Type)}, journal.ChainTags(&out[1]), "chained in its type's untagged chain")
		require.Equal(t, out[0].Tags, journal.ChainTags(&out[0]), "a tagged event is chained in its tags' streams")
	}
}

func TestPrepareAppendKeepsExplicitPartitionAndCopiesScopes(t *testing.T) {
	t.Parallel()
	a, b := validEvent(), validEvent()
	a.Metadata.Partition, b.Metadata.Partition = "tenant-1", "tenant-1"
	a.Metadata.Scopes = []string{"read", "write"}
	out, partition, err := journal.PrepareAppend([]journal.Event{a, b}, journal.AppendOptions{
		Leases: []journal.Lease{{Stream: journal.StreamID{Partition: "tenant-1", Tag: "account:42"}, NodeID: "n", Incarnation: 1, Epoch: 1}},
	}, journal.Limits{})
	require.NoError(t, err)
	require.Equal(t, "tenant-1", partition)
	require.Equal(t, "tenant-1", out[1].Metadata.Partition)
	out[0].Metadata.Scopes[0] = "changed"
	require.Equal(t, "read", a.Metadata.Scopes[0])
	require.True(t, out[0].Metadata.CreatedAt.IsZero())
}

func TestPrepareAppendRejects(t *testing.T) {
	t.Parallel()
	type tc struct {
		name   string
		events func() []journal.Event
		opts   journal.AppendOptions
		limits journal.Limits
		index  int
		field  string
		reason string
	}
	one := func(mut func(*journal.Event)) func() []journal.Event {
		return func() []journal.Event {
			e := validEvent()
			mut(&e)
			return []journal.Event{validEvent(), e}
		}
	}
	sharedID := journal.NewEventID()
	cases := []tc{
		{name: "empty list", events: func() []journal.Event { return nil }, index: -1, field: "events", reason: "empty"},
		{name: "nil id", events: one(func(e *journal.Event) { e.ID = uuid.Nil }), index: 1, field: "ID", reason: "NewEventID"},
		{name: "same id twice", events: func() []journal.Event {
			a, b := validEvent(), validEvent()
			a.ID, b.ID = sharedID, sharedID
			return []journal.Event{a, b}
		}, index: 1, field: "ID", reason: sharedID.String()},
		{name: "empty type", events: one(func(e *journal.Event) { e.Type = "" }), index: 1, field: "Type", reason: "empty"},
		{name: "long type", events: one(func(e *journal.Event) { e.Type = strings.Repeat("t", journal.MaxTypeLength+1) }), index: 1, field: "Type", reason: "257 bytes"},
		{name: "type not utf8", events: one(func(e *journal.Event) { e.Type = "a\xffb" }), index: 1, field: "Type", reason: "UTF-8"},
		{name: "negative schema", events: one(func(e *journal.Event) { e.SchemaVersion = -1 }), index: 1, field: "SchemaVersion", reason: "-1"},
		{name: "nil data", events: one(func(e *journal.Event) { e.Data = nil }), index: 1, field: "Data", reason: "empty"},
		{name: "blank data", events: one(func(e *journal.Event) { e.Data = json.RawMessage("  \n") }), index: 1, field: "Data", reason: "empty"},
		{name: "invalid json", events: one(func(e *journal.Event) { e.Data = json.RawMessage(`{"a":`) }), index: 1, field: "Data", reason: "not valid JSON"},
		{name: "trailing garbage", events: one(func(e *journal.Event) { e.Data = json.RawMessage(`{"a":1} {}`) }), index: 1, field: "Data", reason: "not valid JSON"},
		{name: "NaN", events: one(func(e *journal.Event) { e.Data = json.RawMessage(`{"a":NaN}`) }), index: 1, field: "Data", reason: "not valid JSON"},
		{name: "array", events: one(func(e *journal.Event) { e.Data = json.RawMessage(` [1]`) }), index: 1, field: "Data", reason: "array"},
		{name: "scalar", events: one(func(e *journal.Event) { e.Data = json.RawMessage(`42`) }), index: 1, field: "Data", reason: "number"},
		{name: "string", events: one(func(e *journal.Event) { e.Data = json.RawMessage(`"x"`) }), index: 1, field: "Data", reason: "string"},
		{name: "null", events: one(func(e *journal.Event) { e.Data = json.RawMessage(`null`) }), index: 1, field: "Data", reason: "null"},
		{name: "data not utf8", events: one(func(e *journal.Event) { e.Data = json.RawMessage("{\"a\":\"\xff\"}") }), index: 1, field: "Data", reason: "UTF-8"},
		{name: "data too large", events: one(func(e *journal.Event) { e.Data = json.RawMessage(`{"a":"` + strings.Repeat("x", 100) + `"}`) }),
			limits: journal.Limits{MaxDataSize: 64}, index: 1, field: "Data", reason: "108 bytes (compacted), over the limit of 64 bytes"},
		{name: "data over default limit", events: one(func(e *journal.Event) {
			e.Data = json.RawMessage(`{"a":"` + strings.Repeat("x", journal.DefaultMaxDataSize) + `"}`)
		}), index: 1, field: "Data", reason: "over the limit of 1048576 bytes"},
		{name: "reserved tag", events: one(func(e *journal.Event) { e.Tags = []journal.Tag{"a:1", journal.UntaggedChain("X")} }), index: 1, field: "Tags[1]", reason: "reserved for the journal's own chains"},
		{name: "empty tag", events: one(func(e *journal.Event) { e.Tags = []journal.Tag{"a:1", ""} }), index: 1, field: "Tags[1]", reason: "empty"},
		{name: "long tag", events: one(func(e *journal.Event) {
			e.Tags = []journal.Tag{journal.Tag(strings.Repeat("g", journal.MaxTagLength+1))}
		}), index: 1, field: "Tags[0]", reason: "over the limit"},
		{name: "tag with NUL", events: one(func(e *journal.Event) { e.Tags = []journal.Tag{"a:\x00"} }), index: 1, field: "Tags[0]", reason: "NUL"},
		{name: "duplicate tag", events: one(func(e *journal.Event) { e.Tags = []journal.Tag{"b:1", "a:1", "b:1"} }), index: 1, field: "Tags", reason: `"b:1"`},
		{name: "metadata not utf8", events: one(func(e *journal.Event) { e.Metadata.UserID = "\xfe" }), index: 1, field: "Metadata.UserID", reason: "UTF-8"},
		{name: "scope NUL", events: one(func(e *journal.Event) { e.Metadata.Scopes = []string{"ok", "a\x00"} }), index: 1, field: "Metadata.Scopes[1]", reason: "NUL"},
		{name: "long partition", events: func() []journal.Event {
			e := validEvent()
			e.Metadata.Partition = strings.Repeat("p", journal.MaxPartitionLength+1)
			return []journal.Event{e}
		}, index: 0, field: "Metadata.Partition", reason: "over the limit"},
		{name: "mixed partitions", events: one(func(e *journal.Event) { e.Metadata.Partition = "other" }), index: 1, field: "Metadata.Partition", reason: `"other"`},
		{name: "empty expect key", events: one(func(*journal.Event) {}), opts: journal.AppendOptions{Expect: map[journal.Tag]uint64{"": 0}}, index: -1, field: "Expect", reason: "empty tag"},
		{name: "lease without tag", events: one(func(*journal.Event) {}), opts: journal.AppendOptions{Leases: []journal.Lease{{NodeID: "n", Incarnation: 1, Epoch: 1}}}, index: -1, field: "Leases[0]", reason: "empty"},
		{name: "lease in other partition", events: one(func(*journal.Event) {}), opts: journal.AppendOptions{Leases: []journal.Lease{
			{Stream: journal.Stream("account:42"), Epoch: 1},
			{Stream: journal.StreamID{Partition: "t2", Tag: "account:42"}, Epoch: 1},
		}}, index: -1, field: "Leases[1]", reason: `"t2"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := journal.PrepareAppend(c.events(), c.opts, c.limits)
			require.Nil(t, out)
			requireInvalid(t, err, c.index, c.field, c.reason)
		})
	}
}

func TestPrepareAppendLimitBoundaryIsInclusive(t *testing.T) {
	t.Parallel()
	e := validEvent()
	e.Data = json.RawMessage(`{"a": "` + strings.Repeat("x", 56) + `"}`) // 64 bytes compacted
	_, _, err := journal.PrepareAppend([]journal.Event{e}, journal.AppendOptions{}, journal.Limits{MaxDataSize: 64})
	require.NoError(t, err)
}

func TestPrepareAppendRejectsInvalidCondition(t *testing.T) {
	t.Parallel()
	_, _, err := journal.PrepareAppend([]journal.Event{validEvent()}, journal.AppendOptions{
		Condition: &journal.AppendCondition{FailIfEventsMatch: journal.Query{Items: []journal.QueryItem{{}}}},
	}, journal.Limits{})
	require.ErrorIs(t, err, journal.ErrInvalidQuery)
	require.NotErrorIs(t, err, journal.ErrInvalidEvent)
	require.Contains(t, err.Error(), "append condition")

	_, _, err = journal.PrepareAppend([]journal.Event{validEvent()}, journal.AppendOptions{
		Condition: &journal.AppendCondition{FailIfEventsMatch: journal.TagQuery("account:42")},
	}, journal.Limits{})
	require.NoError(t, err)
}
