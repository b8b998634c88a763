package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stormConfig configures a retry storm: Workers clients deposit on ONE
// account, each attempt abandoned after Timeout and retried at once; after
// a 503 a client waits Backoff.
type stormConfig struct {
	URL      string
	Workers  int
	Duration time.Duration
	Timeout  time.Duration
	Backoff  time.Duration
	// SendDeadline sends each attempt's Timeout as its Request-Timeout.
	SendDeadline bool
}

// stormReport is the outcome of a retry storm.
type stormReport struct {
	Elapsed   time.Duration
	Requests  int64
	Acked     int64 // answered 200 before the client gave up
	Refused   int64 // answered 503 overloaded
	RetryHint int64 // of those, with a Retry-After header
	TimedOut  int64 // abandoned by the client
	Other     int64 // any other answer or transport error
	Applied   int64 // deposits the account holds (each deposit is 1 cent)
	Latencies []time.Duration
}

// runStorm creates an account and drives the storm against it, then reads
// how many deposits were applied.
func runStorm(ctx context.Context, cfg stormConfig) (*stormReport, error) {
	if cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Timeout <= 0 || cfg.Backoff < 0 {
		return nil, fmt.Errorf("-storm needs -workers ≥ 1 and positive -duration and -timeout (got %d, %s, %s) and a -backoff ≥ 0", cfg.Workers, cfg.Duration, cfg.Timeout)
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers + 4, MaxIdleConns: cfg.Workers + 4, IdleConnTimeout: 30 * time.Second}}
	c := &loadClient{base: cfg.URL, http: client}
	id := "storm-" + randomHex(4)
	if _, err := c.post(ctx, "/accounts", map[string]any{"id": id}, http.StatusCreated); err != nil {
		return nil, fmt.Errorf("creating account %s: %w", id, err)
	}
	rep := &stormReport{}
	var mu sync.Mutex
	start := time.Now()
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			var mine stormReport
			for time.Now().Before(end) && ctx.Err() == nil {
				actx, cancel := context.WithTimeout(ctx, cfg.Timeout)
				req, err := http.NewRequestWithContext(actx, http.MethodPost, cfg.URL+"/accounts/"+id+"/deposit", strings.NewReader(`{"amount":1}`))
				if err != nil {
					cancel()
					mine.Other++
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				if cfg.SendDeadline {
					req.Header.Set(requestTimeoutHeader, strconv.FormatInt(cfg.Timeout.Milliseconds(), 10))
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				mine.Requests++
				switch {
				case err != nil && errors.Is(err, context.DeadlineExceeded):
					mine.TimedOut++
				case err != nil:
					mine.Other++
				default:
					_, rerr := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch {
					case rerr != nil && errors.Is(rerr, context.DeadlineExceeded):
						mine.TimedOut++
					case resp.StatusCode == http.StatusOK && rerr == nil:
						mine.Acked++
						mine.Latencies = append(mine.Latencies, time.Since(t0))
					case resp.StatusCode == http.StatusServiceUnavailable:
						mine.Refused++
						if resp.Header.Get("Retry-After") != "" {
							mine.RetryHint++
						}
						cancel()
						time.Sleep(cfg.Backoff)
					default:
						mine.Other++
					}
				}
				cancel()
			}
			mu.Lock()
			rep.Requests += mine.Requests
			rep.Acked += mine.Acked
			rep.Refused += mine.Refused
			rep.RetryHint += mine.RetryHint
			rep.TimedOut += mine.TimedOut
			rep.Other += mine.Other
			rep.Latencies = append(rep.Latencies, mine.Latencies...)
			mu.Unlock()
		})
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	// Deposits decided for callers who left may still be appending: read
	// the balance once it stops moving (through the account's shedding,
	// which can outlast the storm by a little).
	var last int64 = -1
	for range 50 {
		var v AccountView
		if err := c.getSettled(ctx, "/accounts/"+id, &v); err != nil {
			return nil, fmt.Errorf("reading account %s: %w", id, err)
		}
		if v.Balance == last {
			break
		}
		last = v.Balance
		time.Sleep(200 * time.Millisecond)
	}
	rep.Applied = last
	slices.Sort(rep.Latencies)
	return rep, nil
}

func printStorm(w io.Writer, cfg stormConfig, rep *stormReport) {
	secs := rep.Elapsed.Seconds()
	gone := 0.0
	if rep.Applied > 0 {
		gone = 100 * float64(rep.Applied-rep.Acked) / float64(rep.Applied)
	}
	fmt.Fprintf(w, "storm: %d clients on one account, %s timeout, Request-Timeout sent: %t, %s\n", cfg.Workers, cfg.Timeout, cfg.SendDeadline, rep.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "requests: %d; acknowledged: %d (%.0f/s); 503: %d (%d with Retry-After); timed out: %d; other: %d\n",
		rep.Requests, rep.Acked, float64(rep.Acked)/secs, rep.Refused, rep.RetryHint, rep.TimedOut, rep.Other)
	fmt.Fprintf(w, "applied: %d (%.0f/s); applied for callers who left: %.0f%%\n", rep.Applied, float64(rep.Applied)/secs, gone)
	if n := len(rep.Latencies); n > 0 {
		fmt.Fprintf(w, "latency of acknowledged: p50 %s p99 %s\n", rep.Latencies[n/2].Round(10*time.Microsecond), rep.Latencies[min(n-1, n*99/100)].Round(10*time.Microsecond))
	}
}
