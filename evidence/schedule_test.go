package evidence_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
)

// flakySink is a DirSink whose next Put fails when failNext is set.
type flakySink struct {
	evidence.DirSink
	failNext bool
	puts     int
}

func (s *flakySink) Put(ctx context.Context, c *evidence.Checkpoint) (string, error) {
	s.puts++
	if s.failNext {
		s.failNext = false
		return "", errors.New("disk full")
	}
	return s.DirSink.Put(ctx, c)
}

// TestScheduleOnTicks drives Schedule with a tick channel and a fake clock:
// one checkpoint at once, then one per tick, each covering the journal's
// head at its tick and stamped with the clock; a failed sink is reported
// and the next tick writes again; every file written verifies; cancelling
// the context ends Schedule with nil.
func TestScheduleOnTicks(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ticks := make(chan time.Time)
	results := make(chan evidence.Scheduled)
	sink := &flakySink{DirSink: evidence.DirSink{Dir: t.TempDir()}}
	base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	n := 0
	now := func() time.Time { n++; return base.Add(time.Duration(n) * 10 * time.Minute) }
	done := make(chan error, 1)
	go func() {
		done <- evidence.Schedule(ctx, f.j, f.priv, sink, evidence.ScheduleOptions{
			Ticks: ticks, Make: evidence.MakeOptions{Journal: "test", Now: now},
			Done: func(s evidence.Scheduled) { results <- s }})
	}()
	head := func() journal.Position {
		p, err := f.j.Head(t.Context())
		require.NoError(t, err)
		return p
	}

	first := <-results // made at once, before any tick
	require.NoError(t, first.Err)
	require.Equal(t, head(), first.Checkpoint.Position)
	require.Equal(t, base.Add(10*time.Minute), first.Checkpoint.MadeAt)

	_, err := f.j.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1,
		Tags: []journal.Tag{"account:a"}, Data: json.RawMessage(`{"n":99}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	ticks <- time.Time{}
	second := <-results
	require.NoError(t, second.Err)
	require.Equal(t, head(), second.Checkpoint.Position)
	require.Equal(t, first.Checkpoint.Events+1, second.Checkpoint.Events)
	require.Equal(t, base.Add(20*time.Minute), second.Checkpoint.MadeAt)

	sink.failNext = true
	ticks <- time.Time{}
	failed := <-results
	require.ErrorContains(t, failed.Err, "not stored")
	require.ErrorContains(t, failed.Err, "disk full")
	require.Nil(t, failed.Checkpoint)

	ticks <- time.Time{}
	fourth := <-results
	require.NoError(t, fourth.Err, "the tick after a failure writes again")

	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 4, sink.puts)
	files, err := evidence.ListDir(sink.Dir)
	require.NoError(t, err)
	require.Equal(t, []string{first.Name, second.Name, fourth.Name}, files)
	for _, name := range files {
		c, err := evidence.ReadFile(name)
		require.NoError(t, err)
		require.NoError(t, c.Verify(f.pub))
	}
}

// TestScheduleEnds: Schedule returns nil when its tick channel is closed,
// and refuses, writing nothing, without an interval or with a key that is
// not an Ed25519 private key.
func TestScheduleEnds(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sink := &flakySink{DirSink: evidence.DirSink{Dir: t.TempDir()}}
	ticks := make(chan time.Time)
	close(ticks)
	require.NoError(t, evidence.Schedule(t.Context(), f.j, f.priv, sink, evidence.ScheduleOptions{Ticks: ticks}))
	require.Equal(t, 1, sink.puts, "one checkpoint at once, then the closed channel ends it")

	err := evidence.Schedule(t.Context(), f.j, f.priv, sink, evidence.ScheduleOptions{})
	require.ErrorContains(t, err, "Every")
	err = evidence.Schedule(t.Context(), f.j, f.priv[:10], sink, evidence.ScheduleOptions{Every: time.Minute})
	require.ErrorContains(t, err, "Ed25519")
	require.Equal(t, 1, sink.puts)
}
