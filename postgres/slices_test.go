package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
)

// TestSliceOfAgreesWithSQL: journal.SliceOf and the scribe_slice function of
// migration 9 give every tag the same slice (ASCII, UTF-8, long, empty
// values), and the tags spread over the whole slice space.
func TestSliceOfAgreesWithSQL(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tags := []string{"", ":", "account:", "ü:ñ", "account:42", "transfer:9f2c-aa", string(make([]byte, 300))[:0] + fmt.Sprintf("long:%0300d", 7)}
	for i := range 20_000 {
		tags = append(tags, fmt.Sprintf("g%d:%d-é", i%7, i))
	}
	var got []int32
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT array_agg(`+quote(f.cfg.Schema)+`.scribe_slice(t) ORDER BY n) FROM unnest($1::text[]) WITH ORDINALITY AS u(t, n)`, tags).Scan(&got))
	require.Len(t, got, len(tags))
	seen := map[int]bool{}
	for i, tag := range tags {
		require.Equal(t, journal.SliceOf(journal.Tag(tag)), int(got[i]), "tag %q", tag)
		seen[int(got[i])] = true
	}
	require.Len(t, seen, journal.SliceSpace, "20,000 tags should reach every slice")
}

// sliceEvent is an event tagged with tags.
func sliceEvent(typ string, tags ...journal.Tag) journal.Event {
	return journal.Event{ID: journal.NewEventID(), Type: typ, SchemaVersion: 1, Tags: tags, Data: []byte(`{}`)}
}

// TestSliceSubscribeSelectsItsSlices: SubscribeSlices yields, in position
// order and once each, exactly the events with a tag of the group in the
// slices asked for (an event with two such tags once), catch-up then live;
// other groups, other partitions and other slices are not shown.
func TestSliceSubscribeSelectsItsSlices(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Half the slices of "acct", in four ranges (four index scans merged).
	var mine []int
	for s := range journal.SliceSpace {
		if s%256 < 128 {
			mine = append(mine, s)
		}
	}
	q := journal.SliceQuery{Group: "acct", Slices: mine}
	var want []journal.Record
	appendSome := func(from, to int) {
		for i := from; i < to; i++ {
			a, b := journal.Tag(fmt.Sprintf("acct:%d", i)), journal.Tag(fmt.Sprintf("acct:%d", i+1000))
			evs := []journal.Event{sliceEvent("Opened", a), sliceEvent("Moved", a, b), sliceEvent("Other", journal.Tag(fmt.Sprintf("region:%d", i)))}
			other := sliceEvent("Opened", a)
			other.Metadata.Partition = "p2"
			res, err := f.journal.Append(ctx, evs, journal.AppendOptions{})
			require.NoError(t, err)
			_, err = f.journal.Append(ctx, []journal.Event{other}, journal.AppendOptions{})
			require.NoError(t, err)
			for _, r := range res.Records {
				if q.Matches(&r) {
					want = append(want, r)
				}
			}
		}
	}
	appendSome(0, 300)
	got := make(chan journal.Record, 10_000)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for r, err := range f.journal.SubscribeSlices(sctx, q, journal.Position{}) {
			if err != nil {
				close(got)
				return
			}
			got <- r
		}
	}()
	appendSome(300, 400) // live
	require.NotEmpty(t, want)
	for i, w := range want {
		select {
		case r := <-got:
			require.Equal(t, w.ID, r.ID, "record %d of %d", i, len(want))
		case <-ctx.Done():
			t.Fatalf("only %d of %d records arrived", i, len(want))
		}
	}
	// Nothing more: an append outside the slices is followed by one inside.
	var last journal.Record
	for i := 0; ; i++ {
		res, err := f.journal.Append(ctx, []journal.Event{sliceEvent("Opened", journal.Tag(fmt.Sprintf("acct:x%d", i)))}, journal.AppendOptions{})
		require.NoError(t, err)
		if q.Matches(&res.Records[0]) {
			last = res.Records[0]
			break
		}
	}
	require.Equal(t, last.ID, (<-got).ID)
	require.True(t, slices.IsSortedFunc(want, func(a, b journal.Record) int { return a.Position.Compare(b.Position) }))
}

// TestSliceReadUsesGroupSliceIndex: the sliced read is an index scan of
// event_tags_group_slice (no sequential scan), on a loaded, analyzed table.
func TestSliceReadUsesGroupSliceIndex(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	s := quote(f.cfg.Schema)
	_, err := f.pool.Exec(ctx, fmt.Sprintf(`
		INSERT INTO %[1]s.events (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes, data, metadata, recorded_at)
		SELECT 1000 + i / 4, i, gen_random_uuid(), 'default', 'T', 1, ARRAY['acct:' || (i %% 2000)], ARRAY[i / 2000 + 1]::bigint[],
			decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex'), convert_to('{}', 'UTF8'), convert_to('{}', 'UTF8'), now()
		FROM generate_series(0, 49999) AS i;
		INSERT INTO %[1]s.event_tags (partition, tag, version, commit_xid, seq, type)
		SELECT 'default', 'acct:' || (i %% 2000), i / 2000 + 1, 1000 + i / 4, i, 'T' FROM generate_series(0, 49999) AS i;
		ANALYZE %[1]s.events; ANALYZE %[1]s.event_tags`, s))
	require.NoError(t, err)
	for _, st := range f.journal.ReadPathStatements("acct:1", "acct:2", "T", "acct", journal.NewEventID(), journal.Position{Commit: 5000, Seq: 10}) {
		if st.Name != "sliced read after a position" {
			continue
		}
		conn, err := f.pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, f.journal.GateSetSQL())
		require.NoError(t, err)
		var plan []byte
		require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.SQL, st.Args...).Scan(&plan))
		var doc []map[string]any
		require.NoError(t, json.Unmarshal(plan, &doc))
		require.Empty(t, pgtest.SeqScans(doc[0]["Plan"].(map[string]any)), "%s", plan)
		require.Contains(t, string(plan), "event_tags_group_slice", "%s", plan)

		return
	}
	t.Fatal("no sliced read statement")
}
