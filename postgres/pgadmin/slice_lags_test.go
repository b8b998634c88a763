package pgadmin_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// TestSliceLagsUseGroupSliceIndex: the slices' lags (`scribe projections
// status`, the console) read the tag index a sliced runner reads
// (event_tags_group_slice, no sequential scan) on a loaded, analyzed table,
// and count up to their cap.
func TestSliceLagsUseGroupSliceIndex(t *testing.T) {
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
	store, err := postgres.NewProjectionStore(f.pool, f.cfg)
	require.NoError(t, err)
	k := projection.Key{Name: "lagging", Version: 1}
	_, err = store.Join(ctx, k, projection.Layout{Group: "acct", Count: 4, Partition: journal.DefaultPartition}, "r", time.Minute)
	require.NoError(t, err)
	for _, atMost := range []int{0, 1000} {
		var plan []byte
		require.NoError(t, f.pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+f.admin.SliceLagsSQL(atMost), k.Name, k.Version).Scan(&plan))
		var doc []map[string]any
		require.NoError(t, json.Unmarshal(plan, &doc))
		require.Empty(t, pgtest.SeqScans(doc[0]["Plan"].(map[string]any)), "%s", plan)
		require.Contains(t, string(plan), "event_tags_group_slice", "%s", plan)
	}
	lags, err := f.admin.SliceLags(ctx, k, 1000)
	require.NoError(t, err)
	require.Len(t, lags, 4)
	var total uint64
	for _, l := range lags {
		require.True(t, l.AtLeast, "every slice has more than 1000 of the 50,000 events")
		require.False(t, l.Oldest.IsZero())
		total += l.Events
	}
	require.EqualValues(t, 4000, total)
}
