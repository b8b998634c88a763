package journaltest

import (
	"encoding/json"
	"iter"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

func validationCases() []testCase {
	return []testCase{
		{"RejectsInvalidEvents", testRejectsInvalidEvents},
		{"RejectsEmptyEventList", testRejectsEmptyEventList},
		{"AcceptsValuesAtTheLimits", testAcceptsValuesAtTheLimits},
		{"RejectsNegativeLimits", testRejectsNegativeLimits},
	}
}

// testRejectsNegativeLimits: a negative limit is a malformed read on every
// backend (ErrInvalidQuery), never "everything".
func testRejectsNegativeLimits(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Seed", "s:1"))
	reads := map[string]func() error{
		"ReadStream": func() error { return drain(j.ReadStream(ctx, journal.Stream("s:1"), 1, -1)) },
		"ReadAll":    func() error { return drain(j.ReadAll(ctx, journal.Position{}, -1)) },
		"Read": func() error {
			return drain(j.Read(ctx, journal.Query{All: true}, journal.ReadOptions{Limit: -1}))
		},
	}
	for name, read := range reads {
		require.ErrorIs(t, read(), journal.ErrInvalidQuery, name)
	}
}

// drain reads an iterator to its end and returns its error.
func drain(seq iter.Seq2[journal.Record, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// maxDataSize returns the harness's data limit.
func (h Harness) maxDataSize() int {
	if h.MaxDataSize > 0 {
		return h.MaxDataSize
	}
	return journal.DefaultMaxDataSize
}

// objectOfSize returns a JSON object of exactly n bytes (n ≥ 8).
func objectOfSize(n int) json.RawMessage {
	const frame = len(`{"x":""}`)
	return json.RawMessage(`{"x":"` + strings.Repeat("a", n-frame) + `"}`)
}

func testRejectsInvalidEvents(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Seed", "s:1"))

	with := func(change func(e *journal.Event)) journal.Event {
		e := newEvent("Valid", "t:1")
		change(&e)
		return e
	}
	data := func(s string) journal.Event {
		return with(func(e *journal.Event) { e.Data = json.RawMessage(s) })
	}
	cases := []struct {
		name  string
		event journal.Event
		field string // a word the InvalidEventError's Field must contain
	}{
		{"empty type", with(func(e *journal.Event) { e.Type = "" }), "type"},
		{"type over 256 bytes", with(func(e *journal.Event) { e.Type = strings.Repeat("T", journal.MaxTypeLength+1) }), "type"},
		{"data is an array", data(`[{"a":1}]`), "data"},
		{"data is a number", data(`42`), "data"},
		{"data is a string", data(`"text"`), "data"},
		{"data is null", data(`null`), "data"},
		{"data is a boolean", data(`true`), "data"},
		{"data is invalid JSON", data(`{"a":`), "data"},
		{"data has trailing garbage", data(`{"a":1} x`), "data"},
		{"data holds NaN", data(`{"a":NaN}`), "data"},
		{"data over the limit", with(func(e *journal.Event) { e.Data = objectOfSize(h.maxDataSize() + 1) }), "data"},
		{"empty tag", with(func(e *journal.Event) { e.Tags = []journal.Tag{"t:1", ""} }), "tag"},
		{"duplicate tags", with(func(e *journal.Event) { e.Tags = []journal.Tag{"t:1", "u:1", "t:1"} }), "tag"},
		{"tag over 256 bytes", with(func(e *journal.Event) {
			e.Tags = []journal.Tag{journal.Tag("t:" + strings.Repeat("v", journal.MaxTagLength-1))}
		}), "tag"},
		{"nil ID", with(func(e *journal.Event) { e.ID = uuid.Nil }), "id"},
		// Metadata bounds: the same on every backend (Postgres would otherwise
		// fail on its index row size, memory would accept anything).
		{"correlation ID of 3,200 bytes", with(func(e *journal.Event) { e.Metadata.CorrelationID = strings.Repeat("c", 3200) }), "correlation"},
		{"correlation ID over 256 bytes", with(func(e *journal.Event) {
			e.Metadata.CorrelationID = strings.Repeat("c", journal.MaxMetadataIDLength+1)
		}), "correlation"},
		{"correlation ID with a NUL byte", with(func(e *journal.Event) { e.Metadata.CorrelationID = "a\x00b" }), "correlation"},
		{"correlation ID not UTF-8", with(func(e *journal.Event) { e.Metadata.CorrelationID = "a\xffb" }), "correlation"},
		{"correlation ID with a newline", with(func(e *journal.Event) { e.Metadata.CorrelationID = "a\nb" }), "correlation"},
		{"causation ID over 256 bytes", with(func(e *journal.Event) { e.Metadata.CausationID = strings.Repeat("c", journal.MaxMetadataIDLength+1) }), "causation"},
		{"user ID over 256 bytes", with(func(e *journal.Event) { e.Metadata.UserID = strings.Repeat("u", journal.MaxMetadataIDLength+1) }), "user"},
		{"idempotency key over 256 bytes", with(func(e *journal.Event) { e.Metadata.IdempotencyKey = strings.Repeat("k", journal.MaxMetadataIDLength+1) }), "idempotency"},
		{"traceparent over 55 bytes", with(func(e *journal.Event) { e.Metadata.TraceParent = strings.Repeat("0", journal.MaxTraceParentLength+1) }), "traceparent"},
		{"tracestate over 512 bytes", with(func(e *journal.Event) { e.Metadata.TraceState = strings.Repeat("s", journal.MaxTraceStateLength+1) }), "tracestate"},
		{"too many scopes", with(func(e *journal.Event) { e.Metadata.Scopes = make([]string, journal.MaxScopes+1) }), "scopes"},
		{"scope over 256 bytes", with(func(e *journal.Event) {
			e.Metadata.Scopes = []string{strings.Repeat("s", journal.MaxMetadataIDLength+1)}
		}), "scopes"},
	}
	for _, c := range cases {
		// The invalid event is the second of the append: the valid first one
		// must not be written either.
		valid := newEvent("Valid", "t:1")
		before := captureState(t, ctx, j)
		_, err := j.Append(ctx, []journal.Event{valid, c.event}, journal.AppendOptions{})
		require.Error(t, err, c.name)
		requireInvalidEvent(t, err, 1, c.field)
		requireUnchanged(t, ctx, j, before, c.name)
		requireNotStored(t, ctx, j, valid)
		if c.event.ID != uuid.Nil {
			requireNotStored(t, ctx, j, c.event)
		}

		// Alone, it is event 0.
		_, err = j.Append(ctx, []journal.Event{c.event}, journal.AppendOptions{})
		requireInvalidEvent(t, err, 0, c.field)
		requireUnchanged(t, ctx, j, before, c.name)
	}
}

func testRejectsEmptyEventList(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("Seed", "s:1"))
	for name, events := range map[string][]journal.Event{"nil": nil, "empty": {}} {
		before := captureState(t, ctx, j)
		_, err := j.Append(ctx, events, journal.AppendOptions{})
		require.ErrorIs(t, err, journal.ErrInvalidEvent, "%s event list", name)
		var ie *journal.InvalidEventError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, -1, ie.Index, "the list as a whole is at fault")
		require.NotEmpty(t, ie.Field)
		requireUnchanged(t, ctx, j, before, "empty event list")
	}
}

func testAcceptsValuesAtTheLimits(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	longTag := journal.Tag("t:" + strings.Repeat("v", journal.MaxTagLength-2))
	require.Len(t, string(longTag), journal.MaxTagLength)
	e := newEvent(strings.Repeat("T", journal.MaxTypeLength), longTag)
	e.Data = objectOfSize(h.maxDataSize())
	require.Len(t, e.Data, h.maxDataSize())
	// Metadata at its bounds is stored and indexed (the correlation ID index
	// takes 256 bytes of UTF-8 text, multi-byte characters included).
	e.Metadata.CorrelationID = strings.Repeat("é", journal.MaxMetadataIDLength/2)
	e.Metadata.CausationID = strings.Repeat("c", journal.MaxMetadataIDLength)
	e.Metadata.UserID = strings.Repeat("u", journal.MaxMetadataIDLength)
	e.Metadata.Scopes = make([]string, journal.MaxScopes)
	for i := range e.Metadata.Scopes {
		e.Metadata.Scopes[i] = strings.Repeat("s", journal.MaxMetadataIDLength)
	}
	empty := newEvent("EmptyObject")
	empty.Data = json.RawMessage(`{}`)
	res := mustAppend(t, ctx, j, journal.AppendOptions{}, e, newEvent("NoTags"), empty)
	require.Equal(t, uint64(1), res.Records[0].Version(longTag))

	got, err := j.ReadEvent(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, e.Type, got.Type)
	require.Equal(t, []journal.Tag{longTag}, got.Tags)
	require.JSONEq(t, string(e.Data), string(got.Data))
	require.Equal(t, e.Metadata.CorrelationID, got.Metadata.CorrelationID)
	require.Equal(t, e.Metadata.Scopes, got.Metadata.Scopes)
}
