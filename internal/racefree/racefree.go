package racefree

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Run runs `go test -count=1 -run pattern .` in the calling test's package
// directory (the working directory of a test) without the race detector, and
// fails t with the child's output if it fails or matches no test. The output
// is logged either way.
func Run(t testing.TB, pattern string) {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "-run", pattern, ".")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -run %s (race-free build) failed: %v\n%s", pattern, err, out)
	}
	if len(out) == 0 || strings.Contains(string(out), "no tests to run") {
		t.Fatalf("go test -run %s (race-free build) ran no test:\n%s", pattern, out)
	}
	t.Logf("%s", out)
}
