//go:build !nocluster

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/freeport"
	"github.com/scribe-es/scribe/internal/pgtest"
)

// clusterPorts returns n distinct TCP ports that were free on 127.0.0.1 and
// that no outgoing connection can take before a member binds them.
func clusterPorts(t *testing.T, n int) []int {
	t.Helper()
	return freeport.Ports(t, n)
}

// bankPost posts body to url with an Idempotency-Key and decodes the JSON answer.
func bankPost(ctx context.Context, hc *http.Client, url, key string, body any, out any) (int, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// Three bank processes form a cluster on one Postgres schema; transfers,
// deposits and reads are sent to all of them: any member serves any
// account, money is conserved, every acknowledged transfer is stored once,
// and each account's events are gap-free.
func TestPostgresClusterThreeNodes(t *testing.T) {
	t.Parallel()
	runBankCluster(t, false)
}

// The same with a SIGKILL of one member in the middle of the load: its
// accounts are served by the others within the documented bound
// (session timeout 3 s + detection), and no acknowledged operation is lost.
func TestPostgresClusterKill(t *testing.T) {
	t.Parallel()
	runBankCluster(t, true)
}

// bankClient sends requests to a cluster's members.
type bankClient struct {
	procs []*process
	hc    *http.Client
	dead  sync.Map // index -> true once killed
}

// post sends a request to member i, moving to the next live member on a
// transport error or a 503, with the same Idempotency-Key, until ctx ends.
func (c *bankClient) post(ctx context.Context, i int, path, key string, body any, out any) (int, error) {
	var last error
	for attempt := 0; ctx.Err() == nil; attempt++ {
		k := (i + attempt) % len(c.procs)
		if _, dead := c.dead.Load(k); dead {
			continue
		}
		status, err := bankPost(ctx, c.hc, "http://"+c.procs[k].addr+path, key, body, out)
		if err == nil && status != http.StatusServiceUnavailable {
			return status, nil
		}
		last = fmt.Errorf("member %d: status %d, %v", k, status, err)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("request %s (key %s) unresolved: %w (last: %v)", path, key, ctx.Err(), last)
}

func runBankCluster(t *testing.T, kill bool) {
	const n, accounts, opening = 3, 24, 1000
	procs := startBankCluster(t, n)
	c := &bankClient{procs: procs, hc: &http.Client{Timeout: 20 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mustPost := func(i int, path, key string, body any, out any) int {
		t.Helper()
		status, err := c.post(ctx, i, path, key, body, out)
		require.NoError(t, err)
		return status
	}
	for a := range accounts {
		var view AccountView
		id := fmt.Sprintf("acct%02d", a)
		require.Equal(t, http.StatusCreated, mustPost(a, "/accounts", "open-"+id, map[string]string{"id": id}, &view), id)
		require.Equal(t, http.StatusOK, mustPost(a+1, "/accounts/"+id+"/deposit", "dep-"+id, map[string]int64{"amount": opening}, &view))
	}
	// A domain error crosses members with its code and message.
	var e struct{ Error, Code string }
	for i := range n {
		require.Equal(t, http.StatusConflict, mustPost(i, "/accounts/acct00/withdraw", fmt.Sprintf("big-%d", i), map[string]int64{"amount": 900000}, &e))
		require.Equal(t, "insufficient_funds", e.Code)
		require.Contains(t, e.Error, "acct00", "the message of the hosting member's error")
	}

	var acked sync.Map // transfer ID -> true
	var deposits, ackedCount atomic.Int64
	loadFor := 5 * time.Second
	if kill {
		loadFor = 12 * time.Second
	}
	deadline := time.Now().Add(loadFor)
	var load sync.WaitGroup
	for w := range 16 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				from, to := fmt.Sprintf("acct%02d", (w+i)%accounts), fmt.Sprintf("acct%02d", (w*5+i*7+1)%accounts)
				if from == to {
					continue
				}
				var tv TransferView
				status, err := c.post(ctx, w+i, "/transfers", fmt.Sprintf("t-%d-%d", w, i), map[string]any{"from": from, "to": to, "amount": 1 + (w*i)%50}, &tv)
				switch {
				case err != nil:
					t.Errorf("transfer %s->%s: %v", from, to, err)
					return
				case status == http.StatusOK:
					acked.Store(tv.ID, true)
					ackedCount.Add(1)
				case status == http.StatusConflict: // insufficient funds
				default:
					t.Errorf("transfer %s->%s: status %d", from, to, status)
					return
				}
			}
		}()
	}
	if kill {
		// The load runs on three members first.
		require.Eventually(t, func() bool { return ackedCount.Load() >= 300 }, time.Minute, 20*time.Millisecond)
		killed := time.Now()
		require.NoError(t, procs[2].cmd.Process.Signal(syscall.SIGKILL))
		<-procs[2].exited
		c.dead.Store(2, true)
		var worst atomic.Int64
		var probes sync.WaitGroup
		for a := range accounts {
			probes.Add(1)
			go func() {
				defer probes.Done()
				var view AccountView
				id := fmt.Sprintf("acct%02d", a)
				status, err := c.post(ctx, a, "/accounts/"+id+"/deposit", "probe-"+id, map[string]int64{"amount": 1}, &view)
				if err != nil || status != http.StatusOK {
					t.Errorf("account %s not served after the kill: %d %v", id, status, err)
					return
				}
				deposits.Add(1)
				d := int64(time.Since(killed))
				for {
					w := worst.Load()
					if d <= w || worst.CompareAndSwap(w, d) {
						break
					}
				}
			}()
		}
		probes.Wait()
		// The documented bound: the session timeout (3 s), the detection
		// (-cluster-refresh 300ms + the 2 s health check timeout) and one
		// lease acquisition (open timeout 5 s).
		bound := 3*time.Second + 2300*time.Millisecond + 5*time.Second
		t.Logf("failover: every account served again %s after SIGKILL (limit %s)", time.Duration(worst.Load()).Round(time.Millisecond), bound)
		require.Less(t, time.Duration(worst.Load()), bound)
	}
	load.Wait()

	live := []*process{procs[0], procs[1]}
	if !kill {
		live = procs
	}
	var total int64
	stored := map[string]int{}
	for a := range accounts {
		id := fmt.Sprintf("acct%02d", a)
		reader := &loadClient{base: "http://" + live[a%len(live)].addr, http: c.hc}
		events, err := reader.allEvents(ctx, id)
		require.NoError(t, err, "account %s: its events", id)
		var balance int64
		for v, ev := range events {
			require.Equal(t, uint64(v+1), ev.Version, "account %s: versions are gap-free", id)
			var d struct {
				Amount     int64
				TransferID string
				From       string
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			switch ev.Type {
			case "MoneyDeposited":
				balance += d.Amount
			case "MoneyWithdrawn":
				balance -= d.Amount
			case "MoneyTransferred":
				stored[d.TransferID]++
				if d.From == id {
					balance -= d.Amount
				} else {
					balance += d.Amount
				}
			}
			require.GreaterOrEqual(t, balance, int64(0), "account %s: never negative", id)
		}
		var view AccountView
		require.Equal(t, http.StatusOK, getJSON(t, c.hc, "http://"+live[(a+1)%len(live)].addr+"/accounts/"+id, &view))
		require.Equal(t, balance, view.Balance, "account %s: the served balance is the fold of its events", id)
		total += balance
	}
	require.Equal(t, int64(accounts*opening)+deposits.Load(), total, "money conserved")
	ackedN := 0
	acked.Range(func(k, _ any) bool {
		ackedN++
		require.Equal(t, 2, stored[k.(string)], "acknowledged transfer %s is stored once, in both accounts' streams", k)
		return true
	})
	require.Len(t, stored, ackedN, "every stored transfer was acknowledged")
	t.Logf("%d transfers acknowledged across %d members", ackedN, n)
}

// startBankCluster builds the bank and starts n members on a fresh Postgres
// schema (session timeout 3 s), the first one alone so it migrates.
func startBankCluster(t *testing.T, n int) []*process {
	t.Helper()
	_, schema := pgSchema(t)
	return startBankClusterIn(t, n, pgtest.URL(t), schema)
}

// startBankClusterIn is startBankCluster on schema of dbURL's database.
func startBankClusterIn(t *testing.T, n int, dbURL, schema string) []*process {
	t.Helper()
	bin := buildBinary(t)
	ports := clusterPorts(t, 2*n)
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
	}
	args := func(i int) []string {
		return []string{"-addr", "127.0.0.1:0", "-db", dbURL, "-schema", schema, "-node", fmt.Sprintf("bank-%d", i+1),
			"-cluster-name", "bank-" + schema, "-cluster-port", fmt.Sprint(ports[2*i]), "-cluster-health-port", fmt.Sprint(ports[2*i+1]),
			"-cluster-peers", strings.Join(peers, ","), "-cluster-refresh", "300ms", "-session-timeout", "3s"}
	}
	procs := make([]*process, n)
	procs[0] = startProcess(t, bin, args(0)...)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i] = startProcess(t, bin, args(i)...)
		}()
	}
	wg.Wait()
	for i, p := range procs {
		require.NotNil(t, p, "member %d started", i)
	}
	return procs
}

