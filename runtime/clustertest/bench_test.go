// Two members in one process: see inprocess_test.go for why this needs a
// race-free build.

//go:build !race

package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal/memory"
)

// BenchmarkClusterExecute compares Execute on streams hosted by the calling
// member (local: straight to the stream actor) with Execute on streams
// hosted by the other member (remote: protobuf envelope over gRPC to the
// stream's grain, reply back), on the memory journal so the transport
// dominates. It reports commands/s and latency percentiles.
//
//	go test -run '^$' -bench ClusterExecute -benchtime 20000x ./runtime/clustertest/
func BenchmarkClusterExecute(b *testing.B) {
	j := memory.New()
	rts := startInProcess(b, 2, j)
	ctx := context.Background()
	var local, remote []string
	for i := 0; len(local) < 64 || len(remote) < 64; i++ {
		id := fmt.Sprintf("bench-%d", i)
		before := rts[0].ActiveStreams()
		_, err := rts[0].Execute(ctx, acct(id), Deposit{Amount: 1})
		require.NoError(b, err)
		if rts[0].ActiveStreams() > before {
			local = append(local, id)
		} else {
			remote = append(remote, id)
		}
	}
	for _, c := range []struct {
		name string
		ids  []string
	}{{"local", local[:64]}, {"remote", remote[:64]}} {
		b.Run(c.name, func(b *testing.B) {
			var next atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(4)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				own := make([]time.Duration, 0, 1024)
				for pb.Next() {
					id := c.ids[next.Add(1)%int64(len(c.ids))]
					t0 := time.Now()
					if _, err := rts[0].Execute(ctx, acct(id), Deposit{Amount: 1}); err != nil {
						b.Error(err)
						return
					}
					own = append(own, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, own...)
				mu.Unlock()
			})
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "cmds/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
