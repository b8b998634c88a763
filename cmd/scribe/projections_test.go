package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

func TestProjections(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	ctx := t.Context()
	st, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	k := projection.Key{Name: "accounts", Version: 2}
	lease, err := claimOne(ctx, st, k, "bank-1")
	require.NoError(t, err)
	// The projection applied the first five events.
	require.NoError(t, commitOne(ctx, st, lease, lease.Checkpoint, recs[:5], func(context.Context, pgx.Tx) error { return nil }))

	res := f.scribe(t, "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `accounts\s+2\s+running\s+\S+\s+`+recs[4].Position.String()+`\s+5\s+10\s+[0-9.]+m?s\s+bank-1\s+\S+Z\s+-`, res.stdout, "10 of the feed's 15 events are not applied yet, the oldest of them some time ago")

	res = f.scribe(t, "projections", "rebuild", "-version", "2", "accounts")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "pass -confirm")
	res = f.scribe(t, "projections", "rebuild", "-confirm", "accounts")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "-version")
	res = f.scribe(t, "projections", "rebuild", "-version", "7", "-confirm", "accounts")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "is unknown to schema")

	res = f.scribe(t, "projections", "rebuild", "-version", "2", "-confirm", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "reset from checkpoint "+recs[4].Position.String()+" (5 events applied)")
	require.Contains(t, res.stdout, "its read model is undeclared")
	require.Contains(t, res.stdout, "scribe did not empty it")

	res = f.scribe(t, "-json", "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, "idle", rows[0]["state"])
	require.EqualValues(t, 15, rows[0]["lag"], "after a rebuild the whole feed is to be applied again")
	require.Greater(t, rows[0]["lagSeconds"], 0.0, "the oldest unapplied event was recorded before the status was taken")
	require.Equal(t, "0.0", rows[0]["checkpoint"])
	require.Equal(t, "", rows[0]["readModel"], "no runner declared the read model")

	// The runner that held the lease is fenced.
	require.ErrorIs(t, commitOne(ctx, st, lease, recs[4].Position, recs[5:6], func(context.Context, pgx.Tx) error { return nil }), projection.ErrFenced)
}

