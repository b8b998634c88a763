package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/snapshots"
)

// jsonLines decodes every line of out as a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "line %q", line)
		rows = append(rows, m)
	}
	return rows
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	run := func(env map[string]string, args ...string) result {
		var out, errOut strings.Builder
		code := runWith(t.Context(), args, &out, &errOut, func(k string) string { return env[k] })
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", nil, nil, "usage: scribe"},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown subcommand", nil, []string{"migrate", "down"}, `unknown command "migrate down"`},
		{"unknown flag", nil, []string{"verify", "-bogus"}, "flag provided but not defined: -bogus"},
		{"no database", nil, []string{"streams", "list"}, "no database given; pass -db"},
		{"bad URL", nil, []string{"-db", "postgres://%zz", "verify"}, "the database URL is not valid"},
		{"stray argument", map[string]string{EnvDatabaseURL: "postgres://x@127.0.0.1:1/db"}, []string{"verify", "extra"}, `unexpected argument "extra"`},
		{"stream show without tag", nil, []string{"stream", "show"}, "give exactly one stream tag"},
		{"tags without group", nil, []string{"tags"}, "give exactly one tag group"},
		{"events without type", nil, []string{"events"}, "name at least one event type with -type"},
		{"events bad time", nil, []string{"events", "-type", "X", "-since", "noon"}, `-since "noon" is not a time`},
		{"events empty range", nil, []string{"events", "-type", "X", "-since", "2h", "-until", "3h"}, "is not before -until"},
		{"prune keep 0", nil, []string{"snapshots", "prune"}, "at least 1 (a stream's newest snapshot is never deleted)"},
		{"negative limit", nil, []string{"streams", "list", "-limit", "-1"}, "-limit -1 is negative"},
		{"no workers", nil, []string{"verify", "-workers", "0"}, "-workers 0: give at least 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := run(c.env, c.args...)
			require.Equal(t, exitUsage, res.code, "stderr:\n%s", res.stderr)
			require.Contains(t, res.stderr, c.want)
			require.Empty(t, res.stdout)
		})
	}
	res := run(nil, "help")
	require.Equal(t, exitOK, res.code)
	require.Contains(t, res.stderr, "snapshots prune")
	res = run(nil, "verify", "-h")
	require.Equal(t, exitOK, res.code)
	require.Contains(t, res.stderr, "usage: scribe verify")
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	code := runWith(t.Context(), []string{"-db", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", "streams", "list"}, &out, &errOut, func(string) string { return "" })
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut.String(), "cannot reach the database at nobody@127.0.0.1:1/none")
	require.Contains(t, errOut.String(), "check -db or SCRIBE_DATABASE_URL")
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	f := setup(t, false)

	res := f.scribe(t, "streams", "list")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "has no Scribe tables; run `scribe migrate up`")

	res = f.scribe(t, "migrate", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "0001_init.sql")
	rep, err := postgres.MigrationStatus(t.Context(), f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Pending)
	require.Equal(t, len(rep.Pending), strings.Count(res.stdout, " pending "), "every embedded migration is pending")
	require.Contains(t, res.stdout, "has no Scribe tables; run `scribe migrate up`")

	res = f.scribe(t, "migrate", "up")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "migrated from version 0 to")
	res = f.scribe(t, "migrate", "up")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "is up to date at version")

	res = f.scribe(t, "-json", "migrate", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	for _, row := range jsonLines(t, res.stdout) {
		require.Equal(t, "applied", row["state"])
		require.NotNil(t, row["appliedAt"])
		if row["version"] == float64(5) {
			require.Equal(t, float64(4), row["compatibleFrom"], "0005 lets processes of version 4 keep running")
		}
	}
	res = f.scribe(t, "migrate", "status")
	require.Regexp(t, `(?m)^5\s+0005_retention.sql\s+applied\s+\S+\s+v4$`, res.stdout)

	// A schema migrated by a newer Scribe is refused, by status and up alike.
	f.exec(t, `INSERT INTO __S__.schema_migrations (version, name) VALUES (9999, '9999_future.sql')`)
	for _, args := range [][]string{{"migrate", "status"}, {"migrate", "up"}, {"streams", "list"}} {
		res = f.scribe(t, args...)
		require.Equal(t, exitFailure, res.code, "%v", args)
		require.Contains(t, res.stderr, "is at version 9999, newer than this scribe knows", "%v", args)
	}
}

