package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// release is a build of Scribe that landed on main: the rolling-upgrade
// policy (README "Upgrading") promises that its processes keep running next
// to the current build, against a schema the current build migrated.
type release struct {
	name   string
	commit string
	schema int // the schema version its migrations reach
	// restarts says whether a process of the release can start (run its own
	// Migrate) against the current schema: releases from before the
	// compatibility floor refuse any newer schema.
	restarts bool
}

// releases are the builds before this one that the policy covers: the one
// that landed with migration 0005 (stop 34); it predates the compatibility
// floor, so restarted against schema 6 (0006_dead_letter_replay.sql) it
// refuses. When a build lands, add it here (its commit on main) and drop
// releases more than one schema version behind the current one.
var releases = []release{
	{name: "schema-5", commit: "fa5ea0fe64524443d93d6670ba4bd4746923b686", schema: 5, restarts: false},
}

// buildRelease compiles the bank of commit from this clone's history into a
// temporary directory (git archive, go build), or skips when the history is
// not here (a shallow clone).
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the rolling-upgrade test builds the previous releases from this clone's history")
	}
	full, err := exec.Command("git", "rev-parse", "--verify", "--quiet", commit+"^{commit}").Output()
	if err != nil {
		t.Skipf("commit %s is not in this clone's history (a shallow clone?): the rolling-upgrade test builds the previous releases from it", commit)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err)
	dir := t.TempDir()
	tarball := filepath.Join(dir, "src.tar")
	archive := exec.Command("git", "archive", "-o", tarball, strings.TrimSpace(string(full)))
	archive.Dir = strings.TrimSpace(string(top)) // from a subdirectory, git archive takes only that subdirectory
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "git archive: %s", out)
	src := filepath.Join(dir, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	out, err = exec.Command("tar", "-xf", tarball, "-C", src).CombinedOutput()
	require.NoError(t, err, "tar: %s", out)

	bin := filepath.Join(dir, "bank")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./examples/bank")...)
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	start := time.Now()
	out, err = build.CombinedOutput()
	require.NoError(t, err, "go build of release %s: %s", commit, out)
	t.Logf("built the bank of release %s in %s", commit, time.Since(start).Round(time.Millisecond))
	return bin
}

// TestRollingUpgradeFromPreviousRelease runs a rolling upgrade from each of
// the previous releases: a process of the release serves on its schema; the
// current build migrates the schema while it runs; a current process starts
// next to it and both serve deposits and transfers on their own accounts at
// once; the old process stops gracefully and the current one takes its
// accounts over. Every acknowledged deposit is in the balances, money is
// conserved, the read model agrees and every account's hash chain verifies.
// A process of the release restarted mid-roll starts (schema 5) or is refused
// with the error that says to upgrade (schema 4, from before the policy).
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds two previous releases")
	}
	current := buildBinary(t)
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) {
			rollingUpgrade(t, rel, current)
		})
	}
}

