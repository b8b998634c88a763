package main

import (
	"context"
	"fmt"

	"github.com/scribe-es/scribe/internal/metricread"
	"github.com/scribe-es/scribe/postgres"
)

// migrateJournal migrates the backend's fresh schema and opens the Postgres
// journal (and its sessions) on it.
func (b *backend) migrateJournal(ctx context.Context) error {
	b.Engine = metricread.New()
	cfg := postgres.Config{Schema: b.Schema, MeterProvider: b.Engine.Provider}
	if err := postgres.Migrate(ctx, b.Pool, cfg); err != nil {
		return fmt.Errorf("-db: migrate schema %s: %w", b.Schema, err)
	}
	j, err := postgres.NewJournal(b.Pool, cfg)
	if err != nil {
		return fmt.Errorf("-db: %w", err)
	}
	b.Journal, b.Sessions = j, j
	b.closers = append(b.closers, func(context.Context) error { return j.Close() })
	return nil
}
