package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// SetAfterChecks installs a hook that runs in every append after its
// decision and before its write goes out.
func (j *Journal) SetAfterChecks(f func(ctx context.Context, conn *pgxpool.Conn) error) {
	j.testHooks().afterChecks = f
}

// testHooks returns j's engine hooks, installing an empty set first.
func (j *Journal) testHooks() *engineHooks {
	if j.hooks == nil {
		j.hooks = &engineHooks{}
	}
	return j.hooks
}

// SetBeforeCommit installs a hook that runs right before COMMIT of every
// append (COMMIT is then sent on its own).
func (j *Journal) SetBeforeCommit(f func(ctx context.Context, conn *pgxpool.Conn) error) {
	j.testHooks().beforeCommit = f
}

// HoldAppend runs an append in its own transaction up to, not including,
// COMMIT: its position is assigned and its rows written but invisible. release
// commits it.
func (j *Journal) HoldAppend(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (func() (journal.AppendResult, error), error) {
	prepared, partition, err := journal.PrepareAppend(events, opts, j.limits)
	if err != nil {
		return nil, err
	}
	outcomes, release := j.run(ctx, []*appendReq{j.newAppendReq(ctx, prepared, partition, opts)}, true)
	if err := outcomes[0].err; err != nil {
		return nil, err
	}
	res := outcomes[0].res
	if release == nil { // a duplicate: nothing to commit
		return func() (journal.AppendResult, error) { return res, nil }, nil
	}
	return func() (journal.AppendResult, error) {
		if err := release(); err != nil {
			return journal.AppendResult{}, err
		}
		j.committed()
		return res, nil
	}, nil
}

// NotifyChannel is the NOTIFY channel of a schema.
func NotifyChannel(schema string) string { return notifyChannel(schema) }

// Statement is one SQL statement of a read path, for EXPLAIN.
type Statement struct {
	Name  string
	SQL   string
	Args  []any
	Gated bool // run GateSetSQL on the same connection first
}

// GateSetSQL returns the statement that sets the read gate.
func (j *Journal) GateSetSQL() string { return j.sql(pgschema.GateSetSQL) }

// ReadPathStatements returns the statements of the hot read paths, with
// arguments naming existing data: tags tag1, tag2 (both on some events) and
// type typ, group group, event id.
func (j *Journal) ReadPathStatements(tag1, tag2 journal.Tag, typ, group string, id any, after journal.Position) []Statement {
	p := journal.DefaultPartition
	var out []Statement
	add := func(name, sql string, gated bool, args ...any) {
		out = append(out, Statement{Name: name, SQL: sql, Args: args, Gated: gated})
	}
	add("stream from version", j.sql(readStreamSQL), false, p, string(tag1), int64(50), 512)
	dcb := journal.Query{Items: []journal.QueryItem{
		{Tags: []journal.Tag{tag1}},
		{Tags: []journal.Tag{tag1, tag2}, Types: []string{typ}},
		{Types: []string{typ, typ + "x"}},
	}}
	sql, a := j.readPageSQL(dcb, bound{op: ">", pos: after}, false, 512)
	add("DCB read with several items", sql, true, a...)
	sql, a = j.readPageSQL(dcb, bound{op: "<=", pos: after}, true, 10)
	add("DCB read backwards", sql, true, a...)
	sql, a = j.conditionQuery(&journal.AppendCondition{FailIfEventsMatch: dcb, After: after})
	add("DCB condition check", sql, false, a...)
	sql, a = j.readPageSQL(journal.Query{All: true, AllPartitions: true}, bound{op: ">", pos: after}, false, 512)
	add("read all after a position", sql, true, a...)
	sql, a = j.readPageSQL(journal.AllEvents(), bound{op: ">", pos: after}, false, 512)
	add("read a partition after a position", sql, true, a...)
	add("latest position of a tag", j.sql(tagSummarySQL), false, p, string(tag1))
	sql, a = j.readSlicesSQL(journal.SliceQuery{Group: group, Slices: []int{0, 1, 2, 3, 500}}, after, 512)
	add("sliced read after a position", sql, true, a...)
	add("tags of a group", j.sql(tagsOfGroupSQL), false, p, group)
	add("event by ID", j.sql(readEventSQL), false, id)
	add("head", j.sql(headSQL), true)
	add("stream cut", j.sql(cutSQL), false, p, string(tag1))
	add("stream through the archive", j.sql(readStreamWithArchiveSQL), false, p, string(tag1), int64(1), 512)
	return out
}

// EngineStats are the append engine's counters (the Metric constants name
// what each reports).
type EngineStats struct {
	Batches, Appends, Events, Direct, Read, Fenced int64
	Discarded, ImpliedConditions, AcquireWaits     int64
	ReplicaFallbacks                               int64
	WriteTime, BatchTime                           time.Duration
}

// EngineStats reads j's counters straight from the journal.
func (j *Journal) EngineStats() EngineStats {
	s := &j.stats
	return EngineStats{
		Batches: s.batches.Load(), Appends: s.appends.Load(), Events: s.events.Load(),
		Direct: s.direct.Load(), Read: s.read.Load(), Fenced: s.fenced.Load(),
		Discarded: s.discarded.Load(), ImpliedConditions: s.implied.Load(),
		AcquireWaits: s.acquireWaits.Load(), ReplicaFallbacks: s.replicaFallbacks.Load(),
		WriteTime: time.Duration(s.writeNanos.Load()), BatchTime: time.Duration(s.batchNanos.Load()),
	}
}

// EngineCounters reads j's counters by the name of the metric reporting
// each, in the metric's unit.
func (j *Journal) EngineCounters() map[string]float64 {
	out := map[string]float64{}
	for _, em := range engineMetrics {
		n := float64(em.counter(&j.stats).Load())
		if em.unit == "s" {
			n /= 1e9
		}
		out[em.name] = n
	}
	return out
}

// SetReadFirst makes every batch start with a read attempt: the direct
// (one round trip) attempt is never tried.
func (j *Journal) SetReadFirst(on bool) { j.testHooks().readFirst = on }

// ExplainAppend runs EXPLAIN (ANALYZE, BUFFERS) of the write statement of an
// append of events in a transaction that is rolled back: nothing is stored.
func (j *Journal) ExplainAppend(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (string, error) {
	prepared, partition, err := journal.PrepareAppend(events, opts, j.limits)
	if err != nil {
		return "", err
	}
	batch := []*appendReq{j.newAppendReq(ctx, prepared, partition, opts)}
	conn, err := j.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	st, err := j.readState(ctx, conn, batch)
	if err != nil {
		return "", err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") //nolint:errcheck
	d := j.decide(batch, st)
	if len(d.accepted) == 0 {
		return "", fmt.Errorf("explain: the append was not accepted: %v", d.outcomes[0].err)
	}
	args, err := writeArgs(st, d.accepted)
	if err != nil {
		return "", err
	}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) "+j.sql(writeSQL), args...)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		sb.WriteString(line + "\n")
	}
	return sb.String(), rows.Err()
}

// PeerClosed exposes peerClosed to the fault tests.
var PeerClosed = peerClosed

// LoadMigrationsForTest loads the migrations in dir of fsys and returns each
// one's version and compatibility floor.
func LoadMigrationsForTest(fsys fs.FS, dir string) ([][2]int, error) {
	ms, err := loadMigrations(fsys, dir)
	out := make([][2]int, 0, len(ms))
	for _, m := range ms {
		out = append(out, [2]int{m.version, m.compatibleFrom})
	}
	return out, err
}

// GateWriterSQL is pgschema.GateWriterSQL, what a running append's widened ID f adds
// to the gate given xm (the CTE named xm with column v).
const GateWriterSQL = pgschema.GateWriterSQL