func rollingUpgrade(t *testing.T, rel release, current string) {
	old := buildRelease(t, rel.commit)
	pool, schema := pgSchema(t)
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	args := func(node string) []string {
		return []string{"-addr", "127.0.0.1:0", "-db", dbURL, "-schema", schema, "-node", node}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()

	p1 := startProcess(t, old, args("old")...)
	v, err := postgres.SchemaVersion(ctx, pool, postgres.Config{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, rel.schema, v, "the release migrated the schema to its own version")
	cOld := &loadClient{base: "http://" + p1.addr, http: client}

	var mu sync.Mutex
	deposited := int64(0)
	deposit := func(c *loadClient, id string, amount int64) error {
		if _, err := c.post(ctx, "/accounts/"+id+"/deposit", map[string]any{"amount": amount}, http.StatusOK); err != nil {
			return err
		}
		mu.Lock()
		deposited += amount
		mu.Unlock()
		return nil
	}
	group := func(prefix string) []string {
		ids := make([]string, 4)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return ids
	}
	oldIDs, newIDs := group("old"), group("new")
	for _, id := range oldIDs {
		_, err := cOld.post(ctx, "/accounts", map[string]any{"id": id}, http.StatusCreated)
		require.NoError(t, err)
		require.NoError(t, deposit(cOld, id, 1_000))
	}

	// The current build migrates the schema while the release serves.
	require.NoError(t, postgres.Migrate(ctx, pool, postgres.Config{Schema: schema}))
	v, err = postgres.SchemaVersion(ctx, pool, postgres.Config{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, postgres.LatestVersion(), v)

	p2 := startProcess(t, current, args("new")...)
	cNew := &loadClient{base: "http://" + p2.addr, http: client}
	for _, id := range newIDs {
		_, err := cNew.post(ctx, "/accounts", map[string]any{"id": id}, http.StatusCreated)
		require.NoError(t, err)
		require.NoError(t, deposit(cNew, id, 1_000))
	}

	// Both serve at once, each on its own accounts: deposits and transfers.
	work := func(c *loadClient, ids []string, seed int) error {
		for i := range 40 {
			a, b := ids[(seed+i)%len(ids)], ids[(seed+i+1)%len(ids)]
			if err := deposit(c, a, int64(i+1)); err != nil {
				return err
			}
			if _, err := c.post(ctx, "/transfers", map[string]any{"from": a, "to": b, "amount": i + 1}, http.StatusOK); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w%2 == 0 {
				errs[w] = work(cOld, oldIDs, w)
			} else {
				errs[w] = work(cNew, newIDs, w)
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		require.NoError(t, err, "worker %d (on the %s process)", w, map[bool]string{true: "old", false: "new"}[w%2 == 0])
	}

	// The roll: the release stops gracefully, the current build takes over
	// its accounts (reading the events the release wrote, continuing their
	// chains).
	require.NoError(t, p1.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p1.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the release did not exit within 30 s of SIGTERM:\n%s", p1.log())
	}
	require.NoError(t, p1.err, "the release's graceful shutdown:\n%s", p1.log())
	for _, id := range oldIDs {
		require.NoError(t, deposit(cNew, id, 100))
	}

	// A process of the release restarted mid-roll.
	if rel.restarts {
		p3 := startProcess(t, old, args("old-again")...)
		require.NoError(t, p3.cmd.Process.Signal(syscall.SIGTERM))
		<-p3.exited
		require.NoError(t, p3.err, "the release restarted against the current schema:\n%s", p3.log())
	} else {
		restart := exec.Command(old, args("old-again")...)
		restart.Env = append(os.Environ(), "SCRIBE_DATABASE_URL=", "OTEL_EXPORTER_OTLP_ENDPOINT=")
		out, err := restart.CombinedOutput()
		require.Error(t, err, "a release from before the compatibility floor refuses a newer schema")
		require.Contains(t, string(out), fmt.Sprintf("is at version %d, newer than this build's %d; upgrade the program", postgres.LatestVersion(), rel.schema))
	}

	all := append(append([]string(nil), oldIDs...), newIDs...)
	inv, err := checkInvariants(ctx, cNew, all, deposited)
	require.NoError(t, err)
	require.Empty(t, inv.Problems)

	j, err := postgres.NewJournal(pool, postgres.Config{Schema: schema})
	require.NoError(t, err)
	defer func() { _ = j.Close() }()
	for _, id := range all {
		n, err := journal.VerifyStream(ctx, j, journal.Stream(journal.Tag("account:"+id)))
		require.NoError(t, err, "the chain of account %s, written by both builds", id)
		require.Positive(t, n)
	}
	t.Logf("release %s (schema %d) and the current build (schema %d) served side by side: %d accounts, %d deposited, every chain verifies", rel.commit, rel.schema, postgres.LatestVersion(), len(all), deposited)
}
