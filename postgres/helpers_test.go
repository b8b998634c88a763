package postgres_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// appendN appends n single-tag events to tag, one append each, expecting the
// stream's version, and returns the records.
func appendN(t *testing.T, j journal.Journal, tag journal.Tag, n int) []journal.Record {
	t.Helper()
	ctx := t.Context()
	sum, err := j.TagSummary(ctx, journal.Stream(tag))
	require.NoError(t, err)
	v := sum.Version
	var out []journal.Record
	for i := range n {
		e := event("Changed", tag)
		e.Data = json.RawMessage(fmt.Sprintf(`{"n":%d}`, int(v)+i+1))
		res, err := j.Append(ctx, []journal.Event{e}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: v + uint64(i)}})
		require.NoError(t, err)
		out = append(out, res.Records...)
	}
	return out
}

// count counts the rows of a table of f's schema matching where.
func (f *fixture) count(t *testing.T, table, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+quote(f.cfg.Schema)+`.`+table+` WHERE `+where, args...).Scan(&n))
	return n
}

// keep returns a policy keeping the newest n events of group's streams.
func keep(group string, n uint64, nosnapshot bool) pgadmin.RetentionPolicy {
	return pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{group: {KeepLast: n, NoSnapshotCheck: nosnapshot}}}
}

// admin returns an Admin of cfg's schema on pool.
func admin(t testing.TB, pool *pgxpool.Pool, cfg postgres.Config) *pgadmin.Admin {
	t.Helper()
	a, err := pgadmin.New(pool, cfg)
	require.NoError(t, err)
	return a
}
