//go:build race

package kubernetes_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// The in-process tests (two members in one process) cannot run under the
// race detector because of protoactor-go's own data races (see
// inprocess_test.go). So that a race-enabled run (CI) still covers them,
// this test runs them in a race-free build of this package.
func TestInProcessWithoutRaceDetector(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestInProcess", ".")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test -run ^TestInProcess (race-free build):\n%s", out)
	require.NotContains(t, string(out), "no tests to run")
	t.Logf("%s", out)
}