func TestStreamsAndShow(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	other := bankEvent(t, bank.AccountOpened{AccountID: "z"})
	other.Metadata.Partition = "tenant-b"
	_, err := f.journal.Append(t.Context(), []journal.Event{other}, journal.AppendOptions{})
	require.NoError(t, err)

	res := f.scribe(t, "streams", "list")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "5 streams, 22 events in them")
	lines := strings.Split(res.stdout, "\n")
	require.Regexp(t, `^PARTITION\s+TAG\s+VERSION\s+FIRST WRITE\s+LAST WRITE\s+LAST POSITION$`, lines[0])
	require.Regexp(t, `^default\s+account:a\s+6\s+\S+\s+\S+\s+`+last(recs, "account:a").Position.String()+`$`, lines[1])
	require.Contains(t, lines[5], "tenant-b")

	res = f.scribe(t, "streams", "list", "-partition", "default", "-tag-prefix", "account:c", "-json")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, "account:c", rows[0]["tag"])
	require.EqualValues(t, 5, rows[0]["version"])
	require.Equal(t, linkHash(last(recs, "account:c"), "account:c"), rows[0]["headHash"])

	res = f.scribe(t, "streams", "list", "-limit", "2", "-json")
	require.Len(t, jsonLines(t, res.stdout), 2)

	res = f.scribe(t, "stream", "show", "account:b")
	require.Equal(t, exitOK, res.code, res.stderr)
	first := nth(t, recs, "account:b", 0)
	require.Contains(t, res.stdout, "default/account:b version 1  position "+first.Position.String())
	require.Contains(t, res.stdout, `data      {"accountId":"b"}`)
	require.Contains(t, res.stdout, `"userId":"teller"`)
	require.Equal(t, 5, strings.Count(res.stdout, "  id  "))

	res = f.scribe(t, "stream", "show", "-from", "5", "-json", "account:b")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows = jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, bank.TypeMoneyTransferred, rows[0]["type"])
	require.Equal(t, map[string]any{"transferId": "t5", "from": "b", "to": "d", "amount": float64(60)}, rows[0]["data"])

	res = f.scribe(t, "stream", "show", "-partition", "tenant-b", "account:z")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "tenant-b/account:z version 1")

	res = f.scribe(t, "stream", "show", "account:nobody")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "stream default/account:nobody has no events; check the tag and -partition")

	res = f.scribe(t, "tags", "account")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "4 tags in group \"account\" of partition default, 21 events")
	require.Contains(t, res.stdout, linkHash(last(recs, "account:d"), "account:d")[:16])
	res = f.scribe(t, "tags", "-json", "-partition", "tenant-b", "account:")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows = jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, "account:z", rows[0]["tag"])
}

// linkHash returns r's hash in tag's chain, in hex.
func linkHash(r journal.Record, tag journal.Tag) string {
	for _, l := range r.Links {
		if l.Tag == tag {
			return l.Hash.String()
		}
	}
	return ""
}

func TestEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	var transfers []journal.Record
	for _, r := range recs {
		if r.Type == bank.TypeMoneyTransferred {
			transfers = append(transfers, r)
		}
	}

	res := f.scribe(t, "events", "-type", bank.TypeMoneyTransferred)
	require.Equal(t, exitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 6)
	require.True(t, strings.HasPrefix(lines[0], transfers[0].Position.String()+" "), lines[0])
	require.Contains(t, res.stderr, "6 events")

	res = f.scribe(t, "events", "-type", bank.TypeMoneyTransferred+","+bank.TypeMoneyWithdrawn, "-desc", "-limit", "2", "-json")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 2)
	require.Equal(t, bank.TypeMoneyWithdrawn, rows[0]["type"], "newest first")
	require.Equal(t, transfers[5].Position.String(), rows[1]["position"])

	res = f.scribe(t, "events", "-type", bank.TypeMoneyDeposited, "-since", "1h", "-until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Len(t, strings.Split(strings.TrimSpace(res.stdout), "\n"), 4)
	res = f.scribe(t, "events", "-type", bank.TypeMoneyDeposited, "-until", "2000-01-01")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Empty(t, res.stdout)
	require.Contains(t, res.stderr, "0 events")
}