func getJSON(t *testing.T, hc *http.Client, url string, out any) int {
	t.Helper()
	resp, err := hc.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	return resp.StatusCode
}

// A bank member SIGSTOPped past its session timeout while the other member
// takes its accounts over and writes to them: once resumed (SIGCONT) it
// notices (its log says it left the cluster and is rejoining), answers
// every request it cannot serve with a 503 and a Retry-After (lease_lost
// while out; a request admitted in the instant before the member noticed
// may instead wait for a lease the other member still holds and answer
// unavailable, or have its append cut off and answer outcome_unknown), then rejoins the cluster on its own, /readyz turns 200, and
// it serves every account with the balance the other member wrote (never a
// stale one); /healthz stays 200 throughout.
//
// How long the member is out depends on the machine (a request that waits
// for a lease can outlast the whole rejoin), so the test does not require
// that a probe lands inside that window: it requires the log lines, which
// the member writes whatever the timing, and checks every answer it does
// get. /readyz is polled on its own goroutine and what it saw is logged.
func TestPostgresClusterPausedMemberRejoins(t *testing.T) {
	t.Parallel()
	const accounts = 6
	procs := startBankCluster(t, 2)
	c := &bankClient{procs: procs, hc: &http.Client{Timeout: 10 * time.Second}}
	defer c.hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	balance := map[string]int64{}
	deposit := func(via int, id, key string, amount int64) {
		t.Helper()
		var view AccountView
		status, err := c.post(ctx, via, "/accounts/"+id+"/deposit", key, map[string]int64{"amount": amount}, &view)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		balance[id] += amount
		require.Equal(t, balance[id], view.Balance, "account %s", id)
	}
	for a := range accounts {
		id := fmt.Sprintf("p%02d", a)
		var view AccountView
		status, err := c.post(ctx, a, "/accounts", "open-"+id, map[string]string{"id": id}, &view)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, status)
		deposit(a, id, "first-"+id, 100)
	}

	paused := procs[1]
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			_ = paused.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	c.dead.Store(1, true)
	// The other member serves every account: those of the paused member
	// once its node session expired in the database.
	for a := range accounts {
		id := fmt.Sprintf("p%02d", a)
		deposit(0, id, "meanwhile-"+id, 10)
	}

	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
	stopped = false
	resumed := time.Now()
	url := "http://" + paused.addr
	codes := map[string]int{}
	var rejoining atomic.Bool
	pollCtx, stopPolling := context.WithCancel(ctx)
	var polling sync.WaitGroup
	polling.Go(func() {
		for pollCtx.Err() == nil {
			st, body := httpDo(c.hc, "GET", url+"/readyz", "")
			if st == http.StatusServiceUnavailable && strings.Contains(body, "rejoining") {
				rejoining.Store(true)
			}
			time.Sleep(5 * time.Millisecond) // polling
		}
	})
	defer func() { stopPolling(); polling.Wait() }()
	served := map[string]bool{}
	for len(served) < accounts {
		require.Less(t, time.Since(resumed), 30*time.Second, "the resumed member serves every account again within 30 s (served %v, 503 answers %v)", served, codes)
		st, _ := httpDo(c.hc, "GET", url+"/healthz", "")
		require.Equal(t, http.StatusOK, st, "alive throughout")
		for a := range accounts {
			id := fmt.Sprintf("p%02d", a)
			if served[id] {
				continue
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/accounts/"+id+"/deposit", strings.NewReader(`{"amount":1}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "again-"+id) // a retry settles an unknown outcome
			resp, err := c.hc.Do(req)
			require.NoError(t, err)
			var out struct {
				AccountView
				Code  string `json:"code"`
				Error string `json:"error"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			_ = resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				require.Equal(t, balance[id]+1, out.Balance, "account %s: a stale balance", id)
				balance[id]++
				served[id] = true
			case http.StatusServiceUnavailable:
				require.NotEmpty(t, resp.Header.Get("Retry-After"), "a 503 says when to retry: %s", out.Error)
				// outcome_unknown: an append cut off by the member's fencing; the
				// retry with the same key settles it (the balance check below
				// fails if it was applied twice).
				require.Contains(t, []string{"lease_lost", "unavailable", "outcome_unknown"}, out.Code, "account %s: a 503 while the member rejoins: %s", id, out.Error)
				codes[out.Code]++
			default:
				t.Fatalf("account %s: %d %s %s", id, resp.StatusCode, out.Code, out.Error)
			}
		}
		time.Sleep(20 * time.Millisecond) // polling
	}
	took := time.Since(resumed)
	st, body := httpDo(c.hc, "GET", url+"/readyz", "")
	require.Equal(t, http.StatusOK, st, "ready again: %s", body)
	t.Logf("the resumed member served every account %s after SIGCONT; 503 answers before: %v; /readyz seen saying rejoining: %v", took.Round(time.Millisecond), codes, rejoining.Load())
	require.Contains(t, paused.log(), "member left the cluster; rejoining", "the member noticed it lost its node session")
	require.Contains(t, paused.log(), "member rejoined the cluster")
	for a := range accounts {
		id := fmt.Sprintf("p%02d", a)
		var view AccountView
		require.Equal(t, http.StatusOK, getJSON(t, c.hc, "http://"+procs[0].addr+"/accounts/"+id, &view))
		require.Equal(t, balance[id], view.Balance, "account %s: the other member agrees", id)
	}
}
