package postgres_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// Run with:
//
//	SCRIBE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench . -benchtime 3s ./postgres

func benchEvents(n int, tags ...journal.Tag) []journal.Event {
	out := make([]journal.Event, n)
	for i := range out {
		out[i] = event("Deposited", tags...)
		out[i].Data = []byte(`{"amount":1,"balance":123456,"note":"benchmark payload padding to about one hundred bytes"}`)
	}
	return out
}

// BenchmarkAppend appends 1, 10 and 100 events per call to one stream with an
// expected version, from one caller (batching off: one transaction per call).
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			f := setup(b, func(c *postgres.Config) { c.Batching.Disabled = true })
			ctx := context.Background()
			tag := journal.Tag("account:bench")
			var version uint64
			b.ResetTimer()
			for range b.N {
				_, err := f.journal.Append(ctx, benchEvents(n, tag), journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: version}})
				if err != nil {
					b.Fatal(err)
				}
				version += uint64(n)
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendConcurrent16 runs 16 concurrent callers, each appending
// single events to its own stream, through the batching path and, for
// comparison, with batching off.
func BenchmarkAppendConcurrent16(b *testing.B) {
	variants := []struct {
		name    string
		batch   bool
		workers int
		linger  time.Duration
	}{
		{"batched", true, 0, 0},
		{"batched-workers=4", true, 4, 0},
		{"batched-no-linger", true, 0, -1},
		{"batched-workers=4-no-linger", true, 4, -1},
		{"unbatched", false, 0, 0},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			// 16 callers get 16 connections when unbatched, as pgbench's 16 clients do.
			f := setupPool(b, 20, func(c *postgres.Config) {
				c.Batching.Disabled = !v.batch
				c.Batching.Workers = v.workers
				c.Batching.Linger = v.linger
			})
			ctx := context.Background()
			var ids atomic.Int64
			b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				tag := journal.NewTag("caller", fmt.Sprint(ids.Add(1)))
				for pb.Next() {
					if _, err := f.journal.Append(ctx, benchEvents(1, tag), journal.AppendOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			if st := f.journal.EngineStats(); st.Batches > 0 {
				b.ReportMetric(float64(st.Appends)/float64(st.Batches), "appends/batch")
			}
		})
	}
}

