package runtime_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/scribe-es/scribe/runtime"
)

// BenchmarkExecute measures Execute throughput on the memory journal: 8
// goroutines spread their commands over 1,000 streams (each command appends
// one event). Run:
//
//	go test -run '^$' -bench BenchmarkExecute -benchtime 200000x ./runtime
func BenchmarkExecute(b *testing.B) {
	e := memoryEnv()
	e.snaps = nil
	benchExecute(b, e, 8)
}

// BenchmarkExecutePostgres is BenchmarkExecute on the Postgres journal
// (SCRIBE_TEST_DATABASE_URL), with 8 and 64 goroutines. Run:
//
//	go test -run '^$' -bench BenchmarkExecutePostgres -benchtime 20000x ./runtime
func BenchmarkExecutePostgres(b *testing.B) {
	for _, g := range []int{8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			e := postgresEnvTB(b)
			e.snaps = nil
			benchExecute(b, e, g)
		})
	}
}

func benchExecute(b *testing.B, e *env, goroutines int) {
	const streams = 1000
	rt := e.start(b, func(c *runtime.Config) { c.NodeID = "bench" })
	ctx := context.Background()
	targets := make([]runtime.Target, streams)
	for i := range targets {
		targets[i] = counter(fmt.Sprintf("s%d", i))
		if _, err := rt.Execute(ctx, targets[i], Get{}); err != nil { // activate
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var failed atomic.Int64
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			i := g * 7919
			for next.Add(1) <= int64(b.N) {
				i = (i + 1) % streams
				if _, err := rt.Execute(ctx, targets[i], Increment{By: 1}); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d commands failed", failed.Load())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commands/s")
	// CPU time per command (user+system, the whole process) is robust to a
	// busy machine, where commands/s is not.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/command")
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleActorHeap measures the heap held per idle, active stream
// actor: 100,000 streams are activated (one command each that appends one
// event: a command that appends nothing to a stream without events keeps no
// actor) and the live heap is compared with the heap after Shutdown
// passivated them all (the journal keeps the events). Run:
//
//	go test -run '^$' -bench BenchmarkIdleActorHeap -benchtime 1x ./runtime
func BenchmarkIdleActorHeap(b *testing.B) {
	const actors = 100_000
	ctx := context.Background()
	for range b.N {
		e := memoryEnv()
		e.snaps = nil
		rt := e.start(b, func(c *runtime.Config) { c.NodeID = "heap"; c.IdleTimeout = time.Hour })
		targets := make([]runtime.Target, actors)
		for i := range targets {
			targets[i] = counter(fmt.Sprintf("idle-%d", i))
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= actors {
						return
					}
					if _, err := rt.Execute(ctx, targets[i], Increment{By: 1}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if rt.ActiveStreams() != actors {
			b.Fatalf("%d active streams, want %d", rt.ActiveStreams(), actors)
		}
		active := liveHeap()
		if err := rt.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		idle := liveHeap()
		goruntime.KeepAlive(targets)
		perActor := float64(active-idle) / actors
		b.ReportMetric(perActor, "heap-B/actor")
		b.ReportMetric(float64(active)/(1<<20), "heap-MiB-active")
	}
}

func liveHeap() uint64 {
	var ms goruntime.MemStats
	for range 3 {
		goruntime.GC()
	}
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
