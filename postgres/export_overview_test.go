package postgres

import "github.com/scribe-es/scribe/journal"

// InspectStatements lists the inspection statements of the journal's
// contract (inspect.go) with arguments, for plan checks; they run with
// enable_seqscan off.
func (j *Journal) InspectStatements(journal.Position) []Statement {
	return []Statement{
		{Name: "inspect: type summaries", SQL: j.sql(typeSummariesSQL)},
	}
}
