package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// TestRunnerFailsAtOnceOnAMissingSchema: a runner, sliced or not, whose
// schema is missing and whose projection's Setup creates its tables there
// fails at once with a configuration error that names the schema and says
// what to do: Setup ran once, nothing was retried. The same when the
// store's schema is migrated and only the read model's schema is missing.
func TestRunnerFailsAtOnceOnAMissingSchema(t *testing.T) {
	t.Parallel()
	f := setup(t)
	appendN(t, f.journal, "acct:1", 3)
	missing := f.cfg.Schema + "_missing"
	for _, c := range []struct {
		name       string
		storeIn    string // the store's schema
		sliced     bool
		wantSetups int32 // how often Setup ran: once, before the runner's first join
	}{
		{"unsliced, store and read model in a missing schema", missing, false, 1},
		{"sliced, store and read model in a missing schema", missing, true, 1},
		{"unsliced, read model in a missing schema", f.cfg.Schema, false, 1},
		{"sliced, read model in a missing schema", f.cfg.Schema, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := f.cfg
			cfg.Schema = c.storeIn
			store, err := postgres.NewProjectionStore(f.pool, cfg)
			require.NoError(t, err)
			var setups, applied atomic.Int32
			p := projection.Projection[pgx.Tx]{Name: "accounts", Version: 1,
				Setup: func(ctx context.Context, tx pgx.Tx) error {
					setups.Add(1)
					_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+quote(missing)+`.balances (account text PRIMARY KEY, n bigint NOT NULL)`)
					return err
				},
				Handle: func(context.Context, pgx.Tx, projection.Batch) error { applied.Add(1); return nil }}
			if c.sliced {
				p.Slicing = &projection.Slicing{Group: "acct", Count: 4}
			}
			r, err := projection.NewRunner(f.journal, store, p, projection.Options{Owner: "r", LeaseTTL: time.Second, Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err = r.Run(ctx)
			require.NoError(t, ctx.Err(), "Run returned before its context ended: it did not retry until then")
			require.ErrorIs(t, err, journal.ErrConfiguration)
			require.Contains(t, err.Error(), missing, "the error names the missing schema")
			if c.storeIn == missing {
				require.Contains(t, err.Error(), "migrate", "the error says what to do")
			} else {
				require.Contains(t, err.Error(), "create it or point Setup at an existing schema", "the error says what to do")
			}
			if c.wantSetups > 0 {
				require.Less(t, len(strings.ReplaceAll(err.Error(), missing, "rm")), 200, "%s", err)
			}
			require.Equal(t, c.wantSetups, setups.Load(), "Setup ran once and was not retried")
			require.Zero(t, applied.Load())
			require.Equal(t, projection.StateStopped, r.Progress().State)
			require.Equal(t, err.Error(), r.Progress().Error)
			if c.storeIn == f.cfg.Schema {
				var pgErr interface{ SQLState() string }
				require.True(t, errors.As(err, &pgErr), "the driver's error is kept")
				require.Equal(t, "3F000", pgErr.SQLState())
				st, err := store.Status(t.Context(), projection.Key{Name: "accounts", Version: 1})
				require.NoError(t, err)
				require.NotEqual(t, projection.StateRunning, st.State, "the lease was released")
			}
		})
	}
}
