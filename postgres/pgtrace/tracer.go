package pgtrace

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the OpenTelemetry scope of the database spans (the postgres
// package's, where the spans begin).
const TracerName = "github.com/scribe-es/scribe/postgres"

// EventStatement is the event a batch's span records for each of its
// statements, with the statement's db.query.summary.
const EventStatement = "db.statement"

// Attribute keys of the database spans (OpenTelemetry semantic conventions
// for database client spans).
const (
	AttrDBSystem       = attribute.Key("db.system.name")
	AttrDBOperation    = attribute.Key("db.operation.name")
	AttrDBCollection   = attribute.Key("db.collection.name")
	AttrDBNamespace    = attribute.Key("db.namespace")
	AttrDBQuerySummary = attribute.Key("db.query.summary")
	AttrDBBatchSize    = attribute.Key("db.operation.batch.size")
	AttrDBStatusCode   = attribute.Key("db.response.status_code")
	AttrServerAddress  = attribute.Key("server.address")
	AttrServerPort     = attribute.Key("server.port")
	AttrErrorType      = attribute.Key("error.type")
)

// Tracer records an OpenTelemetry client span for every query and every
// batch a pgx connection runs, after the semantic conventions for database
// spans: a span is named by the statement's summary, its operation and the
// table it works on ("INSERT scribe.events", "SELECT scribe.streams",
// "COMMIT"; a batch "BATCH", or "BATCH <summary>" when all its statements
// share one), never by the statement's text, and carries db.system.name
// (postgresql), db.operation.name, db.collection.name when the statement
// names a table, db.query.summary, db.namespace (the database),
// server.address and server.port; a batch also db.operation.batch.size and
// an EventStatement event per statement, with its summary.
// Neither statement texts nor arguments are recorded. A failed statement
// sets its span's status to Error, with error.type and
// db.response.status_code (the SQLSTATE) when Postgres answered. A span is
// a child of the span in the call's context, so the statements of a
// journal call made for a command show under that command.
//
// Set it on the pool's connection configuration before creating the pool:
//
//	cfg, err := pgxpool.ParseConfig(url)
//	cfg.ConnConfig.Tracer = pgtrace.New(tracerProvider)
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
//
// A Tracer is safe for concurrent use by all the connections of a pool.
type Tracer struct {
	tracer trace.Tracer
	// summaries caches summarize's result per SQL text: a journal sends a
	// few dozen distinct statements, and tokenizing each one on every call
	// cost the bank a sixth of its CPU. Past maxSummaries texts (generated
	// DCB queries vary) new ones are summarized uncached.
	summaries sync.Map // string -> summary
	cached    atomic.Int64
}

// maxSummaries bounds Tracer's summary cache.
const maxSummaries = 4096

// summary returns sql's summary, from the cache when it can.
func (t *Tracer) summary(sql string) summary {
	if s, ok := t.summaries.Load(sql); ok {
		return s.(summary)
	}
	s := summarize(sql)
	if t.cached.Load() < maxSummaries {
		if _, loaded := t.summaries.LoadOrStore(sql, s); !loaded {
			t.cached.Add(1)
		}
	}
	return s
}

var (
	_ pgx.QueryTracer = (*Tracer)(nil)
	_ pgx.BatchTracer = (*Tracer)(nil)
)

// New returns a Tracer recording spans with tp's tracer named
// TracerName.
func New(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer(TracerName)}
}

