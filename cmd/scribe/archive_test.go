package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/snapshots"
)

// stored is every event row and tag index row of f's schema, hot and archived
// together, with how often each occurs.
type stored struct {
	events map[string]int // event ID -> rows
	links  map[string]int // "tag/version@commit.seq" -> rows
}

func (f *fixture) stored(t *testing.T) stored {
	t.Helper()
	s := stored{events: map[string]int{}, links: map[string]int{}}
	rows, err := f.pool.Query(t.Context(), strings.ReplaceAll(`SELECT id::text FROM __S__.events UNION ALL SELECT id::text FROM __S__.events_archive`, "__S__", quoteIdent(f.schema)))
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		s.events[id]++
	}
	require.NoError(t, rows.Err())
	rows, err = f.pool.Query(t.Context(), strings.ReplaceAll(`SELECT tag || '/' || version || '@' || commit_xid || '.' || seq FROM __S__.event_tags
		UNION ALL SELECT tag || '/' || version || '@' || commit_xid || '.' || seq FROM __S__.event_tags_archive`, "__S__", quoteIdent(f.schema)))
	require.NoError(t, err)
	for rows.Next() {
		var l string
		require.NoError(t, rows.Scan(&l))
		s.links[l]++
	}
	require.NoError(t, rows.Err())
	return s
}

func quoteIdent(s string) string { return `"` + s + `"` }

// expected is what stored must hold for recs: each event once, each link once.
func expected(recs []journal.Record) stored {
	s := stored{events: map[string]int{}, links: map[string]int{}}
	for _, r := range recs {
		s.events[r.ID.String()]++
		for _, l := range r.Links {
			s.links[fmt.Sprintf("%s/%d@%d.%d", l.Tag, l.Version, r.Position.Commit, r.Position.Seq)]++
		}
	}
	return s
}

// fillMany appends 150 events to each of 20 account streams and 60
// transfers between neighbouring accounts (events in two chains): 156
// versions per account.
func (f *fixture) fillMany(t *testing.T) []journal.Record {
	t.Helper()
	var recs []journal.Record
	for round := range 3 {
		for i := range 20 {
			evs := make([]journal.Event, 50)
			for k := range evs {
				evs[k] = bankEvent(t, bank.MoneyDeposited{AccountID: fmt.Sprint(i), Amount: int64(round*100 + k)})
			}
			res, err := f.journal.Append(t.Context(), evs, journal.AppendOptions{})
			require.NoError(t, err)
			recs = append(recs, res.Records...)
		}
		for i := range 20 {
			ev := bankEvent(t, bank.MoneyTransferred{TransferID: fmt.Sprintf("t%d-%d", round, i), From: fmt.Sprint(i), To: fmt.Sprint((i + 1) % 20), Amount: 1})
			res, err := f.journal.Append(t.Context(), []journal.Event{ev}, journal.AppendOptions{})
			require.NoError(t, err)
			recs = append(recs, res.Records...)
		}
	}
	return recs
}

