package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// TestRecordScannerDecodesLikeScan: the binary decoder of the read path
// yields the same records as pgx's Scan, for tagged, multi-tagged and
// untagged events, metadata of every kind and two partitions; a text
// result (the simple protocol) falls back to Scan.
func TestRecordScannerDecodesLikeScan(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	created := time.Date(2026, 11, 28, 12, 0, 0, 123456000, time.FixedZone("x", 3600))
	appendOne := func(opts journal.AppendOptions, evs ...journal.Event) {
		t.Helper()
		_, err := f.journal.Append(ctx, evs, opts)
		require.NoError(t, err)
	}
	ev := func(typ string, data string, md journal.Metadata, tags ...journal.Tag) journal.Event {
		return journal.Event{ID: journal.NewEventID(), Type: typ, SchemaVersion: 2, Tags: tags, Data: []byte(data), Metadata: md}
	}
	appendOne(journal.AppendOptions{},
		ev("Opened", `{"owner":"ann"}`, journal.Metadata{CorrelationID: "c-1", CausationID: "k", Scopes: []string{"a", "b"}, CreatedAt: created}, "account:1"),
		ev("Deposited", `{"amount":5}`, journal.Metadata{IdempotencyKey: "idem-1", CommandHash: "h"}, "account:1"))
	appendOne(journal.AppendOptions{}, ev("Transferred", `{"amount":2,"note":"ü \"q\""}`, journal.Metadata{TraceParent: "00-abc-def-01"}, "account:1", "account:2"))
	appendOne(journal.AppendOptions{}, ev("Noted", `{}`, journal.Metadata{UserID: "u"}))
	appendOne(journal.AppendOptions{}, ev("Opened", `{"owner":"bo"}`, journal.Metadata{Partition: "east"}, "account:9"))

	binary, scanned, text, decoded, err := postgres.ScanEvents(ctx, f.pool, f.cfg.Schema)
	require.NoError(t, err)
	require.Equal(t, [2]bool{true, false}, decoded, "the binary result is decoded by the scanner itself, the text one by Scan")
	require.Len(t, scanned, 5)
	require.Equal(t, scanned, binary)
	require.Equal(t, scanned, text)
	var all []journal.Record
	for r, err := range f.journal.ReadAll(ctx, journal.Position{}, 0) {
		require.NoError(t, err)
		all = append(all, r)
	}
	require.Equal(t, scanned, all)
	require.Equal(t, []journal.Tag{"account:1", "account:2"}, binary[2].Tags)
	require.Nil(t, binary[3].Tags, "an untagged event has a link to its chain but no tags")
	require.Len(t, binary[3].Links, 1)
	require.Equal(t, "east", binary[4].Partition())
	require.Equal(t, created.UTC(), binary[0].Metadata.CreatedAt)
}