// BenchmarkAppendUntagged16 runs 16 concurrent callers appending single
// events: tagged, each caller its own stream (the baseline); untagged, each
// caller its own event type (so its own untagged chain); and untagged, all of
// one type (one chain, whose head every append moves). Batched (the default)
// and unbatched (one transaction per append, so appends to one chain wait for
// each other's commit).
//
//	SCRIBE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -bench AppendUntagged16 -benchtime 2s -count 5 ./postgres
func BenchmarkAppendUntagged16(b *testing.B) {
	shapes := []struct {
		name  string
		event func(caller int64) journal.Event
	}{
		{"tagged-own-stream", func(c int64) journal.Event { return benchEvents(1, journal.NewTag("caller", fmt.Sprint(c)))[0] }},
		{"untagged-own-type", func(c int64) journal.Event {
			e := benchEvents(1)[0]
			e.Type = fmt.Sprint("Noted", c)
			return e
		}},
		{"untagged-one-type", func(int64) journal.Event { return benchEvents(1)[0] }},
	}
	for _, batched := range []bool{true, false} {
		for _, shape := range shapes {
			name := shape.name + "/batched"
			if !batched {
				name = shape.name + "/unbatched"
			}
			b.Run(name, func(b *testing.B) {
				f := setupPool(b, 20, func(c *postgres.Config) { c.Batching.Disabled = !batched })
				ctx := context.Background()
				var ids atomic.Int64
				b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					caller := ids.Add(1)
					for pb.Next() {
						if _, err := f.journal.Append(ctx, []journal.Event{shape.event(caller)}, journal.AppendOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
				st := f.journal.EngineStats()
				b.ReportMetric(float64(st.Fenced)/float64(max(st.Batches, 1)), "fenced/batch")
				b.ReportMetric(float64(st.Read)/float64(max(st.Batches, 1)), "reads/batch")
			})
		}
	}
}

// load appends total events in appends of 100, each carrying tags.
func load(b *testing.B, j journal.Journal, total int, tags func(i int) []journal.Tag) {
	b.Helper()
	ctx := context.Background()
	for i := 0; i < total; i += 100 {
		evs := benchEvents(100)
		for k := range evs {
			evs[k].Tags = tags(i + k)
			if (i+k)%3 == 0 {
				evs[k].Type = "Withdrawn"
			}
		}
		_, err := j.Append(ctx, evs, journal.AppendOptions{})
		require.NoError(b, err)
	}
}

// BenchmarkReadStream10k reads a whole stream of 10,000 events.
func BenchmarkReadStream10k(b *testing.B) {
	f := setup(b)
	load(b, f.journal, 10_000, func(int) []journal.Tag { return []journal.Tag{"account:big"} })
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		n := 0
		for _, err := range f.journal.ReadStream(ctx, journal.Stream("account:big"), 1, 0) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10_000 {
			b.Fatalf("read %d events", n)
		}
	}
	b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDCBRead reads the events matching a two-item query (a tag pair, and
// a type within a tag) out of 20,000 events spread over 100 accounts.
func BenchmarkDCBRead(b *testing.B) {
	f := setup(b)
	load(b, f.journal, 20_000, func(i int) []journal.Tag {
		return []journal.Tag{journal.NewTag("account", fmt.Sprint(i%100)), journal.NewTag("branch", fmt.Sprint(i%7))}
	})
	q := journal.Query{Items: []journal.QueryItem{
		{Tags: []journal.Tag{"account:1", "branch:1"}},
		{Tags: []journal.Tag{"account:2"}, Types: []string{"Withdrawn"}},
	}}
	ctx := context.Background()
	want := 0
	for range f.journal.Read(ctx, q, journal.ReadOptions{}) {
		want++
	}
	require.Positive(b, want)
	b.ResetTimer()
	for range b.N {
		n := 0
		for _, err := range f.journal.Read(ctx, q, journal.ReadOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != want {
			b.Fatalf("read %d events, want %d", n, want)
		}
	}
	b.ReportMetric(float64(want), "matches")
}

// BenchmarkReadAll reads all of 10,000 events through the gap-free feed.
func BenchmarkReadAll(b *testing.B) {
	f := setup(b)
	load(b, f.journal, 10_000, func(i int) []journal.Tag { return []journal.Tag{journal.NewTag("account", fmt.Sprint(i%100))} })
	ctx := context.Background()
	if os.Getenv("BENCH_ANALYZE") != "" {
		_, err := f.pool.Exec(ctx, "ANALYZE "+pgx.Identifier{f.cfg.Schema, "events"}.Sanitize())
		require.NoError(b, err)
	}
	b.ResetTimer()
	for range b.N {
		n := 0
		for _, err := range f.journal.ReadAll(ctx, journal.Position{}, 0) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 10_000 {
			b.Fatalf("read %d events", n)
		}
	}
	b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAcquireWhileHeld measures what streams waiting for another live
// node's leases cost the database: 100 Acquires wait 3 s each for streams a
// live session holds (and does not give up), and the benchmark reports the
// transactions the database committed or rolled back meanwhile, per waiting
// stream per second (pg_stat_database, read after its 1 s reporting delay;
// run it alone). Run with -benchtime 1x.
func BenchmarkAcquireWhileHeld(b *testing.B) {
	f := setup(b)
	ctx := context.Background()
	const streams, wait = 100, 3 * time.Second
	holder, err := f.journal.OpenNode(ctx, "node-holder", time.Hour)
	require.NoError(b, err)
	stream := func(i int) journal.StreamID { return journal.Stream(journal.Tag(fmt.Sprintf("account:%d", i))) }
	for i := range streams {
		_, err := f.journal.Acquire(ctx, holder, stream(i), time.Second)
		require.NoError(b, err)
	}
	waiter, err := f.journal.OpenNode(ctx, "node-waiter", time.Hour)
	require.NoError(b, err)
	xacts := func() int64 {
		time.Sleep(1500 * time.Millisecond) // backends report their counts at most once a second
		var x int64
		_, err := f.pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
		require.NoError(b, err)
		require.NoError(b, f.pool.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&x))
		return x
	}
	var total int64
	b.ResetTimer()
	for range b.N {
		before := xacts()
		var failed atomic.Int64
		done := make(chan struct{}, streams)
		for i := range streams {
			go func() {
				defer func() { done <- struct{}{} }()
				if _, err := f.journal.Acquire(ctx, waiter, stream(i), wait); err == nil {
					failed.Add(1)
				}
			}()
		}
		for range streams {
			<-done
		}
		require.Zero(b, failed.Load(), "an Acquire took a stream a live session holds")
		total += xacts() - before - 1 // less the reading transaction itself
	}
	b.ReportMetric(float64(total)/float64(b.N)/streams/wait.Seconds(), "xacts/stream/s")
}
