//go:build race

package kubernetes_test

import (
	"testing"

	"github.com/scribe-es/scribe/internal/racefree"
)

// The in-process tests (two members in one process) cannot run under the
// race detector because of protoactor-go's own data races (see
// inprocess_test.go). So that a race-enabled run (CI) still covers them,
// this test runs them in a race-free build of this package.
func TestInProcessWithoutRaceDetector(t *testing.T) {
	t.Parallel()
	racefree.Run(t, "^TestInProcess")
}
