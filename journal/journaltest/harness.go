package journaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
)

// Harness is what a backend gives the suite for one test: a fresh, empty
// journal and, optionally, hooks that reach below the journal's API.
type Harness struct {
	// Journal is the journal under test. Required.
	Journal journal.Journal
	// Sessions grants and fences leases on Journal's streams. nil skips the
	// session cases.
	Sessions journal.Sessions
	// MaxDataSize is the data limit the journal was configured with, in bytes;
	// 0 means journal.DefaultMaxDataSize.
	MaxDataSize int
	// Alter, optional (nil skips the alteration cases), changes one field of
	// the stored event id (see Alteration), bypassing the journal's API and
	// without fixing any hash.
	Alter func(ctx context.Context, id uuid.UUID, what Alteration) error
	// Remove, optional (nil skips the removal and truncation cases), deletes
	// the stored event id, bypassing the journal's API: its streams' recorded
	// versions and head hashes stay as they were, as after a DELETE of its row.
	Remove func(ctx context.Context, id uuid.UUID) error
	// Swap, optional (nil skips the re-ordering case), exchanges the stored
	// places of the events at versions v and w of stream, bypassing the
	// journal's API: ReadStream then yields them in the other order.
	Swap func(ctx context.Context, stream journal.StreamID, v, w uint64) error
	// HoldCommit, optional, is for backends where an append with a lower
	// position can commit after appends with higher positions. It starts an
	// append of events whose position is assigned, and returns while that
	// append is still uncommitted; release commits it and returns its result.
	// nil skips the forced-interleaving part of the visibility case (the rest
	// of that case still runs).
	HoldCommit func(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (release func() (journal.AppendResult, error), err error)
	// Peer, optional (nil skips the Peer cases), is a second journal on the
	// same store, as another process would open it: what one of them appends
	// the other must read and be fenced by, whatever it remembers of its own
	// earlier appends.
	Peer journal.Journal
}

// Alteration names the field of a stored event that Harness.Alter changes.
type Alteration string

// The alterations the suite asks for; each must leave the event readable.
const (
	AlterData       Alteration = "data"       // the payload, still a JSON object
	AlterType       Alteration = "type"       // the event type, to another non-empty type
	AlterMetadata   Alteration = "metadata"   // the correlation ID
	AlterRecordedAt Alteration = "recordedAt" // the recorded time, by at least a microsecond
)

// Alterations lists every Alteration, for backends that test them in a loop.
func Alterations() []Alteration {
	return []Alteration{AlterData, AlterType, AlterMetadata, AlterRecordedAt}
}

// Run runs the whole conformance suite. newHarness is called once per case,
// from that case's own subtest, and must return a fresh, empty journal; it
// registers its own cleanup with t.Cleanup. Cases run in parallel.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"DCB", dcbCases()},
		{"Stream", streamCases()},
		{"Partition", partitionCases()},
		{"Idempotency", idempotencyCases()},
		{"Validation", validationCases()},
		{"Subscribe", subscribeCases()},
		{"Race", raceCases()},
		{"Sessions", sessionCases()},
		{"HashChain", hashChainCases()},
		{"Summary", summaryCases()},
		{"Peer", peerCases()},
		{"Types", typeCases()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					h := newHarness(t)
					require.NotNil(t, h.Journal, "Harness.Journal is required")
					c.run(t, h)
				})
			}
		})
	}
}

// testCase is one named conformance case.
type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

// caseTimeout bounds every case, so a backend that blocks fails instead of
// hanging the suite.
const caseTimeout = 30 * time.Second

// testContext returns a context that ends with the test or after caseTimeout.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newEvent returns a valid event of type typ carrying tags, in the default
// partition, with a fresh ID.
func newEvent(typ string, tags ...journal.Tag) journal.Event {
	return journal.Event{
		ID:            journal.NewEventID(),
		Type:          typ,
		SchemaVersion: 1,
		Tags:          tags,
		Data:          json.RawMessage(fmt.Sprintf(`{"type":%q,"tags":%d}`, typ, len(tags))),
	}
}

