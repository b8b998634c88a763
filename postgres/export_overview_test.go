package postgres

import "github.com/scribe-es/scribe/journal"

// InspectStatements lists the inspection statements (overview.go) with
// arguments, for plan checks; they run with enable_seqscan off.
func (j *Journal) InspectStatements(after journal.Position) []Statement {
	return []Statement{
		{Name: "inspect: overview counts", SQL: j.sql(overviewCountsSQL), Args: []any{ExactEventsLimit}},
		{Name: "inspect: partitions", SQL: j.sql(partitionsSQL)},
		{Name: "inspect: type count", SQL: j.sql(typeCountSQL)},
		{Name: "inspect: type summaries", SQL: j.sql(typeSummariesSQL)},
		{Name: "inspect: count after, at most", SQL: j.sql(countAfterAtMostSQL), Args: []any{i64(after.Commit), i64(after.Seq), 100_000}},
		{Name: "inspect: newest events", SQL: j.sql(newestSQL), Args: []any{20}},
	}
}
