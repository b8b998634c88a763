package main

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// TestLookupVerbs: an event by ID, the events of a correlation ID, the
// event types with their counts, and a stream's newest events.
func TestLookupVerbs(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	ctx := t.Context()
	var correlated []journal.Record
	for _, id := range []string{"x", "y"} {
		ev := bankEvent(t, bank.AccountOpened{AccountID: id})
		ev.Metadata.CorrelationID = "req-42"
		res, err := f.journal.Append(ctx, []journal.Event{ev}, journal.AppendOptions{})
		require.NoError(t, err)
		correlated = append(correlated, res.Records...)
	}

	target := nth(t, recs, "account:b", 2)
	res := f.scribe(t, "event", target.ID.String())
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "position "+target.Position.String())
	require.Contains(t, res.stdout, "  id        "+target.ID.String())
	require.Contains(t, res.stdout, "account:b v3")
	res = f.scribe(t, "-json", "event", target.ID.String())
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, target.Type, rows[0]["type"])
	res = f.scribe(t, "event", uuid.NewString())
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "no event with ID")
	res = f.scribe(t, "event", "not-a-uuid")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, `"not-a-uuid" is not an event ID`)

	res = f.scribe(t, "correlation", "req-42")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, `2 events with correlation ID "req-42"`)
	require.Less(t, strings.Index(res.stdout, correlated[0].ID.String()), strings.Index(res.stdout, correlated[1].ID.String()), "feed order")
	res = f.scribe(t, "-json", "correlation", "-limit", "1", "req-42")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Len(t, jsonLines(t, res.stdout), 1)
	res = f.scribe(t, "correlation", "req-43")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, `no event carries correlation ID "req-43"`)

	counts := map[string]int{}
	for _, r := range append(recs, correlated...) {
		counts[r.Type]++
	}
	res = f.scribe(t, "types")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^`+bank.TypeAccountOpened+`\s+6\s+\S+Z\s+\S+Z\s+\S+\s+`+correlated[1].Position.String()+`$`, res.stdout)
	require.Contains(t, res.stdout, "4 event types, 17 events")
	res = f.scribe(t, "-json", "types")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows = jsonLines(t, res.stdout)
	require.Len(t, rows, len(counts))
	for _, row := range rows {
		require.EqualValues(t, counts[row["type"].(string)], row["count"], "%v", row["type"])
	}

	// account:a has 6 events: -last 2 shows versions 5 and 6, oldest first.
	res = f.scribe(t, "stream", "show", "-last", "2", "account:a")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 2, strings.Count(res.stdout, "  id  "))
	require.Less(t, strings.Index(res.stdout, "account:a version 5"), strings.Index(res.stdout, "account:a version 6"))
	require.NotContains(t, res.stdout, "account:a version 4")
	res = f.scribe(t, "stream", "show", "-last", "50", "account:a")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Equal(t, 6, strings.Count(res.stdout, "  id  "), "more than the stream holds shows all of it")
	res = f.scribe(t, "stream", "show", "-last", "2", "-from", "3", "account:a")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "cannot be combined with -from or -limit")
}

// TestSchemaFromEnvironment: SCRIBE_SCHEMA stands in for -schema, and -schema
// still wins.
func TestSchemaFromEnvironment(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.fillBank(t)
	run := func(env map[string]string, args ...string) result {
		var out, errOut strings.Builder
		code := runWith(t.Context(), args, &out, &errOut, func(k string) string { return env[k] })
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
	env := map[string]string{EnvDatabaseURL: f.url, EnvSchema: f.schema}
	res := run(env, "streams", "list")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "4 streams, 21 events in them")
	res = run(env, "-schema", "no_such_schema_here", "streams", "list")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, `schema "no_such_schema_here" has no Scribe tables`)
}

// TestHelpEverywhere: -h works on a group of commands as on a command, and
// no flag's help text holds a back-quoted phrase (the flag package prints
// it as the flag's argument name).
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	run := func(args ...string) result {
		var out, errOut strings.Builder
		code := runWith(t.Context(), args, &out, &errOut, func(string) string { return "" })
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
	for _, group := range []string{"migrate", "projections", "projections dead-letters", "snapshots", "streams", "stream"} {
		res := run(append(strings.Fields(group), "-h")...)
		require.Equal(t, exitOK, res.code, "%s -h: %s", group, res.stderr)
		require.Contains(t, res.stderr, "usage: scribe "+group+" <command>")
		res = run(strings.Fields(group)...)
		require.Equal(t, exitUsage, res.code, "%s without a command", group)
	}
	for _, c := range commands() {
		res := run(append(strings.Fields(c.name), "-h")...)
		require.Equal(t, exitOK, res.code, "%s -h: %s", c.name, res.stderr)
		require.Contains(t, res.stderr, "usage: scribe "+c.name)
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		(&options{}).register(fs)
		if c.flags != nil {
			c.flags(fs)
		}
		fs.VisitAll(func(fl *flag.Flag) {
			require.NotContains(t, fl.Usage, "`", "scribe %s -%s: a back-quoted phrase becomes the argument name in -h", c.name, fl.Name)
		})
	}
}

