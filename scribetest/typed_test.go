package scribetest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// An AggregateOf's handle takes only its own command type: sending another
// aggregate's command does not compile, while the same program without that
// line does (so the failure is the type check, not the program).
func TestTypedCommandsAreCheckedAtCompileTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs with the go tool")
	}
	build := func(dir string) (string, error) {
		out, err := exec.Command("go", "vet", "./testdata/"+dir).CombinedOutput()
		return string(out), err
	}
	if out, err := build("welltyped"); err != nil {
		t.Fatalf("the well-typed program must compile: %v\n%s", err, out)
	}
	out, err := build("misuse")
	if err == nil {
		t.Fatal("a program sending an order's command to the account aggregate compiled")
	}
	if !strings.Contains(out, "AddLine") || !strings.Contains(out, "does not implement AccountCommand") {
		t.Fatalf("the program failed for another reason than the command's type:\n%s", out)
	}
}
