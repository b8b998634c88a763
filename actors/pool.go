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
	tasks chan func() // unbuffered: a send succeeds only if a worker waits
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newWorkerPool() *workerPool {
	return &workerPool{tasks: make(chan func()), stop: make(chan struct{})}
}

func (p *workerPool) run(fn func()) {
	select {
	case p.tasks <- fn:
	default:
		p.wg.Add(1)
		go p.worker(fn)
	}
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
