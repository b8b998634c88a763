package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// acquireCounter counts the stream leases a runtime acquires.
type acquireCounter struct {
	journal.Sessions
	n atomic.Int32
}

func (c *acquireCounter) Acquire(ctx context.Context, node journal.NodeSession, s journal.StreamID, wait time.Duration) (journal.Lease, error) {
	c.n.Add(1)
	return c.Sessions.Acquire(ctx, node, s, wait)
}

func TestGhostsOnMemory(t *testing.T) {
	t.Parallel()
	t.Run("UnknownStreamsLeaveNoRow", func(t *testing.T) { t.Parallel(); testUnknownStreamsLeaveNoRow(t, memoryEnv()) })
	t.Run("StreamCreatedElsewhere", func(t *testing.T) { t.Parallel(); testStreamCreatedElsewhere(t, memoryEnv()) })
}

// testUnknownStreamsLeaveNoRow: concurrent commands for streams that were
// never created, deciding no events, take no lease, write no row and leave
// no actor once they returned.
func testUnknownStreamsLeaveNoRow(t *testing.T, e *env) {
	acq := &acquireCounter{Sessions: e.s}
	rt := e.start(t, func(c *runtime.Config) { c.Sessions = acq })
	before := 0
	if e.streamRows != nil {
		before = e.streamRows(t)
	}
	const n = 500
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			target := counter(fmt.Sprintf("never-created-%d", i))
			var cmd any = Get{}
			if i%2 == 1 {
				cmd = Increment{By: -1} // a domain error: appends nothing
			}
			res, err := runtime.ExecuteTyped[CounterState](context.Background(), rt, target, cmd)
			if i%2 == 1 {
				if err == nil {
					t.Errorf("%s: a negative increment succeeded", target.ID)
				}
				return
			}
			if err != nil || res.Version != 0 || res.State != (CounterState{}) {
				t.Errorf("%s: got %+v, %v; want version 0 and the initial state", target.ID, res, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 0, rt.ActiveStreams(), "no actor outlives the commands of streams without events")
	require.Equal(t, int32(0), acq.n.Load(), "no lease for streams without events")
	if e.streamRows != nil {
		require.Equal(t, before, e.streamRows(t), "no row in streams for streams without events")
	}
}

// testStreamCreatedElsewhere: a stream that gets its first event through
// another runtime between two requests is answered with that event.
func testStreamCreatedElsewhere(t *testing.T, e *env) {
	short := func(c *runtime.Config) { c.OpenTimeout = 200 * time.Millisecond }
	a := e.start(t, short)
	b := e.start(t, short, func(c *runtime.Config) { c.NodeID = "node-2" })
	target := counter("created-elsewhere")
	require.Equal(t, uint64(0), mustExec(t, a, target, Get{}).Version)
	// Node 1 holds no lease on the stream, so node 2 appends at once.
	require.Equal(t, uint64(1), mustExec(t, b, target, Increment{By: 7}).Version)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.Shutdown(ctx)) // releases its lease
	res := mustExec(t, a, target, Get{})
	require.Equal(t, uint64(1), res.Version)
	require.Equal(t, 7, res.State.Count)
	if e.streamRows != nil {
		require.Equal(t, 1, e.streamRows(t))
	}
}
