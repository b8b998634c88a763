package snapshots_test

import (
	"testing"

	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/snapshots/snapshotstest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	snapshotstest.Run(t, func(t *testing.T) snapshotstest.Harness {
		return snapshotstest.Harness{Store: snapshots.NewMemory()}
	})
}
