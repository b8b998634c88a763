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
		f := setup(t)
		return journaltest.Harness{
			Journal:     f.journal,
			Sessions:    f.journal,
			MaxDataSize: f.cfg.MaxDataSize,
			Tamper:      f.tamper,
			HoldCommit:  f.journal.HoldAppend,
		}
	})
}

func TestJournalConformanceUnbatched(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		f := setup(t, func(c *postgres.Config) { c.Batching.Disabled = true })
		return journaltest.Harness{
			Journal:    f.journal,
			Sessions:   f.journal,
			Tamper:     f.tamper,
			HoldCommit: f.journal.HoldAppend,
		}
	})
}

// TestJournalConformanceReadFirst runs the suite with every batch decided on
// what it read first (two round trips), never on remembered heads.
func TestJournalConformanceReadFirst(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T) journaltest.Harness {
		f := setup(t)
		f.journal.SetReadFirst(true)
		return journaltest.Harness{
			Journal:    f.journal,
			Sessions:   f.journal,
			Tamper:     f.tamper,
			HoldCommit: f.journal.HoldAppend,
		}
	})
}

func TestSnapshotConformance(t *testing.T) {
	t.Parallel()
	snapshotstest.Run(t, func(t *testing.T) snapshotstest.Harness {
		return snapshotstest.Harness{Store: setup(t).snapshots}
	})
}
