package ordered

import (
	"context"
	"sync"
)

// Each runs work(ctx, i) for i in [0, n) on up to workers goroutines and calls
// done(i, result) on the calling goroutine in ascending i, each as soon as it
// and every piece before it have finished. It returns the first error done
// returns, or ctx's error; either way it cancels the context work sees and
// waits for every goroutine it started before it returns. Errors of a piece
// belong in T: done decides whether they stop the run.
func Each[T any](ctx context.Context, n, workers int, work func(ctx context.Context, i int) T, done func(i int, v T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	type result struct {
		i int
		v T
	}
	jobs := make(chan int)
	results := make(chan result)
	var wg sync.WaitGroup
	defer func() {
		cancel() // unblocks the feeder and the workers
		wg.Wait()
	}()
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for i := range jobs {
				v := work(ctx, i)
				select {
				case results <- result{i: i, v: v}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Go(func() {
		defer close(jobs)
		for i := range n {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	pending := make(map[int]T)
	for next := 0; next < n; {
		select {
		case r := <-results:
			pending[r.i] = r.v
		case <-ctx.Done():
			return ctx.Err()
		}
		for {
			v, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			if err := done(next, v); err != nil {
				return err
			}
			next++
		}
	}
	return nil
}