// buildScribe builds the scribe binary into a temporary directory.
func buildScribe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scribe")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// TestArchiveResumesAfterKill is the crash test: `scribe archive -confirm`
// runs as a process of its own and is killed (SIGKILL) once it reported a
// committed batch; hot and archived rows together then hold every event and
// every stream version exactly once, and so they do after a second run
// finished the job; every chain (hot and archived) verifies.
func TestArchiveResumesAfterKill(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillMany(t)
	want := expected(recs)
	require.Len(t, want.events, 20*150+60)
	bin := buildScribe(t)
	args := []string{"-db", f.url, "-schema", f.schema, "archive", "-policy", "account=keep:10,nosnapshot", "-confirm", "-batch", "10"}

	cmd := exec.CommandContext(t.Context(), bin, args...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.Contains(sc.Text(), "batch 1 committed") {
			break
		}
	}
	killErr := cmd.Process.Kill()
	for sc.Scan() { // drain: lines written before the kill
		seen = append(seen, sc.Text())
	}
	waitErr := cmd.Wait()
	require.NoError(t, killErr, "the run ended before it could be killed; output:\n%s", strings.Join(seen, "\n"))
	var exit *exec.ExitError
	require.True(t, errors.As(waitErr, &exit), "wait: %v", waitErr)
	require.True(t, exit.Sys().(syscall.WaitStatus).Signaled(), "the archive was killed, not finished; output:\n%s", strings.Join(seen, "\n"))
	committed := 0
	for _, l := range seen {
		if strings.Contains(l, " committed: ") {
			committed++
		}
	}
	t.Logf("killed after %d reported batches", committed)

	mid := f.stored(t)
	require.Equal(t, want, mid, "after the kill: every event and stream version exactly once, hot or archived")
	var archived int
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+quoteIdent(f.schema)+`.event_tags_archive`).Scan(&archived))
	require.GreaterOrEqual(t, archived, 10, "at least the reported batch is archived")
	require.Less(t, archived, 20*156-20*10, "the run was cut short")

	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	require.NoError(t, err, "the second run: %s", out)
	require.Contains(t, string(out), "retired ")
	require.Equal(t, want, f.stored(t), "after the second run: still exactly once")
	for i := range 20 {
		sum, err := f.journal.TagSummary(t.Context(), journal.Stream(bank.AccountTag(fmt.Sprint(i))))
		require.NoError(t, err)
		require.Equal(t, sum.Version-10, sum.Cut.Version, "account %d is cut where the policy says", i)
	}
	var hotEvents int
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+quoteIdent(f.schema)+`.events`).Scan(&hotEvents))
	require.LessOrEqual(t, hotEvents, 20*10, "only the kept events are hot")

	res := f.scribe(t, "verify", "-archive")
	require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, fmt.Sprintf("verified 20 streams, %d events: every chain is intact", 20*156))
	res = f.scribe(t, "verify")
	require.Equal(t, exitOK, res.code, res.stdout)
	require.Contains(t, res.stdout, fmt.Sprintf("verified 20 streams, %d events: every chain is intact", 20*10), "hot events from the checkpoints")
}

