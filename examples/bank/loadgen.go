package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scribe-es/scribe/examples/bank/bank"
)

// loadConfig configures a load run.
type loadConfig struct {
	URL      string
	Workers  int
	Duration time.Duration
	Accounts int
	// Initial is each account's opening deposit.
	Initial int64
	// MaxAmount bounds each random transfer (amounts are 1..MaxAmount).
	MaxAmount int64
	// Prefix starts every account ID, so runs do not collide (default random).
	Prefix string
	// Progress, when set, receives one line per second.
	Progress io.Writer
	// Client sends the requests (default: one tuned for Workers connections).
	Client *http.Client
}

// loadReport is the outcome of a load run.
type loadReport struct {
	Accounts    []string
	Total       int64 // money put into the accounts
	Elapsed     time.Duration
	OK          int64 // transfers answered 200
	Rejected    int64 // transfers answered 409 insufficient_funds
	Failed      int64 // transfers that got no definite answer after retries
	Retries     int64 // retries with the same Idempotency-Key
	Latencies   []time.Duration
	Invariant   invariantResult
	InvariantOK bool
}

// invariantResult is the outcome of the invariant check.
type invariantResult struct {
	Sum          int64
	Negative     []string // accounts with a negative balance
	FoldMismatch []string // accounts whose balance differs from the fold of their events
	// ReadModelMismatch lists accounts that GET /accounts (the read model)
	// still showed differently from GET /accounts/{id} after
	// readModelPatience.
	ReadModelMismatch []string
	Problems          []string
}

// readModelPatience is how long the final check waits for the accounts read
// model (a projection, which trails the accounts) to show every account as
// the account itself does.
const readModelPatience = 30 * time.Second

// runLoadgen is the loadgen subcommand: it parses flags, runs the load,
// prints the report to stdout and returns the exit code (1 when the
// invariant check fails).
func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bank loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := loadConfig{Progress: stderr}
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "base URL of a running bank service")
	fs.IntVar(&cfg.Workers, "workers", 32, "concurrent clients")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to drive transfers")
	fs.IntVar(&cfg.Accounts, "accounts", 100, "accounts to create and transfer between")
	fs.Int64Var(&cfg.Initial, "initial", 1_000_000, "opening deposit of each account, in cents")
	fs.Int64Var(&cfg.MaxAmount, "max-amount", 10_000, "largest transfer, in cents")
	fs.StringVar(&cfg.Prefix, "prefix", "", "account ID prefix (default: random, so runs do not collide)")
	storm := fs.Bool("storm", false, "instead of transfers, a retry storm: -workers clients deposit on ONE new account, each attempt abandoned after -timeout and retried at once")
	stormTimeout := fs.Duration("timeout", 50*time.Millisecond, "with -storm: how long a client waits for each attempt")
	stormBackoff := fs.Duration("backoff", 50*time.Millisecond, "with -storm: how long a client waits after a 503 before retrying")
	stormDeadline := fs.Bool("send-deadline", false, "with -storm: send each attempt's -timeout as its Request-Timeout header")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bank loadgen [flags]\n\nCreates accounts, drives random transfers against a running bank service,\nthen prints throughput, latency percentiles and an invariant check.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *storm {
		sc := stormConfig{URL: cfg.URL, Workers: cfg.Workers, Duration: cfg.Duration, Timeout: *stormTimeout, Backoff: *stormBackoff, SendDeadline: *stormDeadline}
		rep, err := runStorm(ctx, sc)
		if err != nil {
			fmt.Fprintf(stderr, "loadgen: %v\n", err)
			return 1
		}
		printStorm(stdout, sc, rep)
		return 0
	}
	rep, err := runLoad(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return 1
	}
	printReport(stdout, cfg, rep)
	if !rep.InvariantOK {
		return 1
	}
	return 0
}

