package main

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/scribe-es/scribe/internal/metricread"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

// backend is one measurement's storage: a fresh journal (and, on Postgres, the
// pool and schema it lives in).
type backend struct {
	Journal  journal.Journal
	Sessions journal.Sessions
	Pool     *pgxpool.Pool // nil on the memory journal
	Schema   string        // "" on the memory journal
	// Statements counts what the pool sends (nil on the memory journal).
	Statements *statementCounter
	// Engine reads the Postgres journal's engine metrics (nil on the
	// memory journal).
	Engine  *metricread.Reader
	closers []func(context.Context) error
}

// close releases the backend in reverse order of acquisition.
func (b *backend) close(ctx context.Context) error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i](ctx))
	}
	return errors.Join(errs...)
}

// openBackend returns a fresh, empty journal for one measurement.
func openBackend(ctx context.Context, o options) (*backend, error) {
	if o.DB != "" {
		return openPostgres(ctx, o)
	}
	m := memory.New()
	return &backend{Journal: m, Sessions: m, closers: []func(context.Context) error{
		func(context.Context) error { return m.Close() },
	}}, nil
}