// TestArchiveCommands: dry-run's tables, a refusal without snapshots, a
// confirmed run, retire-stream, and verify -archive catching an altered
// archived event.
func TestArchiveCommands(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)

	res := f.scribe(t, "archive", "-policy", "account=keep:2")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "give -dry-run to see what would be retired, or -confirm")
	res = f.scribe(t, "archive", "-policy", "account=keep:zero", "-dry-run")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "keep:N needs a whole number")

	res = f.scribe(t, "archive", "-policy", "account=keep:2", "-dry-run")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "PARTITION  TAG")
	require.Contains(t, res.stdout, "REFUSED: no snapshot at or after version 4 (newest: 0)")
	require.Contains(t, res.stdout, "4 stream(s) REFUSED")
	res = f.scribe(t, "archive", "-policy", "account=keep:2", "-confirm")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "archive refused")
	require.Contains(t, res.stderr, "Nothing was retired")

	// With -skip-refused the other streams go; here every stream is refused.
	res = f.scribe(t, "archive", "-policy", "account=keep:2", "-confirm", "-skip-refused")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stderr, "archive: skipping default/account:a: no snapshot at or after version 4")
	require.Contains(t, res.stdout, "retired 0 stream versions of 0 streams")

	st, err := postgres.NewSnapshotStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c", "d"} {
		stream := journal.Stream(bank.AccountTag(id))
		sum, err := f.journal.TagSummary(t.Context(), stream)
		require.NoError(t, err)
		require.NoError(t, st.Save(t.Context(), snapshots.Snapshot{Stream: stream, Version: sum.Version, SchemaVersion: 1, State: []byte(`{}`)}))
	}
	res = f.scribe(t, "archive", "-policy", "account=keep:2", "-dry-run")
	require.Equal(t, exitOK, res.code, res.stderr)
	t.Logf("archive -dry-run:\n%s", res.stdout)
	require.Regexp(t, `default\s+account:a\s+keep:2\s+6\s+0\s+4\s+4\s+6\s+ok`, res.stdout)
	require.Regexp(t, `account\s+4\s+13\s+0`, res.stdout)
	require.Contains(t, res.stdout, "13 stream versions of 4 streams would be retired")

	res = f.scribe(t, "archive", "-policy", "account=keep:2", "-confirm", "-batch", "5")
	require.Equal(t, exitOK, res.code, res.stderr)
	t.Logf("archive -confirm:\n%s%s", res.stderr, res.stdout)
	require.Contains(t, res.stdout, "retired 13 stream versions of 4 streams in 3 batches")
	require.Contains(t, res.stderr, "archive: batch 3 committed: 13/13 versions (100%)")
	res = f.scribe(t, "archive", "-policy", "account=keep:2", "-dry-run")
	require.Contains(t, res.stdout, "nothing to retire")

	res = f.scribe(t, "stream", "show", "account:a")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stderr, "versions 1 to 4 of default/account:a are archived (show them with -archive); showing the stream from version 5")
	require.Contains(t, res.stdout, "default/account:a version 5 ")
	require.NotContains(t, res.stdout, "version 4 ")
	res = f.scribe(t, "stream", "show", "-archive", "-limit", "1", "account:a")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "default/account:a version 1 ")
	res = f.scribe(t, "stream", "show", "-from", "2", "account:a")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "is archived up to version 4")

	var rows []map[string]any
	res = f.scribe(t, "retire-stream", "account:d")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "-confirm would close it for good")
	res = f.scribe(t, "retire-stream", "-confirm", "account:d")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "retired stream default/account:d at version 5: appends to it now fail; 2 versions moved")
	_, err = f.journal.Append(t.Context(), []journal.Event{bankEvent(t, bank.MoneyDeposited{AccountID: "d", Amount: 1})}, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrStreamRetired)

	res = f.scribe(t, "tags", "account")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `TAG\s+VERSION\s+CUT\s+FIRST WRITE`, res.stdout)
	require.Regexp(t, `account:a\s+6\s+4\s`, res.stdout)
	require.Regexp(t, `account:d\s+5\s+5 \(retired\)\s`, res.stdout)
	rows = jsonLines(t, f.scribe(t, "tags", "-json", "account").stdout)
	require.Len(t, rows, 4)
	require.Equal(t, map[string]any{"version": float64(4), "hash": linkHash(nth(t, recs, bank.AccountTag("a"), 3), "account:a"), "position": nth(t, recs, bank.AccountTag("a"), 3).Position.String()}, rows[0]["cut"])
	require.Equal(t, true, rows[3]["retired"])

	res = f.scribe(t, "verify", "-archive", "-json")
	require.Equal(t, exitOK, res.code, res.stdout)
	require.JSONEq(t, `{"streams":4,"events":21,"broken":0,"unchainedEvents":0,"erasedEvents":0}`, res.stdout)

	// An altered archived event: verify (hot only) passes, -archive finds it.
	victim := nth(t, recs, bank.AccountTag("b"), 1)
	require.EqualValues(t, 1, f.exec(t, `UPDATE __S__.events_archive SET data = convert_to('{"accountId":"b","amount":1}', 'UTF8') WHERE id = $1`, victim.ID))
	res = f.scribe(t, "verify")
	require.Equal(t, exitOK, res.code, res.stdout)
	res = f.scribe(t, "verify", "-archive")
	requireBroken(t, res, "default/account:b", 2, victim.Position)
	require.Contains(t, res.stdout, "does not match the event's content")

	res = f.scribe(t, "archive", "-policy", "account=keep:1", "-dry-run", "-json")
	require.Equal(t, exitOK, res.code, res.stderr)
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		rows = append(rows, m)
	}
	require.NotEmpty(t, rows)
}