func TestLeases(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	node, err := f.journal.OpenNode(ctx, "node-a", time.Minute)
	require.NoError(t, err)
	lease, err := f.journal.Acquire(ctx, node, journal.Stream("account:a"), time.Second)
	require.NoError(t, err)
	_, err = f.journal.Acquire(ctx, node, journal.StreamID{Partition: "tenant-b", Tag: "account:b"}, time.Second)
	require.NoError(t, err)
	released, err := f.journal.Acquire(ctx, node, journal.Stream("account:gone"), time.Second)
	require.NoError(t, err)
	require.NoError(t, f.journal.Release(ctx, released))
	closed, err := f.journal.OpenNode(ctx, "node-b", time.Minute)
	require.NoError(t, err)
	_, err = f.journal.Acquire(ctx, closed, journal.Stream("account:c"), time.Second)
	require.NoError(t, err)
	require.NoError(t, f.journal.CloseNode(ctx, closed))

	res := f.scribe(t, "leases")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "2 leases held (fencing other writers), 1 lapsed (free for the next node); 2 node sessions, 1 live",
		"a lease whose node session closed is not held")
	require.Regexp(t, `default\s+account:a\s+node-a\s+1\s+`+itoa(lease.Epoch)+`\s+\S+Z\s+\S+Z\s+live`, res.stdout)
	require.Regexp(t, `default\s+account:c\s+node-b\s+1\s+\d+\s+\S+Z\s+\S+Z\s+lapsed`, res.stdout)
	require.NotContains(t, res.stdout, "account:gone", "released leases are not held")
	require.Regexp(t, `node-a\s+1\s+1m0s\s+\S+Z\s+\S+Z\s+live\s+2`, res.stdout)
	require.Regexp(t, `node-b\s+1\s+1m0s\s+\S+Z\s+\S+Z\s+closed\s+1`, res.stdout)

	res = f.scribe(t, "leases", "-partition", "tenant-b", "-json")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 3, "one lease and two nodes")
	require.Equal(t, "lease", rows[0]["kind"])
	require.Equal(t, "account:b", rows[0]["tag"])
	since, err := time.Parse(time.RFC3339Nano, rows[0]["since"].(string))
	require.NoError(t, err)
	until, err := time.Parse(time.RFC3339Nano, rows[0]["until"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, since.Add(time.Minute), until, 10*time.Second, "until is the node session's expiry")
	require.Equal(t, "node", rows[1]["kind"])
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func TestSnapshots(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	st, err := postgres.NewSnapshotStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	save := func(stream journal.StreamID, v uint64) {
		require.NoError(t, st.Save(ctx, snapshots.Snapshot{Stream: stream, Version: v, SchemaVersion: 1, State: []byte(`{"balance":1}`)}))
	}
	a, b := journal.Stream("account:a"), journal.StreamID{Partition: "tenant-b", Tag: "account:b"}
	for v := uint64(1); v <= 4; v++ {
		save(a, v*10)
	}
	save(b, 7)

	res := f.scribe(t, "snapshots", "list")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `default\s+account:a\s+4\s+10\s+40\s+\S+Z\s+52`, res.stdout)
	require.Contains(t, res.stdout, "5 snapshots of 2 streams")

	res = f.scribe(t, "snapshots", "list", "-tag", "account:a", "-json")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Len(t, jsonLines(t, res.stdout), 4)

	res = f.scribe(t, "snapshots", "prune", "-keep", "0")
	require.Equal(t, exitUsage, res.code)

	res = f.scribe(t, "snapshots", "prune", "-keep", "2")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "deleted 2 snapshots of 1 streams; each stream keeps its newest 2")
	res = f.scribe(t, "snapshots", "prune", "-keep", "1", "-json")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.JSONEq(t, `{"keep":1,"streams":1,"deleted":1}`, res.stdout)

	infos, err := st.List(ctx, a)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, uint64(40), infos[0].Version, "the newest snapshot is kept")
	infos, err = st.List(ctx, b)
	require.NoError(t, err)
	require.Len(t, infos, 1, "a stream with one snapshot keeps it")
}
