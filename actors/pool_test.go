package actors

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerPoolDropsWorkAfterClose: once closed, the pool runs nothing more
// and says so (a stopped actor's late timer message is dropped, not run on a
// goroutine Shutdown no longer waits for).
func TestWorkerPoolDropsWorkAfterClose(t *testing.T) {
	t.Parallel()
	p := newWorkerPool()
	ran := make(chan struct{})
	require.True(t, p.run(func() { close(ran) }))
	<-ran
	p.close()
	require.False(t, p.run(func() { t.Error("ran after close") }))
}

// TestWorkerPoolRunRacesClose schedules work from several goroutines while
// the pool closes (under -race, the previous pool's WaitGroup.Add raced with
// close's Wait): every accepted function has run when close returns, and
// every refused one never runs.
func TestWorkerPoolRunRacesClose(t *testing.T) {
	t.Parallel()
	for range 20 {
		p := newWorkerPool()
		var accepted, ran atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				for range 2000 {
					if p.run(func() { ran.Add(1) }) {
						accepted.Add(1)
					}
				}
			})
		}
		close(start)
		p.close()
		closedAt := ran.Load()
		wg.Wait()
		require.Equal(t, accepted.Load(), ran.Load(), "every accepted function ran, no refused one")
		require.Equal(t, closedAt, ran.Load(), "nothing ran after close returned")
	}
}
