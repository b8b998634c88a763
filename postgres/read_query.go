package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// args collects positional SQL arguments.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

func i64(v uint64) int64 { return pgschema.I64(v) }

// bound is a position bound of a read: pos compared with op (">", ">=", "<", "<=");
// op "" means unbounded.
type bound struct {
	op  string
	pos journal.Position
}

func (b bound) sql(a *args, alias string) string {
	if b.op == "" {
		return ""
	}
	c := a.add(i64(b.pos.Commit))
	// The plain range on commit_xid is implied by the row comparison; it
	// gives the planner an estimate it can use.
	rng := ">="
	if b.op[0] == '<' {
		rng = "<="
	}
	return fmt.Sprintf(" AND %[1]scommit_xid %[5]s %[3]s::bigint AND (%[1]scommit_xid, %[1]sseq) %[2]s (%[3]s::bigint, %[4]s::bigint)", alias, b.op, c, a.add(i64(b.pos.Seq)), rng)
}

// matchSQL returns a query of the (commit_xid, seq) of events matching q within
// b, gated or not, each branch ordered and limited (limit 0: none), so the union
// of branches holds the first limit matches. Every branch is one index range
// scan: a tag item scans event_tags by its first tag, a type-only item scans
// events by each type, Query.All scans events by partition (or by position).
func (j *Journal) matchSQL(q journal.Query, b bound, gate bool, desc bool, limit int, a *args) string {
	m, _ := j.matchBranches(q, b, gate, desc, limit, a, false)
	return m
}

// branchCount is how many branches matchBranches builds for q.
func branchCount(q journal.Query) int {
	if q.All {
		return 1
	}
	n := 0
	for _, it := range q.Items {
		if len(it.Tags) > 0 {
			n++
		} else {
			n += len(it.Types)
		}
	}
	return n
}

// matchBranches builds matchSQL's branches. With full and a single branch, the
// branch selects recordCols itself (joining events), so the caller can use it
// as the whole read; single reports that.
func (j *Journal) matchBranches(q journal.Query, b bound, gate bool, desc bool, limit int, a *args, full bool) (string, bool) {
	single := full && branchCount(q) == 1
	evCols, etCols := "e.commit_xid, e.seq", "et.commit_xid, et.seq"
	if single {
		evCols, etCols = recordCols, recordCols
	}
	dir := ""
	if desc {
		dir = " DESC"
	}
	lim := ""
	if limit > 0 {
		lim = " LIMIT " + strconv.Itoa(limit)
	}
	gateCond := func(alias string) string {
		if !gate {
			return ""
		}
		return " AND " + alias + "commit_xid < " + pgschema.GateSQL
	}
	order := func(alias string) string {
		return fmt.Sprintf(" ORDER BY %[1]scommit_xid%[2]s, %[1]sseq%[2]s", alias, dir)
	}
	part := q.PartitionOrDefault()
	var branches []string
	switch {
	case q.All && q.AllPartitions:
		branches = append(branches, "SELECT "+evCols+" FROM "+j.t("events")+" e WHERE true"+b.sql(a, "e.")+gateCond("e.")+order("e.")+lim)
	case q.All:
		branches = append(branches, "SELECT "+evCols+" FROM "+j.t("events")+" e WHERE e.partition = "+a.add(part)+b.sql(a, "e.")+gateCond("e.")+order("e.")+lim)
	default:
		pp := a.add(part)
		for _, it := range q.Items {
			if len(it.Tags) > 0 {
				var sb strings.Builder
				sb.WriteString("SELECT " + etCols + " FROM " + j.t("event_tags") + " et")
				if len(it.Tags) > 1 || single {
					sb.WriteString(" JOIN " + j.t("events") + " e ON e.commit_xid = et.commit_xid AND e.seq = et.seq")
				}
				sb.WriteString(" WHERE et.partition = " + pp + " AND et.tag = " + a.add(string(it.Tags[0])))
				sb.WriteString(b.sql(a, "et.") + gateCond("et."))
				if len(it.Types) > 0 {
					sb.WriteString(" AND et.type = ANY(" + a.add(it.Types) + "::text[])")
				}
				if len(it.Tags) > 1 {
					rest := make([]string, len(it.Tags)-1)
					for k, t := range it.Tags[1:] {
						rest[k] = string(t)
					}
					sb.WriteString(" AND e.tags @> " + a.add(rest) + "::text[]")
				}
				sb.WriteString(order("et.") + lim)
				branches = append(branches, sb.String())
				continue
			}
			for _, ty := range it.Types {
				branches = append(branches, "SELECT "+evCols+" FROM "+j.t("events")+" e WHERE e.partition = "+pp+
					" AND e.type = "+a.add(ty)+b.sql(a, "e.")+gateCond("e.")+order("e.")+lim)
			}
		}
	}
	if single {
		return branches[0], true
	}
	for i, br := range branches {
		branches[i] = "(" + br + ")"
	}
	return strings.Join(branches, " UNION "), false
}

// conditionQuery returns the statement that reports whether an event matching
// c's query exists after c.After. It is not gated: it runs after the append
// holds its locks, when every conflicting append has committed or waits.
func (j *Journal) conditionQuery(c *journal.AppendCondition) (string, []any) {
	var a args
	m := j.matchSQL(c.FailIfEventsMatch, bound{op: ">", pos: c.After}, false, false, 1, &a)
	return "SELECT EXISTS (" + m + ")", a
}

// readPage returns up to limit records matching q within b, gated, in
// ascending (or descending) position order.
func (j *Journal) readPage(ctx context.Context, op string, q journal.Query, b bound, desc bool, limit int, out []journal.Record) ([]journal.Record, error) {
	stmt, a := j.readPageSQL(q, b, desc, limit)
	return j.gatedRecords(ctx, op, stmt, a, out)
}

// readPageSQL returns the gated statement of readPage.
func (j *Journal) readPageSQL(q journal.Query, b bound, desc bool, limit int) (string, []any) {
	var a args
	m, single := j.matchBranches(q, b, true, desc, limit, &a, true)
	if single {
		return m, a
	}
	dir := ""
	if desc {
		dir = " DESC"
	}
	stmt := "SELECT " + recordCols + " FROM " + j.t("events") + " e JOIN (" + m + ") m ON e.commit_xid = m.commit_xid AND e.seq = m.seq" +
		" ORDER BY e.commit_xid" + dir + ", e.seq" + dir
	if limit > 0 {
		stmt += " LIMIT " + strconv.Itoa(limit)
	}
	return stmt, a
}
