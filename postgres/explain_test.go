package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
)

// TestReadPathsUseIndexes loads 100k events and asserts from EXPLAIN (FORMAT
// JSON) that no hot read path sequentially scans the events or event_tags table.
func TestReadPathsUseIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100k events")
	}
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	s := quote(f.cfg.Schema)
	const n = 100_000
	pgtest.LoadPlanData(ctx, t, f.pool, f.cfg.Schema, n)

	var id uuid.UUID
	var c, q int64
	require.NoError(t, f.pool.QueryRow(ctx, fmt.Sprintf(`SELECT id, commit_xid, seq FROM %s.events ORDER BY seq OFFSET %d LIMIT 1`, s, n*9/10)).Scan(&id, &c, &q))
	after := journal.Position{Commit: uint64(c), Seq: uint64(q)}

	conn, err := f.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, st := range f.journal.ReadPathStatements("acct:42", "region:2", "type42", "acct", id, after) {
		t.Run(st.Name, func(t *testing.T) {
			if st.Gated {
				_, err := conn.Exec(ctx, f.journal.GateSetSQL())
				require.NoError(t, err)
			}
			var plan []byte
			require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.SQL, st.Args...).Scan(&plan))
			var doc []map[string]any
			require.NoError(t, json.Unmarshal(plan, &doc))
			scans := pgtest.SeqScans(doc[0]["Plan"].(map[string]any))
			require.Empty(t, scans, "plan of %q sequentially scans %v:\n%s", st.Name, scans, plan)
			if testing.Verbose() {
				t.Logf("%s", plan)
			}
		})
	}
	// An aggregate's stream (its tag leads every event) is read from events
	// alone: the statement probes events_pkey for none of its 50 events.
	t.Run("stream without the join", func(t *testing.T) {
		st := f.journal.ReadPathStatements("acct:42", "region:2", "type42", "acct", id, after)[0]
		require.Equal(t, "stream from version", st.Name)
		args := append([]any(nil), st.Args...)
		args[2] = int64(1)
		var plan []byte
		require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+st.SQL, args...).Scan(&plan))
		var doc []map[string]any
		require.NoError(t, json.Unmarshal(plan, &doc))
		rows := map[string]float64{}
		var walk func(node map[string]any)
		walk = func(node map[string]any) {
			if idx, ok := node["Index Name"].(string); ok {
				loops, _ := node["Actual Loops"].(float64)
				n, _ := node["Actual Rows"].(float64)
				rows[idx] += n * loops
				if idx == "events_pkey" {
					require.Zero(t, loops, "the read probes events_pkey:\n%s", plan)
				}
			}
			if kids, ok := node["Plans"].([]any); ok {
				for _, k := range kids {
					walk(k.(map[string]any))
				}
			}
		}
		walk(doc[0]["Plan"].(map[string]any))
		require.EqualValues(t, n/2000, rows["events_lead_stream"], "every event through the lead index:\n%s", plan)
	})

	// The operator's inspection statements run with enable_seqscan off.
	_, err = conn.Exec(ctx, "SET enable_seqscan = off")
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), "RESET enable_seqscan") }()
	for _, st := range f.journal.InspectStatements(journal.Position{}) {
		t.Run(st.Name, func(t *testing.T) {
			var plan []byte
			require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.SQL, st.Args...).Scan(&plan))
			var doc []map[string]any
			require.NoError(t, json.Unmarshal(plan, &doc))
			scans := pgtest.SeqScans(doc[0]["Plan"].(map[string]any))
			require.Empty(t, scans, "plan of %q sequentially scans %v:\n%s", st.Name, scans, plan)
		})
	}
}

// TestExplainGroupCommit logs the plan and timing of the write statement of
// one group commit of 32 events on a stream that already has 20,000 (the hot
// path's shape; run with -v). It asserts that the plan ran and scanned
// neither events table sequentially. benchmarks/RESULTS.md quotes it.
func TestExplainGroupCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 20k events")
	}
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	stream := journal.Stream("counter:0")
	batchOf := func(n int) []journal.Event {
		evs := make([]journal.Event, n)
		for i := range evs {
			evs[i] = event("Deposited", stream.Tag)
			evs[i].Data = json.RawMessage(fmt.Sprintf(`{"amount":1,"balance":%d,"seq":%d,"note":"a deposit of one unit to the hot counter"}`, i, i))
		}
		return evs
	}
	var version uint64
	for range 625 {
		res, err := f.journal.Append(ctx, batchOf(32), journal.AppendOptions{Expect: map[journal.Tag]uint64{stream.Tag: version}})
		require.NoError(t, err)
		version += uint64(len(res.Records))
	}
	_, err := f.pool.Exec(ctx, fmt.Sprintf(`ANALYZE %[1]s.events; ANALYZE %[1]s.event_tags; ANALYZE %[1]s.streams`, quote(f.cfg.Schema)))
	require.NoError(t, err)
	for range 3 {
		plan, err := f.journal.ExplainAppend(ctx, batchOf(32), journal.AppendOptions{Expect: map[journal.Tag]uint64{stream.Tag: version}})
		require.NoError(t, err)
		require.Contains(t, plan, "Execution Time")
		require.NotRegexp(t, `Seq Scan on (events|event_tags) `, plan)
		t.Logf("%s", plan)
	}
}
