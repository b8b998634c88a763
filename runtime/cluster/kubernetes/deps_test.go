package kubernetes_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Package runtime stays free of client-go: only programs that import this
// package compile it.
func TestRuntimeDoesNotImportKubernetes(t *testing.T) {
	t.Parallel()
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "go list -deps %s:\n%s", pkg, out)
		var k8s []string
		for _, line := range strings.Fields(string(out)) {
			if strings.HasPrefix(line, "k8s.io/") {
				k8s = append(k8s, line)
			}
		}
		return k8s
	}
	require.Empty(t, deps("github.com/scribe-es/scribe/runtime"), "packages of k8s.io that package runtime depends on")
	require.Contains(t, deps("github.com/scribe-es/scribe/runtime/cluster/kubernetes"), "k8s.io/client-go/kubernetes", "the check sees client-go where it is")
}
