package postgres_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/throwawaypg"
	"github.com/scribe-es/scribe/journal/journaltest"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/snapshots/snapshotstest"
)

func TestJournalConformance(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		return setup(t).harness(t)
	})
}

func TestJournalConformanceUnbatched(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		return setup(t, func(c *postgres.Config) { c.Batching.Disabled = true }).harness(t)
	})
}

// TestJournalConformanceReadFirst runs the suite with every batch decided on
// what it read first (two round trips), never on remembered heads.
func TestJournalConformanceReadFirst(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		f := setup(t)
		f.journal.SetReadFirst(true)
		return f.harness(t)
	})
}

// TestJournalConformanceAfterXIDWraparound runs the suite on a throwaway
// server whose transaction IDs are in epoch 2, as in a database that has used
// more than 2^32 of them: positions then hold 64-bit IDs while pg_locks shows
// 32-bit ones, and the read gate must widen them (a reader shown nothing while
// an append is pending fails LowerPositionCommitsLate).
func TestJournalConformanceAfterXIDWraparound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	t.Parallel()
	pg := throwawaypg.Start(t, throwawaypg.XIDEpoch(2))
	var checked sync.Once
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		f := setupAt(t, pg.URL(), 0)
		checked.Do(func() {
			var xid uint64
			require.NoError(t, f.pool.QueryRow(t.Context(), "SELECT pg_current_xact_id()::text::bigint").Scan(&xid))
			require.GreaterOrEqual(t, xid>>32, uint64(2), "the server's transaction IDs are in epoch 2")
		})
		return f.harness(t)
	})
}

func TestSnapshotConformance(t *testing.T) {
	t.Parallel()
	snapshotstest.Run(t, func(t *testing.T) snapshotstest.Harness {
		return snapshotstest.Harness{Store: setup(t).snapshots}
	})
}
