package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgxpool's background health check goroutine ends shortly after Close.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

// fixture is a fresh schema and the means to run scribe against it.
type fixture struct {
	url     string
	schema  string
	pool    *pgxpool.Pool
	journal *postgres.Journal
	admin   *pgadmin.Admin
}

// setup creates a fresh schema; migrated reports whether to migrate it.
func setup(t *testing.T, migrated bool) *fixture {
	t.Helper()
	pool, schema := pgtest.Pool(t)
	f := &fixture{url: pgtest.URL(t), schema: schema, pool: pool}
	cfg := postgres.Config{Schema: schema}
	if migrated {
		require.NoError(t, postgres.Migrate(t.Context(), pool, cfg))
	}
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	f.journal = j
	a, err := pgadmin.New(pool, cfg)
	require.NoError(t, err)
	f.admin = a
	return f
}

// result is what one scribe run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// scribe runs the command line against f's schema (-db and -schema first).
func (f *fixture) scribe(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(t.Context(), append([]string{"-db", f.url, "-schema", f.schema}, args...), &out, &errOut, func(string) string { return "" })
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// exec runs SQL against f's schema; __S__ stands for the quoted schema.
func (f *fixture) exec(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	ct, err := f.pool.Exec(t.Context(), strings.ReplaceAll(sql, "__S__", pgx.Identifier{f.schema}.Sanitize()), args...)
	require.NoError(t, err)
	return ct.RowsAffected()
}

// bankEvent turns a bank domain event into a journal event, as the bank's
// runtime stores it.
func bankEvent(t *testing.T, ev bank.Event) journal.Event {
	t.Helper()
	data, err := json.Marshal(ev)
	require.NoError(t, err)
	return journal.Event{ID: journal.NewEventID(), Type: ev.EventType(), SchemaVersion: 1, Tags: ev.Tags(), Data: data,
		Metadata: journal.Metadata{CorrelationID: "corr-" + ev.EventType(), UserID: "teller"}}
}

// fillBank opens accounts a, b, c and d with a deposit each and runs
// transfers between them, every event appended as the bank's actors do (one
// append per command, expecting the streams' versions). It returns every
// record in append order.
func (f *fixture) fillBank(t *testing.T) []journal.Record {
	t.Helper()
	ctx := t.Context()
	var recs []journal.Record
	versions := map[journal.Tag]uint64{}
	add := func(ev bank.Event) {
		e := bankEvent(t, ev)
		expect := map[journal.Tag]uint64{}
		for _, tag := range e.Tags {
			expect[tag] = versions[tag]
		}
		res, err := f.journal.Append(ctx, []journal.Event{e}, journal.AppendOptions{Expect: expect})
		require.NoError(t, err)
		for _, tag := range e.Tags {
			versions[tag]++
		}
		recs = append(recs, res.Records...)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		add(bank.AccountOpened{AccountID: id})
		add(bank.MoneyDeposited{AccountID: id, Amount: 1000})
	}
	pairs := [][2]string{{"a", "b"}, {"b", "c"}, {"c", "d"}, {"d", "a"}, {"a", "c"}, {"b", "d"}}
	for i, p := range pairs {
		add(bank.MoneyTransferred{TransferID: fmt.Sprintf("t%d", i), From: p[0], To: p[1], Amount: int64(10 * (i + 1))})
	}
	add(bank.MoneyWithdrawn{AccountID: "a", Amount: 5})
	return recs
}

// nth returns the i-th record (0-based) carrying tag.
func nth(t *testing.T, recs []journal.Record, tag journal.Tag, i int) journal.Record {
	t.Helper()
	for _, r := range recs {
		if r.HasTag(tag) {
			if i == 0 {
				return r
			}
			i--
		}
	}
	t.Fatalf("no record %d of tag %s", i, tag)
	return journal.Record{}
}

// last returns the newest record carrying tag.
func last(recs []journal.Record, tag journal.Tag) journal.Record {
	var out journal.Record
	for _, r := range recs {
		if r.HasTag(tag) {
			out = r
		}
	}
	return out
}

// requireBroken checks that verify exited 1 and reported stream broken at
// version and position.
func requireBroken(t *testing.T, res result, stream string, version uint64, pos journal.Position) {
	t.Helper()
	require.Equal(t, exitFailure, res.code, "verify must fail; stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	want := fmt.Sprintf("BROKEN %s at version %d, position %s: ", stream, version, pos)
	require.Contains(t, res.stdout, want, "verify names the stream and position")
}

// TestVerifyDetectsTampering is issue 17's "done when": on a schema filled
// with bank transfers verify exits 0; after an UPDATE of one event's payload,
// after a DELETE of a middle event and after a DELETE of a stream's newest
// event it exits 1 and names the stream and position each time.
func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()

	t.Run("intact", func(t *testing.T) {
		t.Parallel()
		f := setup(t, true)
		f.fillBank(t)
		res := f.scribe(t, "verify")
		require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
		require.Contains(t, res.stdout, fmt.Sprintf("verified 4 streams, %d events: every chain is intact", 2*4+2*6+1))
		require.Empty(t, res.stderr, "no progress bar when stderr is not a terminal")

		res = f.scribe(t, "verify", "-json", "-tag", "account:a")
		require.Equal(t, exitOK, res.code, res.stderr)
		require.JSONEq(t, `{"streams":1,"events":6,"broken":0,"unchainedEvents":0,"erasedEvents":0}`, res.stdout)

		res = f.scribe(t, "verify", "-tag", "account:nobody")
		require.Equal(t, exitFailure, res.code)
		require.Contains(t, res.stderr, "stream default/account:nobody has no events to verify")
	})

	t.Run("untagged chain", func(t *testing.T) {
		t.Parallel()
		f := setup(t, true)
		f.fillBank(t)
		var untagged []journal.Record
		for i := range 3 {
			res, err := f.journal.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "RatesPublished", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}, journal.AppendOptions{})
			require.NoError(t, err)
			untagged = append(untagged, res.Records...)
		}
		res := f.scribe(t, "verify")
		require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
		require.Contains(t, res.stdout, fmt.Sprintf("verified 5 streams, %d events: every chain is intact", 2*4+2*6+1+3), "the untagged chain is verified like a stream")

		require.EqualValues(t, 1, f.exec(t, `UPDATE __S__.events SET data = convert_to('{"n":99}', 'UTF8') WHERE id = $1`, untagged[1].ID))
		res = f.scribe(t, "verify")
		requireBroken(t, res, "default/"+string(journal.UntaggedChain("RatesPublished")), 2, untagged[1].Position)
		require.Contains(t, res.stdout, "1 broken chain(s)")
	})

	t.Run("updated payload", func(t *testing.T) {
		t.Parallel()
		f := setup(t, true)
		recs := f.fillBank(t)
		victim := nth(t, recs, bank.AccountTag("c"), 3) // transfer t2 c→d: version 4 of c, 4 of d
		require.Equal(t, bank.TypeMoneyTransferred, victim.Type)
		require.EqualValues(t, 1, f.exec(t, `UPDATE __S__.events SET data = convert_to('{"transferId":"t2","from":"c","to":"d","amount":999999}', 'UTF8') WHERE id = $1`, victim.ID))

		res := f.scribe(t, "verify")
		requireBroken(t, res, "default/account:c", victim.Version("account:c"), victim.Position)
		requireBroken(t, res, "default/account:d", victim.Version("account:d"), victim.Position)
		require.Contains(t, res.stdout, "does not match the event's content")
		require.Contains(t, res.stdout, "2 broken chain(s)")
		require.NotContains(t, res.stdout, "account:a at", "streams without the event still verify")
		require.Less(t, strings.Index(res.stdout, "account:c at"), strings.Index(res.stdout, "account:d at"), "reported in stream order")
		one := f.scribe(t, "verify", "-workers", "1")
		require.Equal(t, res, one, "one worker reports the same")

		res = f.scribe(t, "verify", "-json", "-tag", "account:d")
		require.Equal(t, exitFailure, res.code)
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		require.Len(t, lines, 2)
		var broken struct {
			Broken         bool   `json:"broken"`
			Tag            string `json:"tag"`
			Version        uint64 `json:"version"`
			Position       string `json:"position"`
			VerifiedEvents uint64 `json:"verifiedEvents"`
		}
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &broken))
		require.True(t, broken.Broken)
		require.Equal(t, "account:d", broken.Tag)
		require.Equal(t, victim.Version("account:d"), broken.Version)
		require.Equal(t, victim.Position.String(), broken.Position)
		require.Equal(t, victim.Version("account:d")-1, broken.VerifiedEvents)
	})

	t.Run("deleted middle event", func(t *testing.T) {
		t.Parallel()
		f := setup(t, true)
		recs := f.fillBank(t)
		victim := nth(t, recs, bank.AccountTag("b"), 1) // b's deposit, version 2 of b
		next := nth(t, recs, bank.AccountTag("b"), 2)
		require.EqualValues(t, 1, f.exec(t, `DELETE FROM __S__.events WHERE id = $1`, victim.ID))

		res := f.scribe(t, "verify")
		// Version 3 is read where version 2 belongs.
		requireBroken(t, res, "default/account:b", 3, next.Position)
		require.Contains(t, res.stdout, "expected version 2, found version 3")
		require.Contains(t, res.stdout, "1 broken chain(s)")
	})

	t.Run("deleted newest event", func(t *testing.T) {
		t.Parallel()
		f := setup(t, true)
		recs := f.fillBank(t)
		tag := bank.AccountTag("a")
		victim := last(recs, tag) // a's withdrawal, its newest event
		require.Equal(t, bank.TypeMoneyWithdrawn, victim.Type)
		require.EqualValues(t, 1, f.exec(t, `DELETE FROM __S__.events WHERE id = $1`, victim.ID))
		require.EqualValues(t, 1, f.exec(t, `DELETE FROM __S__.event_tags WHERE commit_xid = $1 AND seq = $2`, int64(victim.Position.Commit), int64(victim.Position.Seq)))

		res := f.scribe(t, "verify")
		requireBroken(t, res, "default/account:a", victim.Version(tag), victim.Position)
		require.Contains(t, res.stdout, "its newest events were removed")
		require.Contains(t, res.stdout, "1 broken chain(s)")
	})

	t.Run("deleted stream record", func(t *testing.T) {
		t.Parallel()
		f := setup(t, true)
		recs := f.fillBank(t)
		require.EqualValues(t, 1, f.exec(t, `DELETE FROM __S__.streams WHERE tag = 'account:d'`))
		newest := last(recs, "account:d")
		res := f.scribe(t, "verify")
		requireBroken(t, res, "default/account:d", newest.Version("account:d"), newest.Position)
		require.Contains(t, res.stdout, "records no version or head hash: its stream record was removed")
		require.Contains(t, res.stdout, "verified 4 streams")
	})

	t.Run("unchained event inserted", func(t *testing.T) {
		t.Parallel()
		f := setup(t, true)
		recs := f.fillBank(t)
		f.exec(t, `INSERT INTO __S__.events (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes, data, metadata, recorded_at)
			SELECT commit_xid, seq + 1000, gen_random_uuid(), partition, 'Forged', 1, '{}', '{}', '', '', data, metadata, recorded_at FROM __S__.events WHERE id = $1`, recs[0].ID)
		res := f.scribe(t, "verify")
		require.Equal(t, exitFailure, res.code, res.stdout)
		require.Contains(t, res.stdout, "UNCHAINED 1 events are linked into no hash chain")
	})
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTailShowsNewEvents runs tail in-process and appends while it runs: the
// event is printed (the delay is logged; it is well under a second on an
// idle machine, a NOTIFY wake-up, and the test allows 10 s so that a loaded
// CI machine does not fail it), a filtered-out event is not, and tail ends
// cleanly (status 0) when its context ends, as on SIGINT.
func TestTailShowsNewEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	before := f.fillBank(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runWith(ctx, []string{"-db", f.url, "-schema", f.schema, "tail", "-type", bank.TypeMoneyDeposited + "," + bank.TypeAccountOpened}, &out, &errOut, func(string) string { return "" })
	}()
	require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "following the feed after position") }, 10*time.Second, 5*time.Millisecond, "tail starts")
	require.Contains(t, errOut.String(), "after position "+before[len(before)-1].Position.String(), "by default tail starts at the head")

	skipped := bankEvent(t, bank.MoneyWithdrawn{AccountID: "a", Amount: 1})
	shown := bankEvent(t, bank.MoneyDeposited{AccountID: "e", Amount: 77})
	_, err := f.journal.Append(t.Context(), []journal.Event{skipped}, journal.AppendOptions{})
	require.NoError(t, err)
	start := time.Now()
	res, err := f.journal.Append(t.Context(), []journal.Event{shown}, journal.AppendOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), res.Records[0].Position.String()) }, 10*time.Second, time.Millisecond,
		"tail prints the new event; got:\n%s", out.String())
	t.Logf("tail printed the event %s after it was appended", time.Since(start))
	line := out.String()
	require.Contains(t, line, `{"accountId":"e","amount":77}`)
	require.Contains(t, line, "account:e")
	require.NotContains(t, line, bank.TypeMoneyWithdrawn, "-type filters")
	require.Equal(t, 1, strings.Count(line, "\n"), "events stored before tail started are not shown")

	cancel()
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, "an interrupted tail ends cleanly; stderr:\n%s", errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("tail did not end after its context was canceled")
	}

	// -from start replays the whole feed, -tag filters by tag, -json prints
	// records.
	got := f.tailUntil(t, `"amount":77`, "tail", "-from", "start", "-tag", "account:e", "-json")
	var rec recordView
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(got)), &rec), got)
	require.Equal(t, shown.ID.String(), rec.ID)
	require.Equal(t, map[string]uint64{"account:e": 1}, rec.Versions)
	require.Equal(t, "teller", rec.Metadata.UserID)

	// -from a position shows what follows it.
	got = f.tailUntil(t, res.Records[0].Position.String(), "tail", "-from", before[len(before)-1].Position.String())
	require.Contains(t, got, bank.TypeMoneyWithdrawn)
	require.Equal(t, 2, strings.Count(got, "\n"))

	bad := f.scribe(t, "tail", "-from", "yesterday")
	require.Equal(t, exitUsage, bad.code)
	require.Contains(t, bad.stderr, "is not a position")
}

// tailUntil runs a tail command until its output contains want (within 10
// seconds), then interrupts it and returns its output.
func (f *fixture) tailUntil(t *testing.T, want string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runWith(ctx, append([]string{"-db", f.url, "-schema", f.schema}, args...), &out, &errOut, func(string) string { return "" })
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), want) }, 10*time.Second, 5*time.Millisecond, "tail prints %q; stderr:\n%s", want, errOut.String())
	cancel()
	require.Equal(t, exitOK, <-done)
	return out.String()
}
