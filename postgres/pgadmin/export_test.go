package pgadmin

import (
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// Statement is one SQL statement of an operator's task, for EXPLAIN.
type Statement struct {
	Name    string
	SQL     string
	Args    []any
	Inspect bool // runs with enable_seqscan off
}

// Statements returns the archiver's and the inspection's statements, with
// arguments naming existing data: tag tag1 and group group.
func (a *Admin) Statements(tag1 journal.Tag, group string, after journal.Position) []Statement {
	p := journal.DefaultPartition
	i64 := pgschema.I64
	var out []Statement
	add := func(name, sql string, inspect bool, args ...any) {
		out = append(out, Statement{Name: name, SQL: sql, Args: args, Inspect: inspect})
	}
	add("archive: move a stream's tag index rows", a.sql(moveTagsSQL), false, p, string(tag1), int64(0), int64(10))
	add("archive: chain hash at the cut", a.sql(cutHashSQL), false, i64(after.Commit), i64(after.Seq), string(tag1))
	add("archive: move fully archived events", a.sql(moveEventsSQL), false, []int64{i64(after.Commit)}, []int64{i64(after.Seq)}, i64(after.Commit), i64(after.Seq))
	add("archive: sweep events the projections passed", a.sql(sweepSQL), false, i64(after.Commit), i64(after.Seq), i64(after.Commit)+10, int64(0), 1000)
	add("archive: plan an age rule", a.sql(planSQL), false, p, true, group, time.Now())
	add("inspect: overview counts", a.sql(overviewCountsSQL), true, ExactEventsLimit)
	add("inspect: partitions", a.sql(partitionsSQL), true)
	add("inspect: type count", a.sql(typeCountSQL), true)
	add("inspect: count after, at most", a.sql(countAfterAtMostSQL), true, i64(after.Commit), i64(after.Seq), 100_000)
	add("inspect: newest events", a.sql(newestSQL), true, 20)
	return out
}

// SliceLagsSQL is SliceLags' statement, for plan checks.
func (a *Admin) SliceLagsSQL(atMost int) string { return a.sliceLagsSQL(atMost) }
