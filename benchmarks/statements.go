package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// statementCounter counts what the connections of one pool send to Postgres,
// as a pgx tracer (pgx.QueryTracer and pgx.BatchTracer) on the pool's
// connection config:
//
//   - round trips: one per Query, QueryRow or Exec, one per SendBatch (a
//     batch is pipelined: every statement goes out before the first result
//     is read). Not counted: the Parse/Describe round trip of a statement's
//     first use on a connection (then cached), and pings.
//   - statements: every statement, BEGIN and COMMIT included.
//   - transactions: every COMMIT or ROLLBACK of an explicit transaction and
//     every statement run outside one (an implicit transaction).
//
// Its methods are safe for concurrent use; the pool calls them from every
// connection at once.
type statementCounter struct {
	roundTrips   atomic.Int64
	statements   atomic.Int64
	transactions atomic.Int64
	inTx         sync.Map // *pgx.Conn → bool: inside an explicit transaction
}

// statementCounts is a statementCounter's totals at one moment.
type statementCounts struct {
	RoundTrips, Statements, Transactions int64
}

// counts returns the totals so far.
func (c *statementCounter) counts() statementCounts {
	return statementCounts{RoundTrips: c.roundTrips.Load(), Statements: c.statements.Load(), Transactions: c.transactions.Load()}
}

// TraceQueryStart counts a round trip and its statement.
func (c *statementCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.roundTrips.Add(1)
	c.statement(conn, data.SQL)
	return ctx
}

// TraceQueryEnd does nothing: a statement is counted when it starts.
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts the batch's one round trip.
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

// TraceBatchQuery counts one statement of a batch.
func (c *statementCounter) TraceBatchQuery(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	c.statement(conn, data.SQL)
}

// TraceBatchEnd does nothing.
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// statement counts one statement on conn and the transaction it ends or is.
func (c *statementCounter) statement(conn *pgx.Conn, sql string) {
	c.statements.Add(1)
	word, _, _ := strings.Cut(strings.TrimSpace(sql), " ")
	switch strings.ToUpper(strings.TrimSuffix(word, ";")) {
	case "BEGIN", "START":
		c.inTx.Store(conn, true)
	case "COMMIT", "END", "ROLLBACK", "ABORT":
		c.inTx.Store(conn, false)
		c.transactions.Add(1)
	default:
		if in, ok := c.inTx.Load(conn); !ok || !in.(bool) {
			c.transactions.Add(1)
		}
	}
}