// TraceQueryStart implements pgx.QueryTracer: it starts the statement's span.
func (t *Tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s := t.summary(data.SQL)
	attrs := append(connAttrs(conn), s.attrs()...)
	ctx, _ = t.tracer.Start(ctx, s.String(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer: it ends the statement's span.
func (t *Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	span := trace.SpanFromContext(ctx)
	if data.Err != nil {
		setError(span, data.Err)
	}
	span.End()
}

// TraceBatchStart implements pgx.BatchTracer: it starts the batch's span.
func (t *Tracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	name, op := "BATCH", "BATCH"
	n := 0
	var common *summary
	if data.Batch != nil {
		n = data.Batch.Len()
		for i, q := range data.Batch.QueuedQueries {
			s := t.summary(q.SQL)
			if i == 0 {
				common = &s
			} else if common != nil && *common != s {
				common = nil
			}
		}
	}
	attrs := append(connAttrs(conn), AttrDBBatchSize.Int(n))
	if common != nil && common.operation != "" {
		name = "BATCH " + common.String()
		op = "BATCH " + common.operation
		if common.collection != "" {
			attrs = append(attrs, AttrDBCollection.String(common.collection))
		}
	}
	attrs = append(attrs, AttrDBOperation.String(op), AttrDBQuerySummary.String(name))
	ctx, _ = t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer: each statement of the batch is
// an event of the batch's span (EventStatement) carrying its summary, and
// error.type when it failed.
func (t *Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{AttrDBQuerySummary.String(t.summary(data.SQL).String())}
	if data.Err != nil {
		attrs = append(attrs, AttrErrorType.String(errorType(data.Err)))
	}
	span.AddEvent(EventStatement, trace.WithAttributes(attrs...))
}

// TraceBatchEnd implements pgx.BatchTracer: it ends the batch's span.
func (t *Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	span := trace.SpanFromContext(ctx)
	if data.Err != nil {
		setError(span, data.Err)
	}
	span.End()
}

func connAttrs(conn *pgx.Conn) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrDBSystem.String("postgresql")}
	if conn == nil {
		return attrs
	}
	if cc := conn.Config(); cc != nil {
		attrs = append(attrs, AttrDBNamespace.String(cc.Database), AttrServerAddress.String(cc.Host), AttrServerPort.Int(int(cc.Port)))
	}
	return attrs
}

func setError(span trace.Span, err error) {
	typ := errorType(err)
	span.SetAttributes(AttrErrorType.String(typ))
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		span.SetAttributes(AttrDBStatusCode.String(pe.Code))
	}
	span.SetStatus(codes.Error, typ)
}

// errorType is the error.type of a failed statement: the SQLSTATE when
// Postgres answered, the context's error class, or "_OTHER".
func errorType(err error) string {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		return pe.Code
	case errors.Is(err, context.DeadlineExceeded):
		return "context_deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "context_canceled"
	}
	return "_OTHER"
}

// summary is a statement's operation (SELECT, INSERT, …, upper case) and
// the table it works on ("" when it names none or several forms apply).
type summary struct {
	operation, collection string
	// writes are the data-modifying statements inside a WITH whose main
	// statement is a SELECT ("UPDATE a INSERT b"), "" otherwise.
	writes string
}

// String is the statement's span name: "<operation> <collection>", or the
// operation alone.
func (s summary) String() string {
	switch {
	case s.operation == "":
		return "postgresql"
	case s.writes != "" && s.collection == "":
		return s.writes + " " + s.operation
	case s.writes != "":
		return s.writes + " " + s.operation + " " + s.collection
	case s.collection == "":
		return s.operation
	}
	return s.operation + " " + s.collection
}

func (s summary) attrs() []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrDBQuerySummary.String(s.String())}
	if s.operation != "" {
		attrs = append(attrs, AttrDBOperation.String(s.operation))
	}
	if s.collection != "" {
		attrs = append(attrs, AttrDBCollection.String(s.collection))
	}
	return attrs
}

