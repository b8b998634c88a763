package postgres_test

import (
	"testing"

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

func TestSnapshotConformance(t *testing.T) {
	t.Parallel()
	snapshotstest.Run(t, func(t *testing.T) snapshotstest.Harness {
		return snapshotstest.Harness{Store: setup(t).snapshots}
	})
}
