package postgres

import (
	"context"
	"errors"
	"strings"

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
			return applyMigrations(ctx, pool, cfg.Schema, ms[:i])
		}
	}
	return errors.New("no migration named *_unsliced_slice.sql")
}