// TestProjectionsRebuildRows: `projections rebuild` of a projection whose
// runner declared a rows read model empties its rows in the reset's
// transaction (and says so); the rows of other versions stay.
func TestProjectionsRebuildRows(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	ctx := t.Context()
	st, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	counts := projection.Collection[int]{Name: "counts"}
	fill := func(k projection.Key) {
		require.NoError(t, st.Setup(ctx, k, projection.ReadModelRows, nil))
		lease, err := claimOne(ctx, st, k, "bank-1")
		require.NoError(t, err)
		require.NoError(t, commitOne(ctx, st, lease, lease.Checkpoint, recs[:5], func(ctx context.Context, tx pgx.Tx) error {
			for i, rec := range recs[:5] {
				if err := counts.Put(ctx, st.Rows(tx, k), rec.ID.String(), i); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	k, other := projection.Key{Name: "totals", Version: 1}, projection.Key{Name: "totals", Version: 2}
	fill(k)
	fill(other)

	res := f.scribe(t, "projections", "rebuild", "-version", "1", "-confirm", "totals")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "reset from checkpoint "+recs[4].Position.String()+" (5 events applied)")
	require.Contains(t, res.stdout, "its rows read model was emptied in the same transaction (5 rows deleted)")
	n, err := st.CountRows(ctx, k)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = st.CountRows(ctx, other)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "another version's rows are kept")

	res = f.scribe(t, "-json", "projections", "rebuild", "-version", "2", "-confirm", "totals")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, "rows", rows[0]["readModel"])
	require.Equal(t, true, rows[0]["readModelCleared"])
	require.EqualValues(t, 5, rows[0]["rowsDeleted"])
	res = f.scribe(t, "-json", "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows = jsonLines(t, res.stdout)
	require.Len(t, rows, 2)
	require.Equal(t, "rows", rows[0]["readModel"])
}

// TestDeadLetters: list shows a publisher's dead letters (without event
// data); replay needs -confirm, marks them for replay and says whether a
// runner will pick them up; a running publisher whose sink now accepts the
// event replays it and the letter is gone.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	ctx := t.Context()
	st, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	var mu sync.Mutex
	refuse := map[string]bool{recs[2].ID.String(): true, recs[5].ID.String(): true}
	got := map[string]int{}
	sink := sinkFunc(func(ctx context.Context, rec journal.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if refuse[rec.ID.String()] {
			return projection.Permanent(errors.New("HTTP 410 from the receiver"))
		}
		got[rec.ID.String()]++
		return nil
	})
	pub, err := projection.NewPublisher(f.journal, st, "hook", journal.Query{}, sink, projection.PublisherOptions{},
		projection.Options{Owner: "pub-1", LeaseTTL: 2 * time.Second, ReplayInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pub.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.NoError(t, pub.WaitFor(ctx, recs[len(recs)-1].Position))

	res := f.scribe(t, "projections", "dead-letters", "list")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^hook\s+1\s+`+recs[2].Position.String()+`\s+`+recs[2].ID.String()+`\s+`+recs[2].Type+`\s+1\s+\S+Z\s+-\s+HTTP 410 from the receiver$`, res.stdout)
	require.Contains(t, res.stdout, "2 dead letters")
	require.NotContains(t, res.stdout, string(recs[2].Data[:10]), "event data is not printed")
	res = f.scribe(t, "-json", "projections", "dead-letters", "list", "-name", "hook", "-version", "1")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 2)
	require.Equal(t, recs[5].ID.String(), rows[1]["eventId"])
	res = f.scribe(t, "projections", "dead-letters", "list", "-name", "other")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "0 dead letters")
	res = f.scribe(t, "projections", "dead-letters", "list", "-version", "1")
	require.Equal(t, exitUsage, res.code)

	res = f.scribe(t, "projections", "dead-letters", "replay")
	require.Equal(t, exitUsage, res.code)
	require.Contains(t, res.stderr, "pass -confirm")

	// The receiver now accepts one of the two.
	mu.Lock()
	delete(refuse, recs[2].ID.String())
	mu.Unlock()
	res = f.scribe(t, "projections", "dead-letters", "replay", "-confirm")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "hook@1: replay of 2 dead letters requested; its runner pub-1 replays them")
	require.Eventually(t, func() bool {
		dl, err := st.DeadLetters(ctx, pub.Key())
		require.NoError(t, err)
		return len(dl) == 1 && dl[0].ReplayRequestedAt.IsZero()
	}, 10*time.Second, 10*time.Millisecond, "the publisher did not replay")
	res = f.scribe(t, "projections", "dead-letters", "list")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^hook\s+1\s+`+recs[5].Position.String()+`\s+\S+\s+\S+\s+2\s+\S+Z\s+-\s+HTTP 410 from the receiver$`, res.stdout, "the letter that failed again is kept, one attempt more")
	require.Contains(t, res.stdout, "1 dead letters")
	mu.Lock()
	require.Equal(t, 1, got[recs[2].ID.String()], "replayed once")
	mu.Unlock()

	// Without a running publisher the request waits.
	cancel()
	require.NoError(t, <-done)
	done <- nil
	res = f.scribe(t, "projections", "dead-letters", "replay", "-confirm", "-name", "hook")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "no runner holds its lease now")
}

type sinkFunc func(ctx context.Context, rec journal.Record) error

func (f sinkFunc) Publish(ctx context.Context, rec journal.Record) error { return f(ctx, rec) }

// TestProjectionsStatusSlices: `projections status` of a sliced projection
// shows its slicing and, per slice, owner, checkpoint, events and lag.
func TestProjectionsStatusSlices(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	recs := f.fillBank(t)
	ctx := t.Context()
	st, err := postgres.NewProjectionStore(f.pool, postgres.Config{Schema: f.schema})
	require.NoError(t, err)
	k := projection.Key{Name: "balances", Version: 1}
	sl := projection.Slicing{Group: "account", Count: 4, Partition: journal.DefaultPartition}
	_, err = st.Join(ctx, k, sl.Layout(), "runner-1", time.Minute)
	require.NoError(t, err)
	leases, err := st.Claim(ctx, k, "runner-1", time.Minute, []int{0, 1, 2, 3})
	require.NoError(t, err)
	require.Len(t, leases, 4)
	// Deliveries per slice; slice s0 (the slice of account:a) applies its
	// first two deliveries.
	per := map[int][]journal.Record{}
	for _, r := range recs {
		seen := map[int]bool{}
		for _, tag := range r.Tags {
			if s, ok := sl.SliceOf(tag); ok && !seen[s] {
				seen[s] = true
				per[s] = append(per[s], r)
			}
		}
	}
	s0, _ := sl.SliceOf("account:a")
	require.NoError(t, st.Commit(ctx, []projection.Lease{leases[s0]}, per[s0][:2], []int{s0, s0}, func(context.Context, pgx.Tx) error { return nil }))

	res := f.scribe(t, "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, `balances@1: sliced by tag group "account" of partition "default" into 4 slices`)
	require.Regexp(t, fmt.Sprintf(`(?m)^%d\s+runner-1\s+%d\s+%s\s+2\s+%d\s`, s0, leases[s0].Epoch, per[s0][1].Position, len(per[s0])-2), res.stdout)
	require.Contains(t, res.stdout, "1 runners own slices")
	// The projection's own line sums its slices up: running (a slice lease
	// is live), the runners, the deliveries applied.
	require.Regexp(t, `(?m)^balances\s+1\s+running\s.*\s2\s.*1 runners \(sliced\)`, res.stdout)

	res = f.scribe(t, "-json", "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	slices := rows[0]["slices"].([]any)
	require.Len(t, slices, 4)
	var lag float64
	total := 0
	for s, x := range slices {
		lag += x.(map[string]any)["lag"].(float64)
		total += len(per[s])
	}
	require.EqualValues(t, total-2, lag, "every delivery but the two applied is behind")
	require.EqualValues(t, total-2, rows[0]["lag"])
	require.EqualValues(t, 2, rows[0]["events"])
	require.Equal(t, "running", rows[0]["state"])
	require.Positive(t, rows[0]["lagSeconds"], "the age of the oldest delivery not applied")
}

// TestProjectionsPauseThenRebuild: a projection rebuilt while paused shows
// paused (never idle) in status; resume says it resumed to standby and
// starts from the beginning of the feed; resuming again says it was not
// paused; resuming an unknown projection fails and says so.
func TestProjectionsPauseThenRebuild(t *testing.T) {
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

	res := f.scribe(t, "projections", "pause", "-version", "1", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	res = f.scribe(t, "projections", "rebuild", "-version", "1", "-confirm", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	res = f.scribe(t, "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Regexp(t, `accounts\s+1\s+paused\s`, res.stdout, "rebuilt while paused: the pause holds")
	res = f.scribe(t, "-json", "projections", "status")
	require.Equal(t, exitOK, res.code, res.stderr)
	rows := jsonLines(t, res.stdout)
	require.Len(t, rows, 1)
	require.Equal(t, "paused", rows[0]["state"])
	require.Equal(t, "0.0", rows[0]["checkpoint"])
	res = f.scribe(t, "projections", "pause", "-version", "1", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "was already paused; nothing changed (state paused")

	res = f.scribe(t, "projections", "resume", "-version", "1", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "resumed (state standby)")
	require.Contains(t, res.stdout, "starts from the beginning of the feed")
	require.NotContains(t, res.stdout, "idle")
	res = f.scribe(t, "projections", "resume", "-version", "1", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "was not paused; nothing changed (state standby)")
	res = f.scribe(t, "projections", "resume", "-version", "4", "accounts")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "is unknown to schema")

	lease, err = claimOne(ctx, st, k, "bank-2")
	require.NoError(t, err)
	require.Equal(t, journal.Position{}, lease.Checkpoint, "it starts over")

	// A failure paused shows both; rebuilt, it is paused.
	require.NoError(t, st.Fail(ctx, lease, recs[0].Position, "poison"))
	res = f.scribe(t, "projections", "pause", "-version", "1", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	res = f.scribe(t, "projections", "status")
	require.Regexp(t, `accounts\s+1\s+failed \(paused\)\s`, res.stdout)
	res = f.scribe(t, "-json", "projections", "status")
	rows = jsonLines(t, res.stdout)
	require.Equal(t, "failed", rows[0]["state"])
	require.Equal(t, true, rows[0]["paused"])
	res = f.scribe(t, "projections", "rebuild", "-version", "1", "-confirm", "accounts")
	require.Equal(t, exitOK, res.code, res.stderr)
	res = f.scribe(t, "projections", "status")
	require.Regexp(t, `accounts\s+1\s+paused\s`, res.stdout)
}

// claimOne joins k as an unsliced projection for owner and claims its one
// slice (an error when another runner holds it).
func claimOne(ctx context.Context, st *postgres.ProjectionStore, k projection.Key, owner string) (projection.Lease, error) {
	if _, err := st.Join(ctx, k, projection.Layout{}, owner, time.Minute); err != nil {
		return projection.Lease{}, err
	}
	ls, err := st.Claim(ctx, k, owner, time.Minute, []int{0})
	if err == nil && len(ls) == 0 {
		err = errors.New("the projection's slice is held by another runner")
	}
	if err != nil {
		return projection.Lease{}, err
	}
	return ls[0], nil
}

// commitOne commits recs under l, an unsliced projection's lease, from the
// checkpoint from.
func commitOne(ctx context.Context, st *postgres.ProjectionStore, l projection.Lease, from journal.Position, recs []journal.Record, apply func(context.Context, pgx.Tx) error) error {
	l.Checkpoint = from
	return st.Commit(ctx, []projection.Lease{l}, recs, make([]int, len(recs)), apply)
}