func (c *loadConfig) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("-workers is %d; give at least 1", c.Workers)
	case c.Accounts < 2:
		return fmt.Errorf("-accounts is %d; give at least 2 (transfers need two accounts)", c.Accounts)
	case c.Duration <= 0:
		return fmt.Errorf("-duration is %s; give a positive duration such as 10s", c.Duration)
	case c.Initial < 1 || c.Initial > bank.MaxAmount:
		return fmt.Errorf("-initial is %d; give 1 to %d", c.Initial, bank.MaxAmount)
	case c.MaxAmount < 1 || c.MaxAmount > bank.MaxAmount:
		return fmt.Errorf("-max-amount is %d; give 1 to %d", c.MaxAmount, bank.MaxAmount)
	case !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://"):
		return fmt.Errorf("-url %q is not an http:// or https:// URL", c.URL)
	}
	return nil
}

// runLoad creates the accounts, drives random transfers for the duration and
// checks the invariants through the GET endpoints.
func runLoad(ctx context.Context, cfg loadConfig) (*loadReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.Prefix == "" {
		cfg.Prefix = "lg-" + randomHex(4) + "-"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers + 4, MaxIdleConns: cfg.Workers + 4, IdleConnTimeout: 30 * time.Second},
		}
	}
	c := &loadClient{base: cfg.URL, http: cfg.Client}
	rep := &loadReport{}
	for i := range cfg.Accounts {
		rep.Accounts = append(rep.Accounts, fmt.Sprintf("%s%d", cfg.Prefix, i))
	}

	// Create and fund the accounts, Workers at a time.
	if err := parallel(ctx, cfg.Workers, len(rep.Accounts), func(i int) error {
		id := rep.Accounts[i]
		if _, err := c.post(ctx, "/accounts", map[string]any{"id": id}, http.StatusCreated); err != nil {
			return fmt.Errorf("create account %s: %w", id, err)
		}
		if _, err := c.post(ctx, "/accounts/"+id+"/deposit", map[string]any{"amount": cfg.Initial}, http.StatusOK); err != nil {
			return fmt.Errorf("fund account %s: %w", id, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	rep.Total = cfg.Initial * int64(cfg.Accounts)

	// Drive transfers.
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var ok, rejected, failed, retries atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	progressDone := make(chan struct{})
	if cfg.Progress != nil {
		go func() {
			defer close(progressDone)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			var last int64
			for {
				select {
				case <-runCtx.Done():
					return
				case now := <-tick.C:
					n := ok.Load() + rejected.Load()
					fmt.Fprintf(cfg.Progress, "loadgen: %4.0fs  %8d transfers  %7d/s  (ok %d, insufficient funds %d, failed %d, retries %d)\n",
						now.Sub(start).Seconds(), n, n-last, ok.Load(), rejected.Load(), failed.Load(), retries.Load())
					last = n
				}
			}
		}()
	} else {
		close(progressDone)
	}
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			var lats []time.Duration
			defer func() {
				mu.Lock()
				rep.Latencies = append(rep.Latencies, lats...)
				mu.Unlock()
			}()
			for runCtx.Err() == nil {
				from := rng.IntN(cfg.Accounts)
				to := rng.IntN(cfg.Accounts - 1)
				if to >= from {
					to++
				}
				body := map[string]any{"from": rep.Accounts[from], "to": rep.Accounts[to], "amount": rng.Int64N(cfg.MaxAmount) + 1}
				key := randomHex(16)
				t0 := time.Now()
				// Retry with the same key until a definite answer: at most
				// once in effect thanks to the Idempotency-Key. The retries
				// use ctx, not runCtx, so a request in flight at the end of
				// the run still gets its definite answer.
				res, n, err := c.postSettled(ctx, "/transfers", key, body)
				retries.Add(int64(n))
				lats = append(lats, time.Since(t0))
				switch {
				case err == nil && res.status == http.StatusOK:
					ok.Add(1)
				case err == nil && res.status == http.StatusConflict && res.code == bank.CodeInsufficientFunds:
					rejected.Add(1)
				default:
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	cancel()
	<-progressDone
	rep.OK, rep.Rejected, rep.Failed, rep.Retries = ok.Load(), rejected.Load(), failed.Load(), retries.Load()

	inv, err := checkInvariants(ctx, c, rep.Accounts, rep.Total)
	if err != nil {
		return nil, err
	}
	rep.Invariant = inv
	rep.InvariantOK = len(inv.Problems) == 0
	return rep, nil
}

// checkInvariants reads every account and its events: money is conserved,
// no balance is negative, and each balance equals the fold of its events.
func checkInvariants(ctx context.Context, c *loadClient, accounts []string, total int64) (invariantResult, error) {
	var res invariantResult
	var mu sync.Mutex
	views := make(map[string]AccountView, len(accounts))
	err := parallel(ctx, 8, len(accounts), func(i int) error {
		id := accounts[i]
		var acct AccountView
		if err := c.get(ctx, "/accounts/"+id, &acct); err != nil {
			return err
		}
		mu.Lock()
		views[id] = acct
		mu.Unlock()
		events, err := c.allEvents(ctx, id)
		if err != nil {
			return err
		}
		folded, version, err := foldEvents(events)
		if err != nil {
			return fmt.Errorf("account %s: %w", id, err)
		}
		mu.Lock()
		defer mu.Unlock()
		res.Sum += acct.Balance
		if acct.Balance < 0 {
			res.Negative = append(res.Negative, id)
			res.Problems = append(res.Problems, fmt.Sprintf("account %s has a negative balance %d", id, acct.Balance))
		}
		if folded.Balance != acct.Balance || version < acct.Version {
			res.FoldMismatch = append(res.FoldMismatch, id)
			res.Problems = append(res.Problems, fmt.Sprintf("account %s: balance %d (version %d) but the fold of its %d events gives %d", id, acct.Balance, acct.Version, len(events), folded.Balance))
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if res.Sum != total {
		res.Problems = append(res.Problems, fmt.Sprintf("money not conserved: the accounts hold %d, %d was deposited", res.Sum, total))
	}
	if err := checkReadModel(ctx, c, views, readModelPatience, &res); err != nil {
		return res, err
	}
	return res, nil
}

// checkReadModel compares the read model (GET /accounts) with the accounts'
// own views, waiting up to patience for it to catch up.
func checkReadModel(ctx context.Context, c *loadClient, views map[string]AccountView, patience time.Duration, res *invariantResult) error {
	deadline := time.Now().Add(patience)
	for {
		listed, err := c.allAccounts(ctx)
		if err != nil {
			return err
		}
		byID := make(map[string]AccountView, len(listed))
		for _, a := range listed {
			byID[a.ID] = a
		}
		var differ, problems []string
		for _, id := range slices.Sorted(maps.Keys(views)) {
			if got, want := byID[id], views[id]; got != want {
				differ = append(differ, id)
				problems = append(problems, fmt.Sprintf("read model: account %s shows balance %d version %d, the account itself %d version %d", id, got.Balance, got.Version, want.Balance, want.Version))
			}
		}
		if len(differ) == 0 || time.Now().After(deadline) {
			res.ReadModelMismatch = differ
			res.Problems = append(res.Problems, problems...)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// foldEvents folds an account's events as the API returns them; versions
// must run 1, 2, 3 … without gaps.
func foldEvents(events []EventView) (bank.Account, uint64, error) {
	var a bank.Account
	for i, ev := range events {
		if ev.Version != uint64(i+1) {
			return a, 0, fmt.Errorf("event %d has version %d, want %d", i, ev.Version, i+1)
		}
		e, err := bank.DecodeEvent(ev.Type, ev.Data)
		if err != nil {
			return a, 0, err
		}
		a = bank.Evolve(a, e)
	}
	return a, uint64(len(events)), nil
}

func printReport(w io.Writer, cfg loadConfig, rep *loadReport) {
	n := rep.OK + rep.Rejected
	fmt.Fprintf(w, "transfers: %d in %.1fs with %d workers over %d accounts: %.0f/s\n", n, rep.Elapsed.Seconds(), cfg.Workers, cfg.Accounts, float64(n)/rep.Elapsed.Seconds())
	fmt.Fprintf(w, "  ok %d, insufficient funds %d, failed %d, retries %d\n", rep.OK, rep.Rejected, rep.Failed, rep.Retries)
	p := percentiles(rep.Latencies, 0.50, 0.95, 0.99)
	fmt.Fprintf(w, "latency: p50 %s  p95 %s  p99 %s\n", p[0], p[1], p[2])
	status := "OK"
	if !rep.InvariantOK {
		status = "FAILED"
	}
	fmt.Fprintf(w, "invariants %s: %d accounts hold %d (deposited %d), %d negative, %d differ from the fold of their events, %d differ in the read model\n",
		status, len(rep.Accounts), rep.Invariant.Sum, rep.Total, len(rep.Invariant.Negative), len(rep.Invariant.FoldMismatch), len(rep.Invariant.ReadModelMismatch))
	for _, p := range rep.Invariant.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

// percentiles returns the q-quantiles of ds (nearest rank).
func percentiles(ds []time.Duration, qs ...float64) []time.Duration {
	out := make([]time.Duration, len(qs))
	if len(ds) == 0 {
		return out
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for i, q := range qs {
		k := int(q*float64(len(s)) + 0.5)
		if k < 1 {
			k = 1
		}
		if k > len(s) {
			k = len(s)
		}
		out[i] = s[k-1].Round(10 * time.Microsecond)
	}
	return out
}

// parallel runs f(0..n-1) on up to workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// loadClient speaks the bank's HTTP API.
type loadClient struct {
	base string
	http *http.Client
}

type httpResult struct {
	status int
	code   bank.Code
	header http.Header
	body   []byte
}

// postKey sends a JSON POST with an Idempotency-Key (when key is not empty).
func (c *loadClient) postKey(ctx context.Context, path, key string, body any) (httpResult, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return httpResult{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(data))
	if err != nil {
		return httpResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return c.do(req)
}

// settleBudget bounds how long postSettled retries one request: past it,
// the request counts as failed (no definite answer). A move's cut-over or a
// member's rejoin answers 503 for well under it.
const settleBudget = 30 * time.Second

// postSettled sends a JSON POST with the Idempotency-Key key and repeats it,
// with the same key, on transport errors and 5xx answers until an answer
// below 500 or settleBudget has passed (settle). It returns the last answer
// and the number of repeats.
func (c *loadClient) postSettled(ctx context.Context, path, key string, body any) (httpResult, int, error) {
	return settle(ctx, func(res httpResult) bool { return res.status >= 500 }, func() (httpResult, error) {
		return c.postKey(ctx, path, key, body)
	})
}

// getSettled is get repeated while the answer is a 503 (a stream still
// shedding after a storm) or the request fails in transport (settle).
func (c *loadClient) getSettled(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	res, _, err := settle(ctx, func(res httpResult) bool { return res.status == http.StatusServiceUnavailable }, func() (httpResult, error) {
		return c.do(req)
	})
	if err != nil {
		return err
	}
	return decodeOK(req, res, v)
}

// settle repeats attempt while it fails in transport or its answer is one
// again says to repeat, until settleBudget has passed: after a 503 it waits
// what the answer's Retry-After says (a polite client's pause; at least 50
// ms, at most 2 s), after another failure 50 ms. It returns the last answer,
// its transport error (nil for any answer) and the number of repeats.
func settle(ctx context.Context, again func(httpResult) bool, attempt func() (httpResult, error)) (httpResult, int, error) {
	deadline := time.Now().Add(settleBudget)
	for repeats := 0; ; repeats++ {
		res, err := attempt()
		if err == nil && !again(res) {
			return res, repeats, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return res, repeats, err
		}
		pause := 50 * time.Millisecond
		if err == nil && res.status == http.StatusServiceUnavailable {
			if secs, perr := strconv.Atoi(res.header.Get("Retry-After")); perr == nil && secs >= 0 {
				pause = max(min(time.Duration(secs)*time.Second, 2*time.Second), pause)
			}
		}
		select {
		case <-ctx.Done():
			return res, repeats, err
		case <-time.After(pause):
		}
	}
}

// post sends a POST (repeated with one Idempotency-Key by postSettled) and
// requires the given status.
func (c *loadClient) post(ctx context.Context, path string, body any, want int) (httpResult, error) {
	res, _, err := c.postSettled(ctx, path, randomHex(16), body)
	if err != nil {
		return res, err
	}
	if res.status != want {
		return res, fmt.Errorf("POST %s: status %d, want %d: %s", path, res.status, want, strings.TrimSpace(string(res.body)))
	}
	return res, nil
}

// get fetches path and decodes the 200 response into v.
func (c *loadClient) get(ctx context.Context, path string, v any) error {
	_, err := c.fetch(ctx, c.base+path, v)
	return err
}

// fetch GETs the absolute URL target, decodes the 200 response into v and
// returns the response's header.
func (c *loadClient) fetch(ctx context.Context, target string, v any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.do(req)
	if err != nil {
		return nil, err
	}
	if err := decodeOK(req, res, v); err != nil {
		return nil, err
	}
	return res.header, nil
}

// decodeOK decodes the 200 answer res to req into v; any other status is
// an error naming it.
func decodeOK(req *http.Request, res httpResult, v any) error {
	if res.status != http.StatusOK {
		return fmt.Errorf("GET %s: status %d: %s", req.URL.RequestURI(), res.status, strings.TrimSpace(string(res.body)))
	}
	if err := json.Unmarshal(res.body, v); err != nil {
		return fmt.Errorf("GET %s: decoding the body: %w", req.URL.RequestURI(), err)
	}
	return nil
}

// maxFollowedEvents bounds allEvents: a server whose Link headers never end
// makes it fail instead of reading forever.
const maxFollowedEvents = 1_000_000

// allEvents reads account id's whole history: GET /accounts/{id}/events,
// then each page its rel="next" Link header names, until a page has none.
// It checks that the versions run 1, 2, 3 … across pages, so a server that
// links back to a page it already served fails at once, and it gives up
// after maxFollowedEvents events.
func (c *loadClient) allEvents(ctx context.Context, id string) ([]EventView, error) {
	var all []EventView
	err := followPages(ctx, c, "/accounts/"+url.PathEscape(id)+"/events", func(u *url.URL, page []EventView) error {
		for _, ev := range page {
			if want := uint64(len(all) + 1); ev.Version != want {
				return fmt.Errorf("GET %s: account %s: event version %d where version %d was due; the pages are not contiguous", u.RequestURI(), id, ev.Version, want)
			}
			all = append(all, ev)
		}
		if len(all) > maxFollowedEvents {
			return fmt.Errorf("account %s: more than %d events after following Link headers; giving up in case the server links pages in a loop", id, maxFollowedEvents)
		}
		return nil
	})
	return all, err
}

// allAccounts reads the accounts read model: GET /accounts and the pages
// its Link headers name. IDs must ascend across pages.
func (c *loadClient) allAccounts(ctx context.Context) ([]AccountView, error) {
	var all []AccountView
	err := followPages(ctx, c, "/accounts?limit=1000", func(u *url.URL, page []AccountView) error {
		for _, a := range page {
			if len(all) > 0 && a.ID <= all[len(all)-1].ID {
				return fmt.Errorf("GET %s: account %q follows %q; the pages are not in ID order", u.RequestURI(), a.ID, all[len(all)-1].ID)
			}
			all = append(all, a)
		}
		if len(all) > maxFollowedEvents {
			return fmt.Errorf("more than %d accounts after following Link headers; giving up in case the server links pages in a loop", maxFollowedEvents)
		}
		return nil
	})
	return all, err
}

// followPages GETs path and then each page the rel="next" Link header
// names, passing each decoded page to each, until a page has no next link.
// A link that leaves the service, or an empty page with a next link, is an
// error.
func followPages[T any](ctx context.Context, c *loadClient, path string, each func(u *url.URL, page []T) error) error {
	base, err := url.Parse(c.base)
	if err != nil {
		return fmt.Errorf("base URL %q: %w", c.base, err)
	}
	u, err := base.Parse(c.base + path)
	if err != nil {
		return fmt.Errorf("path %q: %w", path, err)
	}
	for {
		var page []T
		header, err := c.fetch(ctx, u.String(), &page)
		if err != nil {
			return err
		}
		if err := each(u, page); err != nil {
			return err
		}
		next, err := nextLink(header.Values("Link"))
		if err != nil {
			return fmt.Errorf("GET %s: %w", u.RequestURI(), err)
		}
		if next == "" {
			return nil
		}
		if len(page) == 0 {
			return fmt.Errorf("GET %s: an empty page links to a next page; the server's paging is broken", u.RequestURI())
		}
		nu, err := u.Parse(next)
		if err != nil {
			return fmt.Errorf("GET %s: the next link %q is not a URI reference: %w", u.RequestURI(), next, err)
		}
		if nu.Scheme != base.Scheme || nu.Host != base.Host {
			return fmt.Errorf("GET %s: the next link %q leaves the service at %s", u.RequestURI(), next, c.base)
		}
		u = nu
	}
}

// nextLink returns the target of the link with relation type "next" in the
// values of Link header fields (RFC 8288), or "" when there is none. The
// target is returned as written: a URI reference to resolve against the
// request's URL.
func nextLink(values []string) (string, error) {
	for _, v := range values {
		s := v
		for {
			s = strings.TrimLeft(s, " \t,")
			if s == "" {
				break
			}
			if s[0] != '<' {
				return "", fmt.Errorf("malformed Link header %q: a link must start with <URI>", v)
			}
			end := strings.IndexByte(s, '>')
			if end < 0 {
				return "", fmt.Errorf("malformed Link header %q: <URI> is not closed", v)
			}
			target := s[1:end]
			s = s[end+1:]
			next := false
			// Parameters: ; name[=token | ="quoted string"] until ',' or the end.
			for {
				s = strings.TrimLeft(s, " \t")
				if s == "" || s[0] == ',' {
					break
				}
				if s[0] != ';' {
					return "", fmt.Errorf("malformed Link header %q: expected ; or , after a link's URI or parameter", v)
				}
				s = strings.TrimLeft(s[1:], " \t")
				n := strings.IndexAny(s, "=;,")
				if n < 0 {
					n = len(s)
				}
				name := strings.TrimSpace(s[:n])
				s = s[n:]
				value := ""
				if strings.HasPrefix(s, "=") {
					s = strings.TrimLeft(s[1:], " \t")
					var err error
					if value, s, err = linkParamValue(s); err != nil {
						return "", fmt.Errorf("malformed Link header %q: %w", v, err)
					}
				}
				if strings.EqualFold(name, "rel") {
					for _, rel := range strings.Fields(value) {
						if strings.EqualFold(rel, "next") {
							next = true
						}
					}
				}
			}
			if next {
				return target, nil
			}
		}
	}
	return "", nil
}

// linkParamValue reads a Link parameter's value at the start of s (a quoted
// string or a token) and returns it and the rest of s.
func linkParamValue(s string) (value, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		n := strings.IndexAny(s, ";, \t")
		if n < 0 {
			n = len(s)
		}
		return s[:n], s[n:], nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) {
				return "", "", errors.New("a quoted parameter value ends in a backslash")
			}
			i++
			b.WriteByte(s[i])
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", errors.New("a quoted parameter value is not closed")
}

func (c *loadClient) do(req *http.Request) (httpResult, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return httpResult{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpResult{}, err
	}
	res := httpResult{status: resp.StatusCode, header: resp.Header, body: body}
	if resp.StatusCode >= 400 {
		var eb errorBody
		if json.Unmarshal(body, &eb) == nil {
			res.code = eb.Code
		}
	}
	return res, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
