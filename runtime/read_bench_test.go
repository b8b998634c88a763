package runtime_test

import (
	"context"
	"testing"

	"github.com/scribe-es/scribe/runtime"
)

// BenchmarkStateReplay measures the read path every actor activation, every
// runtime.State without a snapshot and every cold start takes: folding one
// aggregate of 1,000 events from the journal (no snapshot store). Besides
// time it reports cpu-ns/op, the process's CPU time (user and system, every
// goroutine, the garbage collector's too) per fold, which other processes
// on a shared machine disturb far less than the wall time. Run:
//
//	go test -run '^$' -bench BenchmarkStateReplay -benchtime 200x ./runtime
func BenchmarkStateReplay(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		e := memoryEnv()
		e.snaps = nil
		benchStateReplay(b, e)
	})
	b.Run("postgres", func(b *testing.B) {
		e := postgresEnvTB(b)
		e.snaps = nil
		benchStateReplay(b, e)
	})
}

func benchStateReplay(b *testing.B, e *env) {
	const events = 1000
	rt := e.start(b, func(c *runtime.Config) { c.NodeID = "bench" })
	ctx := context.Background()
	target := counter("replay")
	for range events {
		if _, err := rt.Execute(ctx, target, Increment{By: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	for b.Loop() {
		st, err := runtime.State[CounterState](ctx, rt, target)
		if err != nil {
			b.Fatal(err)
		}
		if st.Version != events {
			b.Fatalf("folded version %d, want %d", st.Version, events)
		}
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