// TestArchiveSelectorsMustMatch: a -policy group or a -partition that
// matches no stream (a typo in a scheduled job) exits 1 naming it, with
// -confirm and -dry-run, and retires nothing, even beside a group that
// matches; a policy that matches but has nothing due says so and exits 0.
func TestArchiveSelectorsMustMatch(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.fillBank(t)
	for _, mode := range []string{"-confirm", "-dry-run"} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"-policy", "acount=keep:1,nosnapshot"}, `-policy group "acount" matches no stream in any partition, so nothing was retired`},
			{[]string{"-policy", "acount=keep:1,nosnapshot", "-policy", "account=keep:1,nosnapshot"}, `-policy group "acount" matches no stream in any partition`},
			{[]string{"-policy", "account:=keep:1,nosnapshot"}, `-policy group "account:" matches no stream`},
			{[]string{"-partition", "nosuch", "-policy", "account=keep:1,nosnapshot"}, `-partition "nosuch" matches no stream, so nothing was retired`},
			{[]string{"-partition", "nosuch"}, `-partition "nosuch" matches no stream`},
			{[]string{"-partition", "default", "-policy", "acount=keep:1,nosnapshot"}, `-policy group "acount" matches no stream in partition "default"`},
		} {
			res := f.scribe(t, append([]string{"archive", mode}, tc.args...)...)
			require.Equal(t, exitFailure, res.code, "%s %v: stdout %s stderr %s", mode, tc.args, res.stdout, res.stderr)
			require.Contains(t, res.stderr, tc.want, "%s %v", mode, tc.args)
			require.NotContains(t, res.stdout, "retired 0", "%s %v", mode, tc.args)
		}
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		sum, err := f.journal.TagSummary(t.Context(), journal.Stream(bank.AccountTag(id)))
		require.NoError(t, err)
		require.Zero(t, sum.Cut.Version, "account %s: nothing was retired", id)
	}

	res := f.scribe(t, "archive", "-confirm", "-policy", "account=keep:100,nosnapshot")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "nothing to retire: every stream the policy selects is within its rule")
	res = f.scribe(t, "archive", "-confirm", "-partition", "default", "-policy", "account=keep:100,nosnapshot")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "nothing to retire")

	res = f.scribe(t, "retire-stream", "-confirm", "account:nosuch")
	require.Equal(t, exitFailure, res.code, res.stdout)
	require.Contains(t, res.stderr, "stream default/account:nosuch has no events, so there is nothing to retire")
	res = f.scribe(t, "retire-stream", "-partition", "nosuch", "account:a")
	require.Equal(t, exitFailure, res.code, res.stdout)
	require.Contains(t, res.stderr, "stream nosuch/account:a has no events")
}

// TestArchiveStoppedSaysWhatWasRetired: when a stream's snapshot
// disappears while the archive runs, the run stops at that stream and its
// error says how many versions the batches before it retired (they stay
// retired), never "Nothing was retired".
func TestArchiveStoppedSaysWhatWasRetired(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.fillBank(t)
	st, err := postgres.NewSnapshotStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c", "d"} {
		stream := journal.Stream(bank.AccountTag(id))
		sum, err := f.journal.TagSummary(t.Context(), stream)
		require.NoError(t, err)
		require.NoError(t, st.Save(t.Context(), snapshots.Snapshot{Stream: stream, Version: sum.Version, SchemaVersion: 1, State: []byte(`{}`)}))
	}
	plan, err := f.admin.PlanArchive(t.Context(), pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{"account": {KeepLast: 1}}})
	require.NoError(t, err)
	require.Empty(t, plan.Refused())
	require.Equal(t, uint64(17), plan.Events())
	require.EqualValues(t, 1, f.exec(t, `DELETE FROM __S__.snapshots WHERE tag = 'account:c'`))

	var stdout, stderr strings.Builder
	e := &env{ctx: t.Context(), stdout: &stdout, stderr: &stderr, opts: &options{}}
	err = runArchive(e, &store{pool: f.pool, journal: f.journal, admin: f.admin}, plan, 2, false)
	require.ErrorIs(t, err, journal.ErrSnapshotRequired)
	t.Logf("%v", err)
	var retired uint64
	for _, id := range []string{"a", "b", "c", "d"} {
		sum, serr := f.journal.TagSummary(t.Context(), journal.Stream(bank.AccountTag(id)))
		require.NoError(t, serr)
		retired += sum.Cut.Version
	}
	require.Positive(t, retired, "batches before the run reached c committed")
	require.Less(t, retired, uint64(17))
	require.NotContains(t, err.Error(), "Nothing was retired")
	require.Contains(t, err.Error(), "stream default/account:c no longer has a snapshot at or after version 4 (newest now: 0)")
	require.Regexp(t, fmt.Sprintf(`the \d+ batches committed before it retired %d of 17 versions, which stay retired`, retired), err.Error())
}
