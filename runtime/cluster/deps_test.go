package cluster_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deps returns the packages pkg depends on that are not in the standard
// library (their paths have a dot in the first element).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	require.NoError(t, err, "go list -deps %s:\n%s", pkg, out)
	var nonStd []string
	for _, p := range strings.Fields(string(out)) {
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			nonStd = append(nonStd, p)
		}
	}
	return nonStd
}

// matching returns the packages of ps that start with one of prefixes.
func matching(ps []string, prefixes ...string) []string {
	var out []string
	for _, p := range ps {
		for _, pre := range prefixes {
			if strings.HasPrefix(p, pre) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

var providerDeps = []string{
	"github.com/hashicorp/consul", "go.etcd.io/etcd", "github.com/labstack/echo", "k8s.io/",
	"github.com/asynkron/protoactor-go/cluster/clusterproviders",
}

// Package runtime compiles no cluster code and no provider: a program pays
// for cluster mode only when it imports this package, and for a provider
// only when it imports that provider's package.
func TestImportOnlyWhatYouUse(t *testing.T) {
	t.Parallel()
	rt := deps(t, "github.com/scribe-es/scribe/runtime")
	require.Empty(t, matching(rt, append(providerDeps, "github.com/asynkron/protoactor-go/cluster", "github.com/asynkron/protoactor-go/remote")...),
		"cluster packages that package runtime depends on")
	require.LessOrEqual(t, len(rt), 200, "non-standard packages package runtime depends on")

	require.Empty(t, matching(deps(t, "github.com/scribe-es/scribe/runtime/cluster"), providerDeps...),
		"provider packages that package runtime/cluster depends on")
	for pkg, own := range map[string]string{
		"automanaged": "github.com/labstack/echo",
		"consul":      "github.com/hashicorp/consul",
		"etcd":        "go.etcd.io/etcd",
	} {
		ds := deps(t, "github.com/scribe-es/scribe/runtime/cluster/"+pkg)
		require.NotEmpty(t, matching(ds, own), "the check sees %s where it is", own)
		var others []string
		for _, p := range matching(ds, providerDeps...) {
			if !strings.HasPrefix(p, own) && p != "github.com/asynkron/protoactor-go/cluster/clusterproviders/"+pkg {
				others = append(others, p)
			}
		}
		require.Empty(t, others, "packages of other providers that %s depends on", pkg)
	}
}
