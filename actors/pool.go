package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// poolWorkerIdle is how long a pooled goroutine waits for more work before
// it exits: between one and two of these after its last task.
const poolWorkerIdle = 2 * time.Second

// mailboxThroughput is how many messages a mailbox processes per scheduling.
const mailboxThroughput = 300

// workerPool runs functions on reused goroutines: an idle worker when one
// waits, a new one otherwise. Reuse keeps the workers' grown stacks (journal
// calls and user code are deep) and saves a goroutine start per task; idle
// workers exit after poolWorkerIdle, and all of them on close.
type workerPool struct {
	tasks  chan func() // unbuffered: a send succeeds only if a worker waits
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex // orders starting a worker with close
	closed bool
}

func newWorkerPool() *workerPool {
	return &workerPool{tasks: make(chan func()), stop: make(chan struct{})}
}

// run runs fn on a worker and reports true, or drops it and reports false
// once close has started: after Shutdown, a timer's late message to a
// stopped actor (a linger's wake-up, say) must not start a worker that
// close no longer waits for (which raced with its WaitGroup.Wait).
func (p *workerPool) run(fn func()) bool {
	select {
	case p.tasks <- fn:
		return true
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go p.worker(fn)
	return true
}

// worker runs fn and then the tasks handed to it. Its idle timer is not reset
// per task (a timer reset per task cost as much as the rest of the hand-off):
// when it fires, a worker that ran a task since it was armed arms it again,
// and one that did not exits.
func (p *workerPool) worker(fn func()) {
	defer p.wg.Done()
	idle := time.NewTimer(poolWorkerIdle)
	defer idle.Stop()
	for {
		fn()
		ran := true
	wait:
		for {
			select {
			case fn = <-p.tasks:
				break wait
			case <-idle.C:
				if !ran {
					return
				}
				ran = false
				idle.Reset(poolWorkerIdle)
			case <-p.stop:
				return
			}
		}
	}
}

// close stops the idle workers and waits for the busy ones to finish.
func (p *workerPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
}

// poolDispatcher is the protoactor-go dispatcher of the stream actors: it
// runs mailboxes on the host's mailbox pool.
type poolDispatcher struct{ p *workerPool }

var _ actor.Dispatcher = poolDispatcher{}

func (d poolDispatcher) Schedule(fn func()) { d.p.run(fn) }
func (d poolDispatcher) Throughput() int    { return mailboxThroughput }

func (h *Host) dispatcher() actor.Dispatcher { return poolDispatcher{p: h.mbPool} }