// summarize finds a statement's operation and target table from its
// top-level tokens: the first keyword (after the common table expressions
// of a WITH), and the table after INSERT INTO, UPDATE, DELETE FROM or a
// SELECT's first FROM. It never returns text from literals or comments.
func summarize(sql string) summary {
	toks := tokens(sql)
	var s summary
	i := 0
	var writes []string
	if i < len(toks) && toks[i].word == "WITH" {
		// Skip to the first statement keyword at depth 0 after the CTEs,
		// noting the data-modifying statements of the CTEs.
		for i++; i < len(toks); i++ {
			if toks[i].depth == 0 && isStatement(toks[i].word) {
				break
			}
			if w := writeAt(toks, i); w != "" && !slices.Contains(writes, w) {
				writes = append(writes, w)
			}
		}
	}
	if i >= len(toks) {
		return s
	}
	s.operation = toks[i].word
	if s.operation == "SELECT" {
		s.writes = strings.Join(writes, " ")
	}
	// next is the table named by token j; a name followed by '(' is a
	// function (FROM unnest(…)), except after INSERT INTO, where the
	// parenthesis opens the column list.
	next := func(j int) string {
		if j < len(toks) && toks[j].depth == toks[i].depth && toks[j].ident != "" && (!toks[j].call || s.operation == "INSERT") {
			return toks[j].ident
		}
		return ""
	}
	switch s.operation {
	case "INSERT":
		if i+1 < len(toks) && toks[i+1].word == "INTO" {
			s.collection = next(i + 2)
		}
	case "UPDATE":
		s.collection = next(i + 1)
	case "DELETE":
		if i+1 < len(toks) && toks[i+1].word == "FROM" {
			s.collection = next(i + 2)
		}
	case "SELECT":
		for j := i + 1; j < len(toks); j++ {
			if toks[j].depth == toks[i].depth && toks[j].word == "FROM" {
				s.collection = next(j + 1)
				break
			}
		}
	}
	return s
}

// writeAt returns "INSERT t", "UPDATE t" or "DELETE t" when toks[i] starts
// such a statement naming table t, "" otherwise.
func writeAt(toks []token, i int) string {
	name := func(j int) string {
		if j < len(toks) && toks[j].ident != "" {
			return toks[j].ident
		}
		return ""
	}
	var t string
	switch toks[i].word {
	case "INSERT", "DELETE":
		if i+1 < len(toks) && (toks[i+1].word == "INTO" || toks[i+1].word == "FROM") {
			t = name(i + 2)
		}
	case "UPDATE":
		t = name(i + 1)
	}
	if t == "" {
		return ""
	}
	return toks[i].word + " " + t
}

func isStatement(w string) bool {
	switch w {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE":
		return true
	}
	return false
}

// token is an identifier (ident, dotted, quotes removed) at a parenthesis
// depth; word is its upper-case form when it could be a keyword.
type token struct {
	word, ident string
	depth       int
	call        bool // followed by '(': a function, not a table
}

// tokens splits sql into words and identifiers, skipping literals,
// comments, parameters, numbers and punctuation.
func tokens(sql string) []token {
	var out []token
	depth := 0
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '(':
			depth++
			i++
		case c == ')':
			depth--
			i++
		case c == '\'':
			i = skipQuoted(sql, i, '\'')
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '"' || isIdentStart(c):
			// An identifier, possibly qualified: a.b, "a".b.
			var parts []string
			for i < len(sql) {
				if sql[i] == '"' {
					j := skipQuoted(sql, i, '"')
					parts = append(parts, strings.ReplaceAll(sql[i+1:max(j-1, i+1)], `""`, `"`))
					i = j
				} else if isIdentStart(sql[i]) {
					j := i
					for j < len(sql) && isIdentPart(sql[j]) {
						j++
					}
					parts = append(parts, sql[i:j])
					i = j
				} else {
					break
				}
				if i < len(sql) && sql[i] == '.' {
					i++
					continue
				}
				break
			}
			j := i
			for j < len(sql) && (sql[j] == ' ' || sql[j] == '\t' || sql[j] == '\n' || sql[j] == '\r') {
				j++
			}
			t := token{ident: strings.Join(parts, "."), depth: depth, call: j < len(sql) && sql[j] == '('}
			if len(parts) == 1 && c != '"' {
				t.word = strings.ToUpper(parts[0])
			}
			out = append(out, t)
		default:
			i++
		}
	}
	return out
}

// skipQuoted returns the index after the quoted text starting at i, where
// a doubled quote is an escaped one.
func skipQuoted(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == q {
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$' }
