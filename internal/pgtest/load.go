package pgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// LoadPlanData fills the migrated schema with n events, written straight
// into the tables (no hashes, no appends), and analyzes them, for plan
// checks: 2,000 account streams ("acct:0" …) of n/2,000 events and 10
// region streams ("region:0" …) of n/10, each event's account tag its lead
// tag; 50 types ("type0" …); four events
// per commit; one millisecond between events, the newest now.
func LoadPlanData(ctx context.Context, t testing.TB, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	_, err := pool.Exec(ctx, fmt.Sprintf(`
		INSERT INTO %[1]s.events (commit_xid, id, partition, type, schema_version, tags, versions, prev_hashes, hashes, data, metadata, recorded_at)
		SELECT 1000 + i / 4, gen_random_uuid(), 'default', 'type' || (i %% 50), 1,
			ARRAY['acct:' || (i %% 2000), 'region:' || (i %% 10)], ARRAY[i / 2000 + 1, i / 10 + 1]::bigint[],
			decode(repeat('00', 64), 'hex'), decode(repeat('00', 64), 'hex'),
			convert_to('{"i":' || i || '}', 'UTF8'), convert_to('{}', 'UTF8'), now() - (%[2]d - i) * interval '1 ms'
		FROM generate_series(0, %[2]d - 1) AS i`, s, n))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, fmt.Sprintf(`
		INSERT INTO %[1]s.event_tags (partition, tag, version, commit_xid, seq, type, lead)
		SELECT e.partition, t.tag, t.version, e.commit_xid, e.seq, e.type, t.k = 1
		FROM %[1]s.events e, unnest(e.tags, e.versions) WITH ORDINALITY AS t(tag, version, k)`, s))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, fmt.Sprintf(`
		INSERT INTO %[1]s.streams (partition, tag, version, first_commit, first_seq, last_commit, last_seq)
		SELECT partition, tag, max(version), min(commit_xid), min(seq), max(commit_xid), max(seq)
		FROM %[1]s.event_tags GROUP BY partition, tag`, s))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, fmt.Sprintf(`ANALYZE %[1]s.events; ANALYZE %[1]s.event_tags; ANALYZE %[1]s.streams`, s))
	require.NoError(t, err)
}

// SeqScans returns the relations among events and event_tags that a plan
// (one node of EXPLAIN (FORMAT JSON)'s tree) scans sequentially.
func SeqScans(node map[string]any) []string {
	var out []string
	if node["Node Type"] == "Seq Scan" {
		if rel, _ := node["Relation Name"].(string); rel == "events" || rel == "event_tags" {
			out = append(out, rel)
		}
	}
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			out = append(out, SeqScans(k.(map[string]any))...)
		}
	}
	return out
}
