package pgadmin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
)

// TestOperatorStatementsUseIndexes loads 100k events and asserts from
// EXPLAIN (FORMAT JSON) that neither the archiver's statements nor the
// inspection's (with enable_seqscan off, as they run) sequentially scan the
// events or event_tags table.
func TestOperatorStatementsUseIndexes(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100k events")
	}
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	pgtest.LoadPlanData(ctx, t, f.pool, f.cfg.Schema, 100_000)
	var c, q int64
	require.NoError(t, f.pool.QueryRow(ctx, fmt.Sprintf(`SELECT commit_xid, seq FROM %s.events ORDER BY seq OFFSET %d LIMIT 1`, quote(f.cfg.Schema), 90_000)).Scan(&c, &q))
	after := journal.Position{Commit: uint64(c), Seq: uint64(q)}

	conn, err := f.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, st := range f.admin.Statements("acct:42", "acct", after) {
		t.Run(st.Name, func(t *testing.T) {
			if st.Inspect {
				_, err := conn.Exec(ctx, "SET enable_seqscan = off")
				require.NoError(t, err)
				defer func() { _, _ = conn.Exec(context.Background(), "RESET enable_seqscan") }()
			}
			var plan []byte
			require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.SQL, st.Args...).Scan(&plan))
			var doc []map[string]any
			require.NoError(t, json.Unmarshal(plan, &doc))
			scans := pgtest.SeqScans(doc[0]["Plan"].(map[string]any))
			require.Empty(t, scans, "plan of %q sequentially scans %v:\n%s", st.Name, scans, plan)
		})
	}
}