// TestMigrateDryRun: -dry-run prints the SQL and changes nothing; the printed
// script, run as it is, migrates the schema exactly as migrate up does.
func TestMigrateDryRun(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	res := f.scribe(t, "migrate", "up", "-dry-run")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "CREATE TABLE")
	require.Contains(t, res.stdout, "-- 0001_init.sql")
	require.Contains(t, res.stderr, "nothing applied")
	rep, err := postgres.MigrationStatus(t.Context(), f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	require.Zero(t, rep.Current, "a dry run changes nothing")

	_, err = f.pool.Exec(t.Context(), res.stdout)
	require.NoError(t, err, "the printed script runs as it is")
	rep, err = postgres.MigrationStatus(t.Context(), f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	require.Equal(t, rep.Latest, rep.Current)
	require.Empty(t, rep.Pending)
	res = f.scribe(t, "migrate", "up")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "is up to date")
	res = f.scribe(t, "migrate", "up", "-dry-run")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Empty(t, res.stdout)
	require.Contains(t, res.stderr, "nothing to run")
}

// TestProjectionsPauseResume: pause fences the holder and shows the state;
// resume lets runners claim it again.
func TestProjectionsPauseResume(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	ctx := t.Context()
	st, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	k := projection.Key{Name: "accounts", Version: 1}
	lease, err := claimOne(ctx, st, k, "bank-1")
	require.NoError(t, err)
	require.NoError(t, commitOne(ctx, st, lease, lease.Checkpoint, recs[:3], func(context.Context, pgx.Tx) error { return nil }))

	res := f.scribe(t, "projections", "pause", "accounts")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "-version")
	res = f.scribe(t, "projections", "pause", "-version", "1", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "projection accounts@1 paused at checkpoint "+recs[2].Position.String()+" (state paused)")
	require.ErrorIs(t, commitOne(ctx, st, lease, recs[2].Position, recs[3:4], func(context.Context, pgx.Tx) error { return nil }), projection.ErrFenced,
		"the holder's lease is fenced")
	_, err = claimOne(ctx, st, k, "bank-2")
	require.ErrorIs(t, err, projection.ErrPaused)
	res = f.scribe(t, "projections", "status")
	require.Regexp(t, `accounts\s+1\s+paused\s`, res.stdout)

	res = f.scribe(t, "projections", "resume", "-version", "1", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "resumed (state standby)")
	lease, err = claimOne(ctx, st, k, "bank-2")
	require.NoError(t, err)
	require.Equal(t, recs[2].Position, lease.Checkpoint, "it continues from its checkpoint")

	res = f.scribe(t, "projections", "pause", "-version", "9", "accounts")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "is unknown to schema")
}