// inPartition returns e moved to partition p.
func inPartition(e journal.Event, p string) journal.Event {
	e.Metadata.Partition = p
	return e
}

// mustAppend appends events and fails the test on any error.
func mustAppend(t *testing.T, ctx context.Context, j journal.Journal, opts journal.AppendOptions, events ...journal.Event) journal.AppendResult {
	t.Helper()
	res, err := j.Append(ctx, events, opts)
	require.NoError(t, err, "append of %d event(s)", len(events))
	require.False(t, res.Duplicate, "a first append must not be marked Duplicate")
	require.Len(t, res.Records, len(events), "one record per appended event")
	for i, r := range res.Records {
		require.Equal(t, events[i].ID, r.ID, "records come back in append order")
		require.False(t, r.Position.IsZero(), "a stored record has a position")
		if i > 0 {
			require.True(t, res.Records[i-1].Position.Before(r.Position), "positions increase within an append")
		}
	}
	return res
}

// appendEach appends every event in its own call and returns the records in order.
func appendEach(t *testing.T, ctx context.Context, j journal.Journal, events ...journal.Event) []journal.Record {
	t.Helper()
	out := make([]journal.Record, 0, len(events))
	for _, e := range events {
		out = append(out, mustAppend(t, ctx, j, journal.AppendOptions{}, e).Records...)
	}
	return out
}

// collect drains seq and fails the test on an error.
func collect(t *testing.T, seq iter.Seq2[journal.Record, error]) []journal.Record {
	t.Helper()
	recs, err := collectErr(seq)
	require.NoError(t, err)
	return recs
}

// collectErr drains seq, returning the records yielded before the first error.
func collectErr(seq iter.Seq2[journal.Record, error]) ([]journal.Record, error) {
	var out []journal.Record
	for r, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ids returns the event IDs of recs, in order (nil when there are none, like
// eventIDs and recordIDs, so empty results compare equal).
func ids(recs []journal.Record) []uuid.UUID {
	if len(recs) == 0 {
		return nil
	}
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// eventIDs returns the IDs of events, in order.
func eventIDs(events ...journal.Event) []uuid.UUID {
	if len(events) == 0 {
		return nil
	}
	out := make([]uuid.UUID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// recordIDs returns the IDs of recs picked by index.
func recordIDs(recs []journal.Record, idx ...int) []uuid.UUID {
	if len(idx) == 0 {
		return nil
	}
	out := make([]uuid.UUID, len(idx))
	for i, k := range idx {
		out[i] = recs[k].ID
	}
	return out
}

// reversed returns a reversed copy of s.
func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// requireAscending fails unless recs are in strictly ascending position order.
func requireAscending(t *testing.T, recs []journal.Record) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		require.True(t, recs[i-1].Position.Before(recs[i].Position),
			"positions must strictly increase: %s then %s", recs[i-1].Position, recs[i].Position)
	}
}

// requireDescending fails unless recs are in strictly descending position order.
func requireDescending(t *testing.T, recs []journal.Record) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		require.True(t, recs[i-1].Position.After(recs[i].Position),
			"backwards positions must strictly decrease: %s then %s", recs[i-1].Position, recs[i].Position)
	}
}

// justAfter returns the smallest position that sorts after p: using it as an
// inclusive From reads everything after p.
func justAfter(p journal.Position) journal.Position {
	return journal.Position{Commit: p.Commit, Seq: p.Seq + 1}
}

// farBeyond returns a position after p and after every position a backend
// could assign during the test.
func farBeyond(p journal.Position) journal.Position {
	return journal.Position{Commit: p.Commit + 1<<40, Seq: p.Seq + 1<<40}
}

// head returns the journal's head.
func head(t *testing.T, ctx context.Context, j journal.Journal) journal.Position {
	t.Helper()
	p, err := j.Head(ctx)
	require.NoError(t, err)
	return p
}

// count returns the number of events in the journal.
func count(t *testing.T, ctx context.Context, j journal.Journal) uint64 {
	t.Helper()
	n, err := j.CountAfter(ctx, journal.Position{})
	require.NoError(t, err)
	return n
}

// snapshotState captures what a rejected append must leave untouched.
type snapshotState struct {
	head  journal.Position
	count uint64
	all   []uuid.UUID
}

func captureState(t *testing.T, ctx context.Context, j journal.Journal) snapshotState {
	t.Helper()
	return snapshotState{
		head:  head(t, ctx, j),
		count: count(t, ctx, j),
		all:   ids(collect(t, j.ReadAll(ctx, journal.Position{}, 0))),
	}
}

// requireUnchanged fails unless the journal still is as captured in before.
func requireUnchanged(t *testing.T, ctx context.Context, j journal.Journal, before snapshotState, msg string) {
	t.Helper()
	after := captureState(t, ctx, j)
	require.Equal(t, before.head, after.head, "%s: Head must not move", msg)
	require.Equal(t, before.count, after.count, "%s: the event count must not change", msg)
	require.Equal(t, before.all, after.all, "%s: nothing may be written", msg)
}

// requireNotStored fails unless none of events is stored.
func requireNotStored(t *testing.T, ctx context.Context, j journal.Journal, events ...journal.Event) {
	t.Helper()
	for _, e := range events {
		_, err := j.ReadEvent(ctx, e.ID)
		require.ErrorIs(t, err, journal.ErrNotFound, "event %s must not be stored", e.ID)
	}
}

// requireSameRecord compares two records of the same stored event field by
// field: times with Equal, data as JSON.
func requireSameRecord(t *testing.T, want, got journal.Record) {
	t.Helper()
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.Type, got.Type)
	require.Equal(t, want.SchemaVersion, got.SchemaVersion)
	require.Equal(t, want.Tags, got.Tags)
	require.JSONEq(t, string(want.Data), string(got.Data))
	requireSameMetadata(t, want.Metadata, got.Metadata)
	require.Equal(t, want.Position, got.Position)
	require.True(t, want.RecordedAt.Equal(got.RecordedAt), "RecordedAt %s vs %s", want.RecordedAt, got.RecordedAt)
	require.Equal(t, want.Links, got.Links)
}

