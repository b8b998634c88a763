package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/scribe-es/scribe/"

// deps lists pkg's dependencies inside the module.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	var in []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) {
			in = append(in, strings.TrimPrefix(p, module))
		}
	}
	return in
}

// Each package reaches none of the packages above it.
func TestNoImportRunsUpTheLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	above := map[string][]string{
		"journal":                     {"snapshots", "erasure", "tagconsistency", "actors", "runtime", "projection", "postgres"},
		"journal/memory":              {"snapshots", "erasure", "tagconsistency", "actors", "runtime", "projection", "postgres"},
		"journal/backend":             {"snapshots", "erasure", "tagconsistency", "actors", "runtime", "projection", "postgres"},
		"journal/partitioned":         {"snapshots", "erasure", "tagconsistency", "actors", "runtime", "projection", "postgres"},
		"snapshots":                   {"journal/partitioned", "erasure", "tagconsistency", "actors", "runtime", "projection", "postgres"},
		"snapshots/routed":            {"erasure", "tagconsistency", "actors", "runtime", "projection", "postgres"},
		"erasure":                     {"tagconsistency", "actors", "runtime", "projection", "postgres"},
		"tagconsistency":              {"snapshots", "actors", "runtime", "projection", "postgres"},
		"actors":                      {"runtime", "projection", "postgres"},
		"internal/idempotency":        {"actors", "tagconsistency", "runtime", "projection", "postgres"},
		"internal/telemetry":          {"actors", "tagconsistency", "runtime", "projection", "postgres"},
		"internal/usercode":           {"actors", "tagconsistency", "runtime", "projection", "postgres"},
		"internal/ordered":            {"actors", "tagconsistency", "runtime", "projection", "postgres"},
		"internal/backoff":            {"journal", "snapshots", "erasure", "actors", "tagconsistency", "runtime", "projection", "postgres"},
		"internal/metricread":         {"journal", "snapshots", "erasure", "actors", "tagconsistency", "runtime", "projection", "postgres"},
		"runtime/internal/membership": {"runtime", "projection", "postgres"},
		"postgres/internal/pgschema":  {"postgres", "snapshots", "erasure", "tagconsistency", "actors", "runtime", "projection"},
		"postgres":                    {"postgres/pgadmin", "tagconsistency", "actors", "runtime"},
		"postgres/pgtrace":            {"postgres", "journal", "snapshots", "erasure", "tagconsistency", "actors", "runtime", "projection"},
	}
	for pkg, forbidden := range above {
		for _, d := range deps(t, pkg) {
			for _, f := range forbidden {
				if d != pkg && (d == f || strings.HasPrefix(d, f+"/")) {
					t.Errorf("%s depends on %s, which sits above it", pkg, d)
				}
			}
		}
	}
}
