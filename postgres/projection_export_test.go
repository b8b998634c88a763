package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateBeforeUnslicedSlice applies the embedded migrations older than the
// one that carries unsliced checkpoints into projection_slices, as a build
// before it left a schema: for the upgrade test.
func MigrateBeforeUnslicedSlice(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for i, m := range ms {
		if strings.HasSuffix(m.name, "_unsliced_slice.sql") {
			if err := applyMigrations(ctx, pool, cfg.Schema, ms[:i]); err != nil {
				return err
			}
			// This build's appends write event_tags.lead (migration 16),
			// which the old build's schema gets here so that the test can
			// write its events with this build; migration 16 keeps it.
			_, err := pool.Exec(ctx, `ALTER TABLE `+pgx.Identifier{cfg.Schema}.Sanitize()+`.event_tags ADD COLUMN lead boolean`)
			return err
		}
	}
	return errors.New("no migration named *_unsliced_slice.sql")
}