// requireSameMetadata compares metadata field by field, CreatedAt with Equal.
func requireSameMetadata(t *testing.T, want, got journal.Metadata) {
	t.Helper()
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "CreatedAt %s vs %s", want.CreatedAt, got.CreatedAt)
	want.CreatedAt, got.CreatedAt = time.Time{}, time.Time{}
	if len(want.Scopes) == 0 && len(got.Scopes) == 0 {
		want.Scopes, got.Scopes = nil, nil
	}
	require.Equal(t, want, got)
}

// requireInvalidEvent fails unless err is ErrInvalidEvent detailed by an
// *InvalidEventError that names a field containing fieldWord
// (case-insensitive) and has the given event index.
func requireInvalidEvent(t *testing.T, err error, index int, fieldWord string) {
	t.Helper()
	require.ErrorIs(t, err, journal.ErrInvalidEvent)
	var ie *journal.InvalidEventError
	require.True(t, errors.As(err, &ie), "the error must carry a *journal.InvalidEventError, got %T: %v", err, err)
	require.Equal(t, index, ie.Index, "InvalidEventError.Index")
	require.NotEmpty(t, ie.Field, "InvalidEventError.Field must name the field")
	require.Containsf(t, strings.ToLower(ie.Field), strings.ToLower(fieldWord), "InvalidEventError.Field %q must name the %s", ie.Field, fieldWord)
	require.NotEmpty(t, ie.Reason, "InvalidEventError.Reason must say why")
}

// waitFor receives one value from ch or fails after d.
func waitFor[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		require.True(t, ok, "%s: channel closed", what)
		return v
	case <-time.After(d):
		require.FailNow(t, "timed out waiting for "+what)
		var zero T
		return zero
	}
}
